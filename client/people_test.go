package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/testclock"
)

// Waiting for people, stopping trees, tags and bulk actions through the
// client (docs/people.md), against a real server.

func ids(turns []client.Turn) []string {
	out := []string{}
	for _, t := range turns {
		out = append(out, t.TurnID)
	}
	return out
}

func claimNext(t *testing.T, c *client.Client, agent, want string) client.ClaimToken {
	t.Helper()
	res, err := c.ClaimTurn(context.Background(), "p", agent, 0)
	if err != nil || res == nil || res.Turn.TurnID != want {
		t.Fatalf("ClaimTurn(%s) = %+v, %v; want Turn %s", agent, res, err, want)
	}
	return res.Claim
}

func records(t *testing.T, c *client.Client, turn string) []string {
	t.Helper()
	cp, err := c.TurnContext(context.Background(), "p", turn, 0, 100)
	if err != nil {
		t.Fatalf("TurnContext(%s) = %v", turn, err)
	}
	var out []string
	for _, it := range cp.Items {
		out = append(out, it.Role+" "+string(it.Payload))
	}
	return out
}

// TestInputRoundTrip: a worker suspends its Turn for input and gets the
// token and URL once; the Turn lists as awaiting input; the token alone
// answers (a wrong token is a 401, a second answer a 409) and the Turn is
// queued again with the input in its context; the next wait is answered by
// the requester, as itself.
func TestInputRoundTrip(t *testing.T) {
	var clock testclock.Offset
	s := startServerWith(t, serverConfig{Now: clock.Now})
	ctx := context.Background()
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 1)
	tv := scheduled(t, boss, "refund", client.DispatchRequest{})

	claim := claimNext(t, w, "w", tv.TurnID)
	by := clock.Now().Add(time.Hour).UTC().Truncate(time.Second)
	schema := map[string]any{"type": "object", "required": []string{"approve"}, "properties": map[string]any{"approve": map[string]any{"type": "boolean"}}}
	wait, err := w.SuspendTurnForInput(ctx, claim, client.InputWait{Prompt: "Approve the refund of 20 EUR?", Schema: schema, InputBy: &by})
	if err != nil {
		t.Fatalf("SuspendTurnForInput = %v", err)
	}
	if !strings.HasPrefix(wait.InputToken, "tli_") || wait.InputURL != s.url+"/v3r1/projects/p/turns/"+tv.TurnID+":provide-input" {
		t.Errorf("SuspendTurnForInput = token %q, URL %q; want a tli_ token and the Turn's :provide-input URL", wait.InputToken, wait.InputURL)
	}
	wantSchema, _ := json.Marshal(schema)
	want := &client.AwaitingInput{Prompt: "Approve the refund of 20 EUR?", Schema: wantSchema, InputBy: &by}
	if diff := cmp.Diff(want, wait.AwaitingInput); wait.State != "suspended" || diff != "" {
		t.Errorf("the suspended Turn: state %s, awaiting_input (-want +got):\n%s", wait.State, diff)
	}
	pg, err := boss.ListTurns(ctx, "p", client.TurnQuery{AwaitingInput: true})
	if err != nil || !cmp.Equal(ids(pg.Items), []string{tv.TurnID}) {
		t.Errorf("ListTurns(awaiting input) = %v, %v; want [%s]", ids(pg.Items), err, tv.TurnID)
	}

	var ce *client.Error
	_, err = client.ProvideInputWithToken(ctx, wait.InputURL, "tli_not-the-token", map[string]any{"approve": true})
	if !errors.As(err, &ce) || ce.Status != 401 {
		t.Errorf("ProvideInputWithToken(a wrong token) = %v, want an *Error with status 401", err)
	}
	if _, err := client.ProvideInputWithToken(ctx, s.url+"/v3r1/projects/p/turns/"+tv.TurnID, wait.InputToken, nil); err == nil {
		t.Errorf("ProvideInputWithToken(a URL that is not :provide-input) = nil, want an error before any request")
	}
	got, err := client.ProvideInputWithToken(ctx, wait.InputURL, wait.InputToken, map[string]any{"approve": true})
	if err != nil || got.State != "queued" || got.AwaitingInput != nil {
		t.Fatalf("ProvideInputWithToken = %+v, %v; want the Turn queued, no longer awaiting", got, err)
	}
	_, err = client.ProvideInputWithToken(ctx, wait.InputURL, wait.InputToken, map[string]any{"approve": false})
	if !errors.Is(err, client.ErrConflict) {
		t.Errorf("a second ProvideInputWithToken = %v, want ErrConflict (a token works once)", err)
	}

	// The next claim reads the input; this time the requester answers.
	claim = claimNext(t, w, "w", tv.TurnID)
	if _, err := w.SuspendTurnForInput(ctx, claim, client.InputWait{Prompt: "And the fee?"}); err != nil {
		t.Fatalf("SuspendTurnForInput without a schema = %v", err)
	}
	if _, err := w.ProvideTurnInput(ctx, "p", tv.TurnID, map[string]any{"fee": 1}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("ProvideTurnInput by the target = %v, want ErrForbidden", err)
	}
	got, err = boss.ProvideTurnInput(ctx, "p", tv.TurnID, map[string]any{"fee": 1})
	if err != nil || got.State != "queued" {
		t.Fatalf("ProvideTurnInput by the requester = %+v, %v; want the Turn queued", got, err)
	}
	claimNext(t, w, "w", tv.TurnID)
	if diff := cmp.Diff([]string{`input {"approve":true}`, `input {"fee":1}`}, records(t, w, tv.TurnID)); diff != "" {
		t.Errorf("the Turn's context (-want +got):\n%s", diff)
	}
}

