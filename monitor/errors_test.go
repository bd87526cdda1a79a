package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// lagEngine is an engine whose projection lag the test sets, watched by a
// "lag" query that fails above 10, notifying a webhook and the log.
func lagEngine(t *testing.T, c *clock, rc *receiver, log *syncBuffer) (*engine, Config) {
	t.Helper()
	e := newEngine(t, "tok")
	cfg := engineConfig(t, c, e, "tok", engineQuery("lag", EngineProjectionLag, Check{Kind: CheckValueRange, Column: "lag", Max: ptr(10.0)}))
	cfg.Logger = cfgLogger(log)
	cfg.Channels = []ChannelConfig{{ID: "hook", Kind: ChannelWebhook, URL: rc.srv.URL + "/hooks/abc"}, {ID: "log", Kind: ChannelLog}}
	return e, cfg
}

func setLag(e *engine, lag int) {
	e.set(func(e *engine) {
		e.ready = fmt.Sprintf(`{"status":"ready","backend":{"kind":"embedded","stream":"TURNLEDGER","ledger_head":500},"projections":{"applied_seq":%d,"lag":%d},"reaper":{"enabled":true,"interval":"5s"}}`, 500-lag, lag)
	})
}

func TestErrorLifecycle(t *testing.T) {
	c := newClock()
	rc := newReceiver(t)
	log := &syncBuffer{}
	e, cfg := lagEngine(t, c, rc, log)
	m := open(t, cfg)
	srv := serve(t, m)

	run := func() RunOutcome {
		t.Helper()
		var out RunOutcome
		if code := call(t, srv, "POST", "/api/queries/lag/run", "", &out); code != 200 {
			t.Fatalf("POST /api/queries/lag/run = %d, want 200", code)
		}
		return out
	}
	listErrors := func(query string) []Error {
		t.Helper()
		var body struct{ Errors []Error }
		if code := call(t, srv, "GET", "/api/errors"+query, "", &body); code != 200 {
			t.Fatalf("GET /api/errors%s = %d, want 200", query, code)
		}
		return body.Errors
	}

	setLag(e, 3)
	if out := run(); !out.Run.Passed || out.Error != nil {
		t.Fatalf("run with lag 3 = %+v, want passed with no error", out)
	}
	if got := listErrors(""); len(got) != 0 {
		t.Fatalf("errors after a pass = %+v, want none", got)
	}

	setLag(e, 42)
	first := run()
	if first.Run.Passed || first.Error == nil || !first.Run.ErrorOpened || first.Error.Count != 1 {
		t.Fatalf("run with lag 42 = %+v, want a failure opening an error with count 1", first)
	}
	c.Advance(time.Minute)
	second := run()
	if second.Error == nil || second.Error.ID != first.Error.ID || second.Run.ErrorOpened || second.Error.Count != 2 {
		t.Fatalf("second failure = %+v, want error %d counted twice, not a new one", second, first.Error.ID)
	}
	wantActive := Error{ID: first.Error.ID, QueryID: "lag", Status: StatusActive, Count: 2,
		Reason: "row 1: lag = 42 is above the maximum 10", FirstReason: "row 1: lag = 42 is above the maximum 10",
		OpenedAt: t0, LastSeenAt: t0.Add(time.Minute)}
	if diff := cmp.Diff([]Error{wantActive}, listErrors("")); diff != "" {
		t.Errorf("GET /api/errors (-want +got):\n%s", diff)
	}
	// Passing again does not resolve the error; it notes that it passes.
	setLag(e, 1)
	c.Advance(time.Minute)
	if out := run(); !out.Run.Passed || out.Error == nil || out.Error.LastPassedAt == nil || !out.Error.LastPassedAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("pass after failures = %+v, want passed with the error's last_passed_at set", out)
	}

	// Exactly one notification per channel so far: the opening.
	checkfor.Until(t, 5*time.Second, "the opening notification", func() bool { return len(rc.received()) == 1 })
	c.Advance(time.Minute)
	var resolved Error
	if code := call(t, srv, "POST", fmt.Sprintf("/api/errors/%d/resolve", first.Error.ID), `{"note":"restarted the projector"}`, &resolved); code != 200 {
		t.Fatalf("resolve = %d, want 200", code)
	}
	if resolved.Status != StatusResolved || resolved.ResolvedAt == nil || !resolved.ResolvedAt.Equal(t0.Add(3*time.Minute)) || resolved.Note != "restarted the projector" {
		t.Errorf("resolved error = %+v, want resolved at t0+3m with the note", resolved)
	}
	if got := listErrors(""); len(got) != 0 {
		t.Errorf("active errors after resolving = %+v, want none", got)
	}
	if got := listErrors("?status=resolved&query_id=lag"); len(got) != 1 || got[0].ID != first.Error.ID {
		t.Errorf("resolved errors = %+v, want error %d", got, first.Error.ID)
	}
	wantError(t, srv, "POST", fmt.Sprintf("/api/errors/%d/resolve", first.Error.ID), "", 409, ErrConflict)
	wantError(t, srv, "POST", "/api/errors/999/resolve", "", 404, ErrNotFound)
	wantError(t, srv, "POST", "/api/errors/abc/resolve", "", 404, ErrNotFound)

	// A later failure opens a new error.
	setLag(e, 50)
	third := run()
	if third.Error == nil || third.Error.ID == first.Error.ID || !third.Run.ErrorOpened || third.Error.Count != 1 {
		t.Errorf("failure after resolving = %+v, want a new error", third)
	}
	if got := listErrors("?status=all"); len(got) != 2 || got[0].ID != third.Error.ID {
		t.Errorf("all errors = %+v, want the new one first, then the resolved one", got)
	}

	// Webhook: opened, resolved, opened — in that order.
	checkfor.Until(t, 5*time.Second, "three webhook notifications", func() bool { return len(rc.received()) == 3 })
	var events []string
	for _, n := range rc.notifications(t) {
		events = append(events, fmt.Sprintf("%s %d", n.Event, n.Error.ID))
	}
	wantEvents := []string{
		fmt.Sprintf("error.opened %d", first.Error.ID), fmt.Sprintf("error.resolved %d", first.Error.ID), fmt.Sprintf("error.opened %d", third.Error.ID),
	}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("webhook events (-want +got):\n%s", diff)
	}
	// The log channel got the same three.
	checkfor.Until(t, 5*time.Second, "three log notifications", func() bool { return strings.Count(log.String(), `"msg":"monitor notification: `) == 3 })
}

