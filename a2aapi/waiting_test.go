package a2aapi_test

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/httpapi"
)

// TestWaitingRequestsHoldNoSlots: with a project bound of two requests in
// flight, two open streams and a blocking SendMessage waiting for its task
// hold no slot (the test's own polls take one at a time), so a GetTask of
// the same project is still served; the blocking send answers once the Turn
// finishes, and the streams see it.
func TestWaitingRequestsHoldNoSlots(t *testing.T) {
	e := newEnvWith(t, nil, func(c *httpapi.Config) { c.MaxProjectInFlight, c.MaxInFlight = 2, 4 })
	boss := e.agent("p", "boss", false, "turns:dispatch")
	wtok := e.agent("p", "writer", true)
	w := e.worker("p", "writer", wtok)
	c := e.client("p", "writer", boss, a2a.TransportProtocolJSONRPC)
	ctx := context.Background()

	first := send(t, c, message("m1", "work"), true)
	resp1, next1 := openStream(t, e, boss, string(first.ID), "")
	defer resp1.Body.Close()
	resp2, _ := openStream(t, e, boss, string(first.ID), "")
	defer resp2.Body.Close()
	if _, ok := next1(); !ok {
		t.Fatal("the first stream ended before its first frame")
	}

	waitFor(t, "the streams to hold no slot", func() bool { return e.api.InFlight("p") == 0 })
	done := make(chan *a2a.Task, 1)
	go func() {
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: message("m2", "more work")})
		if err != nil {
			t.Errorf("blocking SendMessage = %v", err)
			done <- nil
			return
		}
		done <- res.(*a2a.Task)
	}()
	waitFor(t, "the blocking send's Turn to be queued", func() bool {
		page, err := w.ListTurns(ctx, "p", client.TurnQuery{State: "queued"})
		return err == nil && len(page.Items) == 2
	})
	waitFor(t, "no request of the project in flight", func() bool { return e.api.InFlight("p") == 0 })
	for range 2 {
		if task, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: first.ID}); err != nil || task.ID != first.ID {
			t.Fatalf("GetTask beside two streams and a waiting send, with a bound of 2 = %+v, %v; want it served", task, err)
		}
	}

	for range 2 {
		claim, err := w.ClaimTurn(ctx, "p", "writer", 0)
		if err != nil || claim == nil {
			t.Fatalf("ClaimTurn = %+v, %v", claim, err)
		}
		if _, err := w.FinishTurn(ctx, claim.Claim, client.FinishRequest{Outcome: "succeeded", FinalPayload: map[string]any{"ok": true}, FinalRecordRole: "result"}); err != nil {
			t.Fatal(err)
		}
	}
	if task := <-done; task == nil || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the blocking send answered %+v, want its task COMPLETED", task)
	}
	var last frame
	for {
		f, ok := next1()
		if !ok {
			break
		}
		last = f
	}
	if last.Event != "turn.finished" {
		t.Errorf("the stream's last frame = %+v, want turn.finished", last)
	}
}
