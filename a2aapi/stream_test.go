package a2aapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/a2aapi"
	"github.com/turnledger/turnledger/client"
)

// frame is one SSE frame of a stream: its id and the A2A event's metadata.
type frame struct {
	ID    uint64
	Event string
	Seq   float64
}

// openStream sends a JSON-RPC SubscribeToTask and returns a reader of its
// frames, and the response to close.
func openStream(t *testing.T, e *env, token, taskID, lastEventID string) (*http.Response, func() (frame, bool)) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"SubscribeToTask","params":{"id":"` + taskID + `"}}`
	req, _ := http.NewRequest("POST", e.base("p", "writer"), strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("SubscribeToTask = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	next := func() (frame, bool) {
		var f frame
		have := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if have {
					return f, true
				}
			case strings.HasPrefix(line, "id: "):
				f.ID, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
				have = true
			case strings.HasPrefix(line, "data: "):
				var msg struct {
					ID     int             `json:"id"`
					Result json.RawMessage `json:"result"`
					Error  json.RawMessage `json:"error"`
				}
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &msg); err != nil || msg.Error != nil || msg.ID != 7 {
					t.Fatalf("frame %q: %v", line, err)
				}
				var sr a2a.StreamResponse
				if err := json.Unmarshal(msg.Result, &sr); err != nil {
					t.Fatalf("frame %s: %v", msg.Result, err)
				}
				meta := sr.Event.Meta()
				f.Event, _ = meta["turnledger/event"].(string)
				f.Seq, _ = meta["turnledger/ledger_seq"].(float64)
			}
		}
		return f, false
	}
	return resp, next
}

// TestStreamResumes: a subscription broken mid-task and resumed with
// Last-Event-ID, on another instance, gives every event of the Turn's feed once, in order, each
// frame's id its ledger_seq.
func TestStreamResumes(t *testing.T) {
	e := newEnv(t, nil)
	boss := e.agent("p", "boss", false, "turns:dispatch")
	wtok := e.agent("p", "writer", true)
	w := e.worker("p", "writer", wtok)
	ctx := context.Background()
	c := e.client("p", "writer", boss, a2a.TransportProtocolJSONRPC)
	task := send(t, c, message("s1", "stream it"), true)
	claim, err := w.ClaimTurn(ctx, "p", "writer", 0)
	if err != nil || claim == nil {
		t.Fatal(err)
	}
	if _, err := w.AppendSemanticRecord(ctx, claim.Claim, "note", map[string]any{"step": 1}); err != nil {
		t.Fatal(err)
	}
	resp, next := openStream(t, e, boss, string(task.ID), "")
	var got []frame
	for range 2 {
		f, ok := next()
		if !ok {
			t.Fatal("the stream ended early")
		}
		got = append(got, f)
	}
	resp.Body.Close() // broken mid-task
	if _, err := w.AppendSemanticRecord(ctx, claim.Claim, "artifact", map[string]any{"parts": []any{map[string]any{"text": "out"}}}); err != nil {
		t.Fatal(err)
	}
	// Resumed on another instance, with projections of its own.
	other := e.another()
	resp, next = openStream(t, other, boss, string(task.ID), strconv.FormatUint(got[len(got)-1].ID, 10))
	defer resp.Body.Close()
	f, ok := next()
	if !ok {
		t.Fatal("the resumed stream ended early")
	}
	got = append(got, f)
	// Live: what happens after the resume reaches the open stream.
	if _, err := w.FinishTurn(ctx, claim.Claim, client.FinishRequest{Outcome: "succeeded", FinalPayload: map[string]any{"ok": true}, FinalRecordRole: "final"}); err != nil {
		t.Fatal(err)
	}
	for {
		f, ok := next()
		if !ok {
			break // the stream ends after the finish
		}
		got = append(got, f)
	}
	feed, err := w.TurnFeed(ctx, "p", string(task.ID), client.FeedQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var want []frame
	for _, it := range feed.Items {
		want = append(want, frame{ID: it.LedgerSeq, Event: it.Type, Seq: float64(it.LedgerSeq)})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("frames of the broken and resumed stream vs the Turn's feed (-want +got):\n%s", diff)
	}
}

// TestStreamingSendWithTheSDK: the a2a-go client's SendStreamingMessage,
// over both bindings, follows a task from the task event to COMPLETED;
// the same message sent again with Last-Event-ID (a service parameter of
// the client) gives only what followed it.
func TestStreamingSendWithTheSDK(t *testing.T) {
	e := newEnv(t, nil)
	boss := e.agent("p", "boss", false, "turns:dispatch")
	wtok := e.agent("p", "writer", true)
	w := e.worker("p", "writer", wtok)
	ctx := context.Background()
	for _, binding := range bindings {
		t.Run(string(binding), func(t *testing.T) {
			c := e.client("p", "writer", boss, binding)
			m := message("stream-"+string(binding), "go")
			done := make(chan error, 1)
			go func() {
				claim, err := w.ClaimTurn(ctx, "p", "writer", 5e9)
				if err == nil && claim != nil {
					_, err = w.FinishTurn(ctx, claim.Claim, client.FinishRequest{Outcome: "succeeded", FinalPayload: map[string]any{"ok": true}, FinalRecordRole: "final"})
				}
				done <- err
			}()
			var states []a2a.TaskState
			var seqs []float64
			for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: m}) {
				if err != nil {
					t.Fatalf("SendStreamingMessage: %v", err)
				}
				switch ev := ev.(type) {
				case *a2a.Task:
					states = append(states, ev.Status.State)
				case *a2a.TaskStatusUpdateEvent:
					states = append(states, ev.Status.State)
				}
				seqs = append(seqs, ev.Meta()["turnledger/ledger_seq"].(float64))
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want := []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted}
			if diff := cmp.Diff(want, states); diff != "" {
				t.Errorf("states of the stream (-want +got):\n%s", diff)
			}
			rctx := a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{"Last-Event-ID": {strconv.FormatFloat(seqs[0], 'f', -1, 64)}})
			var again []float64
			for ev, err := range c.SendStreamingMessage(rctx, &a2a.SendMessageRequest{Message: m}) {
				if err != nil {
					t.Fatalf("SendStreamingMessage again: %v", err)
				}
				again = append(again, ev.Meta()["turnledger/ledger_seq"].(float64))
			}
			if diff := cmp.Diff(seqs[1:], again); diff != "" {
				t.Errorf("resumed stream after %v (-want +got):\n%s", seqs[0], diff)
			}
		})
	}
}

// TestStreamRefusals: a stream that cannot start is refused as the
// binding refuses any call: an unknown task, a malformed Last-Event-ID, a
// send without the dispatch grant.
func TestStreamRefusals(t *testing.T) {
	e := newEnv(t, nil)
	boss := e.agent("p", "boss", false, "turns:dispatch")
	nogrant := e.agent("p", "nogrant", false)
	e.agent("p", "writer", true)
	ctx := context.Background()
	for _, binding := range bindings {
		t.Run(string(binding), func(t *testing.T) {
			c := e.client("p", "writer", boss, binding)
			first := func(events func(func(a2a.Event, error) bool)) error {
				for _, err := range events {
					return err
				}
				return nil
			}
			if err := first(c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: "turn_0000000000000000000000000000dead"})); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("SubscribeToTask(unknown) = %v, want %v", err, a2a.ErrTaskNotFound)
			}
			bad := a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{"Last-Event-ID": {"yesterday"}})
			if err := first(c.SendStreamingMessage(bad, &a2a.SendMessageRequest{Message: message("bad-"+string(binding), "x")})); !errors.Is(err, a2a.ErrInvalidParams) {
				t.Errorf("SendStreamingMessage with Last-Event-ID yesterday = %v, want %v", err, a2a.ErrInvalidParams)
			}
			if err := first(e.client("p", "writer", nogrant, binding).SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: message("ng-"+string(binding), "x")})); !errors.Is(err, a2a.ErrUnauthorized) {
				t.Errorf("SendStreamingMessage without turns:dispatch = %v, want %v", err, a2a.ErrUnauthorized)
			}
		})
	}
}

// TestStreamEndsWhenTheCredentialIsRevoked: at a heartbeat the caller's
// credential is checked again; revoked, the stream ends with an error
// frame.
func TestStreamEndsWhenTheCredentialIsRevoked(t *testing.T) {
	e := newEnv(t, func(c *a2aapi.Config) { c.HeartbeatInterval = 20 * time.Millisecond })
	boss := e.agent("p", "boss", false, "turns:dispatch")
	e.agent("p", "writer", true)
	c := e.client("p", "writer", boss, a2a.TransportProtocolJSONRPC)
	task := send(t, c, message("rv", "x"), true)
	resp, next := openStream(t, e, boss, string(task.ID), "")
	defer resp.Body.Close()
	if f, ok := next(); !ok || f.Event != "turn.dispatched" {
		t.Fatalf("first frame = %+v, %v", f, ok)
	}
	var creds struct {
		Items []struct {
			CredentialID string `json:"credential_id"`
		} `json:"items"`
	}
	e.admin("GET", "/v3r1/projects/p/agents/boss/credentials", nil, &creds)
	if len(creds.Items) != 1 {
		t.Fatalf("credentials of boss = %+v", creds)
	}
	e.admin("POST", "/v3r1/projects/p/agents/boss/credentials/"+creds.Items[0].CredentialID+":revoke", nil, nil)
	// The stream ends with a JSON-RPC error frame (openStream's reader
	// fails the test on an error frame, so read the rest raw).
	rest, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(rest), `"error":{"code":-31401`) || !strings.Contains(string(rest), "revoked") {
		t.Errorf("the stream after the revocation = %q, want an unauthenticated error frame", rest)
	}
}
