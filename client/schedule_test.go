package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/testclock"
)

// Scheduling through the client (docs/scheduling.md), against a real
// server whose clock the tests move.

func ptr[T any](v T) *T { return &v }

// schedule is the part of a Turn snapshot a schedule shows.
type schedule struct {
	Priority     int
	NotBefore    *time.Time
	ClaimBy      *time.Time
	Deadline     *time.Time
	MaxAttempts  *int
	RetryBackoff *client.Backoff
	RetryOf      *string
}

func scheduleOf(t *client.Turn) schedule {
	return schedule{t.Priority, t.NotBefore, t.ClaimBy, t.Deadline, t.MaxAttempts, t.RetryBackoff, t.RetryOf}
}

func scheduled(t *testing.T, c *client.Client, key string, r client.DispatchRequest) *client.Turn {
	t.Helper()
	r.RequestedBy = client.AgentRef{ProjectID: "p", AgentID: "boss"}
	r.TargetAgent = client.AgentRef{ProjectID: "p", AgentID: "w"}
	r.Input, r.TurnKind, r.DispatchKey, r.Authority = map[string]any{"text": key}, "summarize", key, client.Root("req-"+key)
	tv, err := c.DispatchTurn(context.Background(), "p", r)
	if err != nil {
		t.Fatalf("DispatchTurn(%s) = %v", key, err)
	}
	return tv
}