// TestStopTurnTree: a cascade stop stops a Turn and its descendants not
// finished at once (the claimed root gets a stop request), leaves a Turn
// outside the tree alone, and refuses a child dispatched under the tree
// afterwards.
func TestStopTurnTree(t *testing.T) {
	s := startServer(t, 0)
	ctx := context.Background()
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 1)
	s.agent(t, "p", "h", 2)
	root := scheduled(t, boss, "root", client.DispatchRequest{})
	other := dispatch(t, boss, "p", "boss", "h", "other")
	claim := claimNext(t, w, "w", root.TurnID)
	child := func(key string) (*client.Turn, error) {
		return w.DispatchTurn(ctx, "p", client.DispatchRequest{
			RequestedBy: client.AgentRef{ProjectID: "p", AgentID: "w"}, TargetAgent: client.AgentRef{ProjectID: "p", AgentID: "h"},
			Input: map[string]any{"part": key}, TurnKind: "summarize", DispatchKey: key, Authority: client.Child(claim),
		})
	}
	var kids []string
	for _, k := range []string{"c1", "c2"} {
		c, err := child(k)
		if err != nil {
			t.Fatalf("dispatch child %s = %v", k, err)
		}
		kids = append(kids, c.TurnID)
	}

	got, err := boss.StopTurnTree(ctx, "p", root.TurnID, root.RequestedBy)
	if err != nil || got.State != "claimed" || !got.StopRequested {
		t.Fatalf("StopTurnTree(claimed root) = %+v, %v; want the root claimed with a stop requested", got, err)
	}
	type state struct{ State, Outcome string }
	view := func(id string) state {
		tv, err := boss.GetTurn(ctx, "p", id)
		if err != nil {
			t.Fatalf("GetTurn(%s) = %v", id, err)
		}
		o := ""
		if tv.Outcome != nil {
			o = *tv.Outcome
		}
		return state{tv.State, o}
	}
	for _, id := range kids {
		if got := view(id); got != (state{"finished", "stopped"}) {
			t.Errorf("child %s after the cascade = %+v, want finished/stopped", id, got)
		}
	}
	if got := view(other.TurnID); got != (state{"queued", ""}) {
		t.Errorf("a Turn outside the tree = %+v, want it queued still", got)
	}
	if _, err := child("late"); !errors.Is(err, client.ErrConflict) {
		t.Errorf("a child dispatched under the stopped tree = %v, want ErrConflict", err)
	}
}

