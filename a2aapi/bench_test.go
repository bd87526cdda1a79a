package a2aapi_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/turnledger/turnledger/client"
)

// BenchmarkSend measures a new task over A2A (the a2a-go client,
// JSON-RPC, returnImmediately) against the same dispatch over the HTTP API
// (the Go client), in one environment: the A2A face's cost is the ratio of
// the two.
//
//	go test -run '^$' -bench BenchmarkSend -benchtime 2000x ./a2aapi
func BenchmarkSend(b *testing.B) {
	e := newEnv(b, nil)
	boss := e.agent("p", "boss", false, "turns:dispatch")
	e.agent("p", "writer", true)
	ctx := context.Background()
	b.Run("http-dispatch", func(b *testing.B) {
		c, err := client.New(e.url, client.WithAgent("p", "boss", boss))
		if err != nil {
			b.Fatal(err)
		}
		for i := range b.N {
			if _, err := c.DispatchTurn(ctx, "p", client.DispatchRequest{RequestedBy: client.AgentRef{ProjectID: "p", AgentID: "boss"},
				TargetAgent: client.AgentRef{ProjectID: "p", AgentID: "writer"}, Input: map[string]any{"parts": []any{map[string]any{"text": "x"}}},
				TurnKind: "message", DispatchKey: fmt.Sprintf("h-%d", i), Authority: client.Root(fmt.Sprintf("h-%d", i))}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("a2a-send", func(b *testing.B) {
		c := e.client("p", "writer", boss, a2a.TransportProtocolJSONRPC)
		for i := range b.N {
			m := message(fmt.Sprintf("a-%d", i), "x")
			if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