// TestDispatchWithoutAScheduleSendsNothingNew: the schedule fields are
// left out of a dispatch that does not set them, so such a dispatch is the
// request it was before scheduling existed.
func TestDispatchWithoutAScheduleSendsNothingNew(t *testing.T) {
	b, err := json.Marshal(client.DispatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range fields {
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{"authority", "dispatch_key", "input", "requested_by", "target_agent", "turn_kind"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fields of an empty DispatchRequest (-want +got):\n%s", diff)
	}
	b, err = json.Marshal(client.FinishRequest{Outcome: "failed"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"outcome":"failed","final_payload":null}`; got != want {
		t.Errorf("FinishRequest without Retry = %s, want %s", got, want)
	}
}

// TestDispatchScheduleRoundTrips: what a dispatch asks of the schedule
// comes back on the Turn (a backoff's left-out fields with their
// defaults), a Turn without one shows priority 3 and nothing else, and the
// Turn list filters by priority.
func TestDispatchScheduleRoundTrips(t *testing.T) {
	var clock testclock.Offset
	s := startServerWith(t, serverConfig{Now: clock.Now})
	ctx := context.Background()
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch", "projections:read")
	s.agent(t, "p", "w", 1)

	now := clock.Now().UTC().Truncate(time.Second)
	nb, cb, dl := now.Add(time.Minute), now.Add(time.Hour), now.Add(2*time.Hour)
	got := scheduled(t, boss, "sched", client.DispatchRequest{
		Priority: ptr(1), NotBefore: &nb, ClaimBy: &cb, Deadline: &dl,
		MaxAttempts: ptr(4), RetryBackoff: &client.Backoff{InitialS: 5},
	})
	want := schedule{
		Priority: 1, NotBefore: &nb, ClaimBy: &cb, Deadline: &dl,
		MaxAttempts: ptr(4), RetryBackoff: &client.Backoff{InitialS: 5, Factor: 2, MaxS: 60},
	}
	if diff := cmp.Diff(want, scheduleOf(got)); diff != "" {
		t.Errorf("the schedule on the dispatched Turn (-want +got):\n%s", diff)
	}
	again, err := boss.GetTurn(ctx, "p", got.TurnID)
	if err != nil {
		t.Fatalf("GetTurn = %v", err)
	}
	if diff := cmp.Diff(want, scheduleOf(again)); diff != "" {
		t.Errorf("the schedule on GetTurn (-want +got):\n%s", diff)
	}

	plain := scheduled(t, boss, "plain", client.DispatchRequest{})
	if diff := cmp.Diff(schedule{Priority: 3}, scheduleOf(plain)); diff != "" {
		t.Errorf("the schedule of a Turn dispatched without one (-want +got):\n%s", diff)
	}

	pg, err := boss.ListTurns(ctx, "p", client.TurnQuery{Priority: 1})
	if err != nil {
		t.Fatalf("ListTurns(priority 1) = %v", err)
	}
	var ids []string
	for _, it := range pg.Items {
		ids = append(ids, it.TurnID)
	}
	if diff := cmp.Diff([]string{got.TurnID}, ids); diff != "" {
		t.Errorf("ListTurns(priority 1) (-want +got):\n%s", diff)
	}

	_, err = boss.DispatchTurn(ctx, "p", client.DispatchRequest{
		RequestedBy: client.AgentRef{ProjectID: "p", AgentID: "boss"}, TargetAgent: client.AgentRef{ProjectID: "p", AgentID: "w"},
		TurnKind: "summarize", DispatchKey: "bad", Authority: client.Root("req-bad"), Priority: ptr(9),
	})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 422 {
		t.Errorf("DispatchTurn(priority 9) = %v, want an *Error with status 422", err)
	}
}

// TestWorkerRetryLater: a handler that returns RetryLater finishes the
// Turn as failed with a retry asked; the Turn is queued again, claimable
// once its backoff has passed, and ends as dead when its last attempt asks
// for a retry too. A plain error fails a Turn for good, attempts left or
// not. The failures' payloads are records of the Turn.
func TestWorkerRetryLater(t *testing.T) {
	var clock testclock.Offset
	s := startServerWith(t, serverConfig{Now: clock.Now})
	ctx := context.Background()
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 1)

	var runs atomic.Int32
	worker, err := w.NewWorker(client.WorkerConfig{Logger: quiet, Wait: 100 * time.Millisecond, PresenceInterval: -1},
		func(ctx context.Context, job *client.Job) (client.Result, error) {
			runs.Add(1)
			if job.Turn.DispatchKey == "plain" {
				return client.Result{}, errors.New("no good")
			}
			return client.Result{}, fmt.Errorf("attempt %d: %w", job.Turn.Attempts, client.RetryLater(errors.New("busy")))
		})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, worker)

	// A plain error: failed, although attempts remain.
	plain := scheduled(t, boss, "plain", client.DispatchRequest{MaxAttempts: ptr(3)})
	checkfor.Until(t, 20*time.Second, "the plain failure to finish", func() bool { return outcome(t, w, "p", plain.TurnID) != "" })
	if got, _ := w.GetTurn(ctx, "p", plain.TurnID); *got.Outcome != "failed" || got.Attempts != 1 {
		t.Errorf("after a plain error: outcome %s, attempts %d; want failed, 1", *got.Outcome, got.Attempts)
	}
	runs.Store(0)

	tv := scheduled(t, boss, "retry", client.DispatchRequest{MaxAttempts: ptr(2), RetryBackoff: &client.Backoff{InitialS: 30}})
	var queued *client.Turn
	checkfor.Until(t, 20*time.Second, "the Turn to be queued again", func() bool {
		got, err := w.GetTurn(ctx, "p", tv.TurnID)
		queued = got
		return err == nil && got.State == "queued" && got.Attempts == 1
	})
	if queued.NotBefore == nil {
		t.Fatalf("the Turn queued for a retry has no not_before")
	}
	// not_before is the backoff after the retry was scheduled.
	f, err := w.TurnFeed(ctx, "p", tv.TurnID, client.FeedQuery{Limit: 100})
	if err != nil {
		t.Fatalf("TurnFeed = %v", err)
	}
	i := slices.IndexFunc(f.Items, func(it client.FeedItem) bool { return it.Type == "turn.retry_scheduled" })
	if i < 0 {
		t.Fatalf("no turn.retry_scheduled in the Turn's feed: %+v", f.Items)
	}
	if got, want := queued.NotBefore.Sub(f.Items[i].At), 30*time.Second; got != want {
		t.Errorf("not_before - the retry's time = %s, want the backoff %s", got, want)
	}
	if queued.Outcome != nil || queued.Claim != nil {
		t.Errorf("the Turn queued again = outcome %v, claim %+v; want neither", queued.Outcome, queued.Claim)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times before the backoff passed, want 1", n)
	}

	clock.Advance(30 * time.Second)
	checkfor.Until(t, 20*time.Second, "the last attempt to finish", func() bool { return outcome(t, w, "p", tv.TurnID) != "" })
	end, err := w.GetTurn(ctx, "p", tv.TurnID)
	if err != nil {
		t.Fatalf("GetTurn = %v", err)
	}
	if *end.Outcome != "dead" || end.Attempts != 2 || runs.Load() != 2 {
		t.Errorf("after the last attempt asked for a retry: outcome %s, attempts %d, %d runs; want dead, 2, 2", *end.Outcome, end.Attempts, runs.Load())
	}
	cp, err := w.TurnContext(ctx, "p", tv.TurnID, 0, 10)
	if err != nil {
		t.Fatalf("TurnContext = %v", err)
	}
	var payloads []string
	for _, it := range cp.Items {
		payloads = append(payloads, it.Role+" "+string(it.Payload))
	}
	want := []string{`final {"error":"attempt 1: busy"}`, `final {"error":"attempt 2: busy"}`}
	if diff := cmp.Diff(want, payloads); diff != "" {
		t.Errorf("the Turn's records (-want +got):\n%s", diff)
	}
}

// TestRetryTurn: RetryTurn dispatches a new Turn from a failed or stopped
// one, with retry_of the old Turn and its target, kind, input and
// schedule; a second retry of the same Turn, and a retry of a succeeded
// Turn, are 409s.
func TestRetryTurn(t *testing.T) {
	s := startServer(t, 0)
	ctx := context.Background()
	adm := s.admin(t)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 1)
	finish := func(outcome string) *client.Turn {
		t.Helper()
		c, err := w.ClaimTurn(ctx, "p", "w", 0)
		if err != nil || c == nil {
			t.Fatalf("ClaimTurn = %+v, %v; want a Turn", c, err)
		}
		tv, err := w.FinishTurn(ctx, c.Claim, client.FinishRequest{Outcome: outcome})
		if err != nil {
			t.Fatalf("FinishTurn(%s) = %v", outcome, err)
		}
		return tv
	}

	failed := scheduled(t, boss, "f", client.DispatchRequest{Priority: ptr(2), MaxAttempts: ptr(3)})
	finish("failed")
	retry, err := boss.RetryTurn(ctx, "p", failed.TurnID, client.RetryRequest{}) // as its requester
	if err != nil {
		t.Fatalf("RetryTurn(failed) = %v", err)
	}
	type turn struct {
		State, TurnKind, DispatchKey string
		Target, RequestedBy          client.AgentRef
		Input                        string
		Attempts                     int
		Schedule                     schedule
	}
	view := func(t *client.Turn) turn {
		return turn{t.State, t.TurnKind, t.DispatchKey, t.TargetAgent, t.RequestedBy, string(t.Input), t.Attempts, scheduleOf(t)}
	}
	want := turn{
		State: "queued", TurnKind: "summarize", DispatchKey: "retry:" + failed.TurnID,
		Target: failed.TargetAgent, RequestedBy: failed.RequestedBy, Input: string(failed.Input),
		Schedule: schedule{Priority: 2, MaxAttempts: ptr(3), RetryOf: &failed.TurnID},
	}
	if diff := cmp.Diff(want, view(retry)); diff != "" {
		t.Errorf("RetryTurn(failed) (-want +got):\n%s", diff)
	}
	if retry.TurnID == failed.TurnID {
		t.Errorf("RetryTurn answered the old Turn %s, want a new one", retry.TurnID)
	}

	var ce *client.Error
	_, err = adm.RetryTurn(ctx, "p", failed.TurnID, client.RetryRequest{RequestedBy: failed.RequestedBy})
	if !errors.As(err, &ce) || ce.Status != 409 || !errors.Is(err, client.ErrConflict) {
		t.Errorf("a second RetryTurn = %v, want an *Error with status 409 ConflictError", err)
	}

	// The admin retries a stopped Turn for its requester.
	stopped, err := adm.StopTurn(ctx, "p", retry.TurnID, retry.RequestedBy)
	if err != nil || stopped.Outcome == nil || *stopped.Outcome != "stopped" {
		t.Fatalf("StopTurn(queued) = %+v, %v; want stopped", stopped, err)
	}
	again, err := adm.RetryTurn(ctx, "p", retry.TurnID, client.RetryRequest{RequestedBy: retry.RequestedBy})
	if err != nil || again.RetryOf == nil || *again.RetryOf != retry.TurnID {
		t.Errorf("RetryTurn(stopped) = %+v, %v; want a Turn retrying %s", again, err, retry.TurnID)
	}

	// A succeeded Turn is not retried. (The retry of the stopped Turn waits
	// in the queue at priority 2: the priority 1 Turn is claimed first.)
	ok := scheduled(t, boss, "ok", client.DispatchRequest{Priority: ptr(1)})
	if got := finish("succeeded"); got.TurnID != ok.TurnID {
		t.Fatalf("claimed %s, want the priority 1 Turn %s", got.TurnID, ok.TurnID)
	}
	_, err = boss.RetryTurn(ctx, "p", ok.TurnID, client.RetryRequest{})
	if !errors.As(err, &ce) || ce.Status != 409 {
		t.Errorf("RetryTurn(succeeded) = %v, want an *Error with status 409", err)
	}
}

// TestTypesMirrorTheOpenAPIDocument: every property of the schemas the
// scheduling, the input waits and the bulk actions touch has a field in the
// client's type of it (an embedded type's fields count).
func TestTypesMirrorTheOpenAPIDocument(t *testing.T) {
	s := startServer(t, 0)
	raw, err := s.admin(t).OpenAPI(context.Background())
	if err != nil {
		t.Fatalf("OpenAPI = %v", err)
	}
	type schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	var doc struct {
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// propsOf reads a schema's properties, or with "Schema.field" those of
	// the object one of its properties is.
	propsOf := func(name string) map[string]json.RawMessage {
		top, field, nested := strings.Cut(name, ".")
		props := doc.Components.Schemas[top].Properties
		if !nested {
			return props
		}
		var sub schema
		json.Unmarshal(props[field], &sub)
		return sub.Properties
	}
	for _, c := range []struct {
		schema string
		v      any
		not    []string // properties the method sends itself
	}{
		{"TurnView", client.Turn{}, nil},
		{"DispatchBody", client.DispatchRequest{}, nil},
		{"FinishBody", client.FinishRequest{}, []string{"claim"}},
		{"RequestedByBody", client.RetryRequest{}, nil},
		{"Backoff", client.Backoff{}, nil},
		{"SuspendBody.awaiting_input", client.InputWait{}, nil},
		{"SuspendResult", client.InputWaitResult{}, nil},
		{"BulkBody", client.BulkRequest{}, nil},
		{"BulkBody.filter", client.BulkFilter{}, nil},
	} {
		props := propsOf(c.schema)
		if len(props) == 0 {
			t.Errorf("the OpenAPI document has no schema %s", c.schema)
			continue
		}
		tags := map[string]bool{}
		for _, f := range reflect.VisibleFields(reflect.TypeOf(c.v)) {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			tags[name] = true
		}
		var missing []string
		for p := range props {
			if !tags[p] && !slices.Contains(c.not, p) {
				missing = append(missing, p)
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			t.Errorf("%T has no field for %s's properties %v", c.v, c.schema, missing)
		}
	}
}