// TestTagsRoundTrip: a dispatch's tags come back on the Turn, and the
// Turn list filters by tags, every one of them.
func TestTagsRoundTrip(t *testing.T) {
	s := startServer(t, 0)
	ctx := context.Background()
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	s.agent(t, "p", "w", 1)
	both := scheduled(t, boss, "both", client.DispatchRequest{Tags: []string{"release:2.4", "urgent"}})
	one := scheduled(t, boss, "one", client.DispatchRequest{Tags: []string{"release:2.4"}})
	scheduled(t, boss, "none", client.DispatchRequest{})
	if got, err := boss.GetTurn(ctx, "p", both.TurnID); err != nil || !cmp.Equal(got.Tags, []string{"release:2.4", "urgent"}) {
		t.Errorf("GetTurn(tagged).Tags = %v, %v; want [release:2.4 urgent]", got.Tags, err)
	}
	for _, c := range []struct {
		tags []string
		want []string
	}{
		{[]string{"release:2.4"}, []string{both.TurnID, one.TurnID}},
		{[]string{"release:2.4", "urgent"}, []string{both.TurnID}},
		{[]string{"nobody"}, []string{}},
	} {
		pg, err := boss.ListTurns(ctx, "p", client.TurnQuery{Tags: c.tags})
		if err != nil {
			t.Fatalf("ListTurns(tags %v) = %v", c.tags, err)
		}
		if diff := cmp.Diff(c.want, ids(pg.Items)); diff != "" {
			t.Errorf("ListTurns(tags %v) (-want +got):\n%s", c.tags, diff)
		}
	}
	_, err := boss.DispatchTurn(ctx, "p", client.DispatchRequest{
		RequestedBy: client.AgentRef{ProjectID: "p", AgentID: "boss"}, TargetAgent: client.AgentRef{ProjectID: "p", AgentID: "w"},
		TurnKind: "summarize", DispatchKey: "bad", Authority: client.Root("req-bad"), Tags: []string{"has space"},
	})
	if !errors.Is(err, client.ErrValidation) {
		t.Errorf("DispatchTurn(a tag with a space) = %v, want ErrValidation", err)
	}
}

// TestBulkStopAndRetry: a bulk stop with a tag filter stops the matching
// Turns in pages of the limit, saying has_more until the last, and leaves
// the others alone; a bulk retry then dispatches a new Turn for each, with
// its tags.
func TestBulkStopAndRetry(t *testing.T) {
	s := startServer(t, 0)
	ctx := context.Background()
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch", "management")
	s.agent(t, "p", "w", 1)
	var batch []string
	for i := range 5 {
		batch = append(batch, scheduled(t, boss, fmt.Sprintf("b%d", i), client.DispatchRequest{Tags: []string{"nightly"}}).TurnID)
	}
	keep := scheduled(t, boss, "keep", client.DispatchRequest{})

	req := client.BulkRequest{Filter: client.BulkFilter{State: "queued", Tag: "nightly"}, Limit: 3, Reason: "bad input file"}
	first, err := boss.BulkStopTurns(ctx, "p", req) // requested_by: boss itself
	if err != nil {
		t.Fatalf("BulkStopTurns = %v", err)
	}
	if diff := cmp.Diff(&client.BulkStopResult{Stopped: batch[:3], HasMore: true}, first); diff != "" {
		t.Errorf("the first page of the bulk stop (-want +got):\n%s", diff)
	}
	second, err := boss.BulkStopTurns(ctx, "p", req)
	if err != nil {
		t.Fatalf("BulkStopTurns again = %v", err)
	}
	if diff := cmp.Diff(&client.BulkStopResult{Stopped: batch[3:], HasMore: false}, second); diff != "" {
		t.Errorf("the second page of the bulk stop (-want +got):\n%s", diff)
	}
	pg, err := boss.ListTurns(ctx, "p", client.TurnQuery{Outcome: "stopped", Tags: []string{"nightly"}})
	if err != nil || !cmp.Equal(ids(pg.Items), batch) {
		t.Errorf("the stopped nightly Turns = %v, %v; want %v", ids(pg.Items), err, batch)
	}
	if got, _ := boss.GetTurn(ctx, "p", keep.TurnID); got.State != "queued" {
		t.Errorf("the untagged Turn is %s after the bulk stop, want queued", got.State)
	}
	f, err := boss.TurnFeed(ctx, "p", batch[0], client.FeedQuery{})
	if err != nil || len(f.Items) == 0 || f.Items[len(f.Items)-1].Meta == nil || f.Items[len(f.Items)-1].Meta.Reason != "bad input file" {
		t.Errorf("the stop event of %s does not carry the reason: %+v, %v", batch[0], f.Items, err)
	}

	// A bulk stop that asks for finished Turns is refused.
	if _, err := boss.BulkStopTurns(ctx, "p", client.BulkRequest{Filter: client.BulkFilter{State: "finished"}}); !errors.Is(err, client.ErrValidation) {
		t.Errorf("BulkStopTurns(state finished) = %v, want ErrValidation", err)
	}

	retried, err := boss.BulkRetryTurns(ctx, "p", client.BulkRequest{Filter: client.BulkFilter{Tag: "nightly", Outcome: "stopped"}})
	if err != nil || len(retried.Retried) != 5 || retried.HasMore {
		t.Fatalf("BulkRetryTurns = %+v, %v; want 5 new Turns and no more", retried, err)
	}
	for i, id := range retried.Retried {
		tv, err := boss.GetTurn(ctx, "p", id)
		if err != nil || tv.State != "queued" || tv.RetryOf == nil || *tv.RetryOf != batch[i] || !cmp.Equal(tv.Tags, []string{"nightly"}) {
			t.Errorf("retried Turn %s = %+v, %v; want queued, retrying %s, tagged nightly", id, tv, err, batch[i])
		}
	}
	again, err := boss.BulkRetryTurns(ctx, "p", client.BulkRequest{Filter: client.BulkFilter{Tag: "nightly", Outcome: "stopped"}})
	if err != nil || len(again.Retried) != 0 || again.HasMore {
		t.Errorf("BulkRetryTurns again = %+v, %v; want nothing left to retry", again, err)
	}
}

