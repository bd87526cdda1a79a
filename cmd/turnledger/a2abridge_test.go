package main

import (
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	tl "github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// echoAgent is a remote A2A agent that completes every task with its
// message's text.
type echoAgent struct{}

func (echoAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("echo: "+ec.Message.Parts[0].Text()))), nil)
	}
}

func (echoAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {}
}

// TestA2ABridgeCommand: turnledger a2a-bridge forwards a Turn of its agent
// to a remote A2A agent and finishes it with the remote's answer; a missing
// flag is a usage error.
func TestA2ABridgeCommand(t *testing.T) {
	if code, _, stderr := runTurnledger(t, "a2a-bridge", "--project", "p"); code != 2 || !strings.Contains(stderr, "--agent and --card are required") {
		t.Errorf("a2a-bridge without --agent = exit %d, %q; want a usage error", code, stderr)
	}
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0")
	ctx := context.Background()
	adm, err := tl.New(base, tl.WithAdminToken(engineAdminToken(t, dir)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.RegisterAgent(ctx, "p", tl.RegisterRequest{Spec: tl.AgentSpec{AgentID: "proxy", Role: "worker"},
		Provenance: tl.Provenance{Kind: "test"}}); err != nil {
		t.Fatal(err)
	}
	cred, err := adm.IssueCredential(ctx, "p", "proxy")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	remote := httptest.NewServer(mux)
	defer remote.Close()
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(echoAgent{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a.AgentCard{Name: "echo", Description: "echoes", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(remote.URL+"/a2a", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"}, Skills: []a2a.AgentSkill{}}))

	bctx, cancel := context.WithCancel(ctx)
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(bctx, []string{"a2a-bridge", "--url", base, "--project", "p", "--agent", "proxy", "--token", cred.Token,
			"--card", remote.URL + a2asrv.WellKnownAgentCardPath}, out, out)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("a2a-bridge exited with %d:\n%s", code, out.String())
		}
	}()
	turn, err := adm.DispatchTurn(ctx, "p", tl.DispatchRequest{RequestedBy: tl.AgentRef{ProjectID: "p", AgentID: "proxy"},
		TargetAgent: tl.AgentRef{ProjectID: "p", AgentID: "proxy"}, Input: map[string]any{"parts": []any{map[string]any{"text": "hello"}}},
		TurnKind: "echo", DispatchKey: "k1", Authority: tl.Root("r1")})
	if err != nil {
		t.Fatal(err)
	}
	checkfor.Until(t, 15*time.Second, "the bridged Turn to finish", func() bool {
		got, err := adm.GetTurn(ctx, "p", turn.TurnID)
		turn = got
		return err == nil && got.State == "finished"
	})
	if turn.Outcome == nil || *turn.Outcome != "succeeded" || !strings.Contains(string(turn.FinalPayload), "echo: hello") {
		t.Errorf("bridged Turn finished %v with %s; want succeeded with the remote's answer", turn.Outcome, turn.FinalPayload)
	}
}