func TestResolveRejectsBadBodies(t *testing.T) {
	c := newClock()
	e, cfg := lagEngine(t, c, newReceiver(t), &syncBuffer{})
	m := open(t, cfg)
	srv := serve(t, m)
	setLag(e, 99)
	out, err := m.RunQuery(context.Background(), "lag", TriggerManual)
	if err != nil || out.Error == nil {
		t.Fatalf("RunQuery = %+v, %v; want an open error", out, err)
	}
	path := fmt.Sprintf("/api/errors/%d/resolve", out.Error.ID)
	for _, body := range []string{`{`, `{"note": 5}`, `{"reason":"x"}`, `[]`, `{"note":"` + strings.Repeat("n", maxNote+1) + `"}`, strings.Repeat(" ", maxBody+1)} {
		wantError(t, srv, "POST", path, body, 400, ErrValidation)
	}
	// None of them resolved it.
	got, err := m.store.getError(out.Error.ID)
	if err != nil || got.Status != StatusActive {
		t.Errorf("error after bad resolves = %+v, %v; want still active", got, err)
	}
}

func TestStateSurvivesRestart(t *testing.T) {
	c := newClock()
	e, cfg := lagEngine(t, c, newReceiver(t), &syncBuffer{})
	m, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	setLag(e, 99)
	first, err := m.RunQuery(context.Background(), "lag", TriggerSchedule)
	if err != nil {
		t.Fatalf("RunQuery = %v", err)
	}
	c.Advance(time.Second)
	if _, err := m.RunQuery(context.Background(), "lag", TriggerManual); err != nil {
		t.Fatalf("RunQuery = %v", err)
	}
	// A second monitor on the same file is refused while the first runs.
	if m2, err := Open(cfg); err == nil {
		m2.Close()
		t.Fatalf("Open on a file in use = nil error, want one")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}

	c.Advance(5 * time.Second)
	m = open(t, cfg)
	srv := serve(t, m)
	var errs struct{ Errors []Error }
	call(t, srv, "GET", "/api/errors", "", &errs)
	if len(errs.Errors) != 1 || errs.Errors[0].ID != first.Error.ID || errs.Errors[0].Count != 2 {
		t.Fatalf("errors after restart = %+v, want error %d with count 2", errs.Errors, first.Error.ID)
	}
	var q QueryDetail
	call(t, srv, "GET", "/api/queries/lag", "", &q)
	if len(q.RecentRuns) != 2 || q.RecentRuns[0].Trigger != TriggerManual || q.RecentRuns[1].Trigger != TriggerSchedule {
		t.Errorf("recent runs after restart = %+v, want the manual run then the scheduled one", q.RecentRuns)
	}
	// The schedule resumes one interval after the last scheduled run.
	if q.NextRunAt == nil || !q.NextRunAt.Equal(t0.Add(30*time.Second)) {
		t.Errorf("next run after restart = %v, want %v", q.NextRunAt, t0.Add(30*time.Second))
	}
	// Resolving still works, and a new failure opens a new error.
	if code := call(t, srv, "POST", fmt.Sprintf("/api/errors/%d/resolve", first.Error.ID), "", nil); code != 200 {
		t.Errorf("resolve after restart = %d, want 200", code)
	}
	out, err := m.RunQuery(context.Background(), "lag", TriggerManual)
	if err != nil || out.Error == nil || out.Error.ID == first.Error.ID {
		t.Errorf("failure after restart and resolve = %+v, %v; want a new error", out.Error, err)
	}
	var raw json.RawMessage
	call(t, srv, "GET", "/api/stats/overview", "", &raw)
	var o Overview
	json.Unmarshal(raw, &o)
	if o.Runs != 3 || o.ErrorsOpened != 2 || o.ErrorsResolved != 1 {
		t.Errorf("overview after restart = %s, want 3 runs, 2 errors opened, 1 resolved", raw)
	}
}

func TestConcurrentFailuresOpenOneError(t *testing.T) {
	c := newClock()
	rc := newReceiver(t)
	e, cfg := lagEngine(t, c, rc, &syncBuffer{})
	cfg.Channels = cfg.Channels[:1]
	m := open(t, cfg)
	setLag(e, 99)
	const n = 10
	done := make(chan error, n)
	for range n {
		go func() {
			_, err := m.RunQuery(context.Background(), "lag", TriggerManual)
			done <- err
		}()
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatalf("RunQuery = %v", err)
		}
	}
	errs, err := m.store.errors()
	if err != nil || len(errs) != 1 || errs[0].Count != n {
		t.Errorf("errors after %d concurrent failures = %+v, %v; want one with count %d", n, errs, err, n)
	}
	m.wg.Wait()
	if got := len(rc.received()); got != 1 {
		t.Errorf("webhook notifications = %d, want 1", got)
	}
}