// TestWorkerAwaitInput: a handler that needs a person suspends its Turn
// with Job.AwaitInput and returns; the worker neither finishes nor renews
// the Turn. The token answers it, the Turn comes back to the handler
// through a claim, and the handler reads the answer with LatestInput and
// finishes.
func TestWorkerAwaitInput(t *testing.T) {
	s := startServer(t, 0)
	ctx := context.Background()
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 1)
	waits := make(chan *client.InputWaitResult, 1)
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet, Wait: 100 * time.Millisecond, PresenceInterval: -1},
		func(ctx context.Context, job *client.Job) (client.Result, error) {
			in, err := job.LatestInput(ctx)
			if err != nil {
				return client.Result{}, err
			}
			if in == nil {
				wait, err := job.AwaitInput(ctx, "Which tone?", map[string]any{"type": "object", "properties": map[string]any{
					"tone": map[string]any{"type": "string", "enum": []string{"formal", "casual"}}}}, nil)
				if err != nil {
					return client.Result{}, err
				}
				waits <- wait
				return client.Result{}, nil // not finished: the Turn waits for its input
			}
			return client.Result{FinalPayload: map[string]any{"answered": in}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, worker)
	tv := scheduled(t, boss, "tone", client.DispatchRequest{})

	var wait *client.InputWaitResult
	select {
	case wait = <-waits:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler did not suspend the Turn for input")
	}
	got, err := boss.GetTurn(ctx, "p", tv.TurnID)
	if err != nil || got.State != "suspended" || got.AwaitingInput == nil || got.AwaitingInput.Prompt != "Which tone?" {
		t.Fatalf("the Turn after AwaitInput = %+v, %v; want it suspended awaiting the prompt", got, err)
	}
	if _, err := client.ProvideInputWithToken(ctx, wait.InputURL, wait.InputToken, map[string]any{"tone": "formal"}); err != nil {
		t.Fatalf("ProvideInputWithToken = %v", err)
	}
	checkfor.Until(t, 20*time.Second, "the answered Turn to finish", func() bool { return outcome(t, w, "p", tv.TurnID) != "" })
	if o := outcome(t, w, "p", tv.TurnID); o != "succeeded" {
		t.Errorf("the Turn's outcome = %s, want succeeded", o)
	}
	if diff := cmp.Diff([]string{`input {"tone":"formal"}`, `final {"answered":{"tone":"formal"}}`}, records(t, w, tv.TurnID)); diff != "" {
		t.Errorf("the Turn's context (-want +got):\n%s", diff)
	}
	f, err := w.TurnFeed(ctx, "p", tv.TurnID, client.FeedQuery{})
	if err != nil {
		t.Fatalf("TurnFeed = %v", err)
	}
	var types []string
	for _, it := range f.Items {
		types = append(types, it.Type)
	}
	want := []string{"turn.dispatched", "turn.claimed", "turn.suspended", "turn.input_provided", "turn.claimed", "turn.finished"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("the Turn's feed (-want +got):\n%s", diff)
	}
}
