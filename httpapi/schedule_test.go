package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// The scheduling rules over HTTP (docs/api.md, "Scheduling"), with the
// clock injected: priority, not_before, claim_by, deadline, max_attempts,
// retries with backoff, :retry.

const schedP = "/v3r1/projects/p1"

// scheduled dispatches to the worker with the schedule fields of sched and
// answers the Turn.
func (e *env) scheduled(req as, key string, sched map[string]any) projection.TurnView {
	e.t.Helper()
	body := dispatchBody("p1", req.agent, "worker", key, map[string]any{"q": key})
	for k, v := range sched {
		body[k] = v
	}
	var v projection.TurnView
	e.must(req, "POST", schedP+"/turns:dispatch", body, 200).decode(e.t, &v)
	return v
}

func (e *env) turnView(who as, id string) projection.TurnView {
	e.t.Helper()
	var v projection.TurnView
	e.must(who, "GET", schedP+"/turns/"+id, nil, 200).decode(e.t, &v)
	return v
}

// reap does what the reaper does on its timer, once.
func (e *env) reap() int {
	e.t.Helper()
	n, err := e.engine.Reap(e.t.Context())
	if err != nil {
		e.t.Fatalf("Reap = %v", err)
	}
	return n
}

func (e *env) finishAs(w as, c *claimed, body map[string]any, want int) response {
	e.t.Helper()
	b := map[string]any{"claim": c.Claim}
	for k, v := range body {
		b[k] = v
	}
	return e.must(w, "POST", schedP+"/turns/"+c.Claim.TurnID+":finish", b, want)
}

func schedEnv(t *testing.T) (*env, as, as) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, kernel.GrantDispatch)
	w := e.register("p1", "worker", 10)
	return e, req, w
}

func at(e *env, d time.Duration) string { return e.clock.Now().Add(d).Format(time.RFC3339Nano) }

func TestClaimTakesTheBestPriorityThenTheOldest(t *testing.T) {
	e, req, w := schedEnv(t)
	a := e.scheduled(req, "a", nil) // default 3
	b := e.scheduled(req, "b", map[string]any{"priority": 1})
	c := e.scheduled(req, "c", map[string]any{"priority": 5})
	d := e.scheduled(req, "d", map[string]any{"priority": 1})
	if a.Priority != 3 || b.Priority != 1 || c.Priority != 5 {
		t.Errorf("priorities on the snapshots = %d, %d, %d; want 3, 1, 5", a.Priority, b.Priority, c.Priority)
	}
	var got []string
	for range 4 {
		got = append(got, e.claim(w).Claim.TurnID)
	}
	if diff := cmp.Diff([]string{b.TurnID, d.TurnID, a.TurnID, c.TurnID}, got); diff != "" {
		t.Errorf("claim order (-want +got):\n%s", diff)
	}
	// The list filters by priority.
	var pg struct{ Items []projection.TurnView }
	e.must(asAdmin, "GET", schedP+"/projection/turns?priority=1", nil, 200).decode(t, &pg)
	if len(pg.Items) != 2 || pg.Items[0].TurnID != b.TurnID || pg.Items[1].TurnID != d.TurnID {
		t.Errorf("projection/turns?priority=1 = %+v, want b and d", pg.Items)
	}
	e.must(asAdmin, "GET", schedP+"/projection/turns?priority=9", nil, 422)
}

func TestNotYetDueTurnsAreSkippedThenClaimed(t *testing.T) {
	e, req, w := schedEnv(t)
	later := e.scheduled(req, "later", map[string]any{"not_before": at(e, time.Minute), "priority": 1})
	now := e.scheduled(req, "now", nil)
	if c := e.claim(w); c == nil || c.Claim.TurnID != now.TurnID {
		t.Fatalf("first claim = %+v, want the Turn due now (%s), not the priority 1 Turn not due yet", c, now.TurnID)
	}
	if c := e.claim(w); c != nil {
		t.Fatalf("claim before not_before = %s, want null", c.Claim.TurnID)
	}
	e.clock.Advance(time.Minute)
	if c := e.claim(w); c == nil || c.Claim.TurnID != later.TurnID {
		t.Fatalf("claim at not_before = %+v, want %s", c, later.TurnID)
	}
}

func TestLongPollWakesWhenATurnBecomesDue(t *testing.T) {
	e, req, w := schedEnv(t)
	v := e.scheduled(req, "soon", map[string]any{"not_before": at(e, 200*time.Millisecond)})
	type result struct {
		r     response
		after time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		r := e.do(w, "POST", schedP+"/agents/worker/claims:claim?wait=30s", map[string]any{"agent": ref("p1", "worker")})
		done <- result{r, time.Since(start)}
	}()
	checkfor.Until(t, 10*time.Second, "the claim waits", func() bool { n, _ := e.api.Waiting(); return n == 1 })
	// Time passes beyond not_before. No event tells the waiting claim:
	// only its timer for the next due time does.
	e.clock.Advance(time.Second)
	res := <-done
	var c claimed
	res.r.decode(t, &c)
	if res.r.status != 200 || c.Claim.TurnID != v.TurnID {
		t.Fatalf("long-poll claim = %d %s, want the Turn that became due", res.r.status, res.r.body)
	}
	if res.after >= 30*time.Second {
		t.Errorf("the claim answered after %s: at the end of its wait, not when the Turn became due", res.after)
	}
}

func TestClaimByExpiresANeverClaimedTurn(t *testing.T) {
	e, req, w := schedEnv(t)
	v := e.scheduled(req, "x", map[string]any{"claim_by": at(e, time.Minute)})
	kept := e.scheduled(req, "kept", map[string]any{"claim_by": at(e, time.Minute)})
	c := e.claim(w) // takes x: claimed before its claim_by
	if c.Claim.TurnID != v.TurnID {
		t.Fatalf("claimed %s, want %s", c.Claim.TurnID, v.TurnID)
	}
	e.clock.Advance(2 * time.Minute)
	if c := e.claim(w); c != nil {
		t.Fatalf("claim after claim_by = %s, want null", c.Claim.TurnID)
	}
	e.reap()
	got := e.turnView(asAdmin, kept.TurnID)
	if got.State != kernel.StateFinished || got.Outcome == nil || *got.Outcome != kernel.OutcomeExpired {
		t.Fatalf("Turn past claim_by = %s/%v, want finished/expired", got.State, got.Outcome)
	}
	if types := e.feedTypes(req, kept.TurnID); types[len(types)-1] != kernel.EvTurnExpired {
		t.Errorf("feed of the expired Turn = %v, want it to end with %s", types, kernel.EvTurnExpired)
	}
	// A Turn claimed once is not expired by its claim_by: its expired claim
	// sends it back to the queue, where it stays claimable.
	if got := e.turnView(asAdmin, v.TurnID); got.State != kernel.StateQueued || got.Outcome != nil {
		t.Errorf("a Turn claimed before claim_by is %s/%v after it, want queued again", got.State, got.Outcome)
	}
	if c := e.claim(w); c == nil || c.Claim.TurnID != v.TurnID {
		t.Errorf("claim of the released Turn past its claim_by = %+v, want %s", c, v.TurnID)
	}
	var pg struct{ Items []projection.TurnView }
	e.must(asAdmin, "GET", schedP+"/projection/turns?outcome=expired", nil, 200).decode(t, &pg)
	if len(pg.Items) != 1 || pg.Items[0].TurnID != kept.TurnID {
		t.Errorf("projection/turns?outcome=expired = %d items, want %s", len(pg.Items), kept.TurnID)
	}
}

func TestDeadlineTimesOutAndKillsTheClaim(t *testing.T) {
	e, req, w := schedEnv(t)
	v := e.scheduled(req, "x", map[string]any{"deadline": at(e, time.Minute)})
	c := e.claim(w)
	e.clock.Advance(time.Minute)
	// Before the reaper runs, the holder's next call is refused, and says why.
	r := e.must(w, "POST", schedP+"/claims:renew", map[string]any{"claim": c.Claim}, 409)
	if r.errorName() != "FencingError" || !strings.Contains(errorMessage(r), "deadline") {
		t.Errorf("renew past the deadline = %s, want a FencingError naming the deadline", r.body)
	}
	if n := e.reap(); n != 1 {
		t.Errorf("Reap = %d, want 1", n)
	}
	got := e.turnView(asAdmin, v.TurnID)
	if got.Outcome == nil || *got.Outcome != kernel.OutcomeTimedOut || got.Claim != nil {
		t.Fatalf("Turn past its deadline = %s/%v claim %v, want finished/timed_out without a claim", got.State, got.Outcome, got.Claim)
	}
	r = e.must(w, "POST", schedP+"/turns/"+v.TurnID+"/semantic-records", map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{}}, 409)
	if !strings.Contains(errorMessage(r), "timed_out") {
		t.Errorf("a record after the time-out = %s, want a FencingError saying timed_out", r.body)
	}
	// Capacity is free again.
	next := e.scheduled(req, "y", nil)
	if c := e.claim(w); c == nil || c.Claim.TurnID != next.TurnID {
		t.Errorf("claim after the time-out = %+v, want %s", c, next.TurnID)
	}
}

func TestMaxAttemptsEndsInDeadAfterExpiredClaims(t *testing.T) {
	e, req, w := schedEnv(t)
	v := e.scheduled(req, "x", map[string]any{"max_attempts": 2})
	for attempt := 1; attempt <= 2; attempt++ {
		if c := e.claim(w); c == nil || c.Claim.TurnID != v.TurnID {
			t.Fatalf("attempt %d: claim = %+v, want %s", attempt, c, v.TurnID)
		}
		e.clock.Advance(2 * time.Minute) // past the claim TTL (60 s)
		e.reap()
		got := e.turnView(asAdmin, v.TurnID)
		if got.Attempts != attempt {
			t.Errorf("attempts after %d claims = %d", attempt, got.Attempts)
		}
		wantState := map[int]string{1: kernel.StateQueued, 2: kernel.StateFinished}[attempt]
		if got.State != wantState {
			t.Fatalf("after the expiry of claim %d of 2: state %s, want %s", attempt, got.State, wantState)
		}
	}
	got := e.turnView(asAdmin, v.TurnID)
	if got.Outcome == nil || *got.Outcome != kernel.OutcomeDead || got.MaxAttempts == nil || *got.MaxAttempts != 2 {
		t.Fatalf("Turn out of attempts = %v (max %v), want dead", got.Outcome, got.MaxAttempts)
	}
	var pg struct{ Items []projection.TurnView }
	e.must(asAdmin, "GET", schedP+"/projection/turns?outcome=dead", nil, 200).decode(t, &pg)
	if len(pg.Items) != 1 || pg.Items[0].TurnID != v.TurnID {
		t.Errorf("projection/turns?outcome=dead = %d items, want %s", len(pg.Items), v.TurnID)
	}
}

func TestFailedWithRetryBacksOffThenDies(t *testing.T) {
	e, req, w := schedEnv(t)
	v := e.scheduled(req, "x", map[string]any{"max_attempts": 3, "retry_backoff": map[string]any{"initial_s": 10, "factor": 3, "max_s": 20}})
	// The delays: 10 s after attempt 1, min(30, 20) = 20 s after attempt 2.
	for i, delay := range []time.Duration{10 * time.Second, 20 * time.Second} {
		c := e.claim(w)
		if c == nil || c.Claim.TurnID != v.TurnID {
			t.Fatalf("attempt %d: claim = %+v", i+1, c)
		}
		e.finishAs(w, c, map[string]any{"outcome": "failed", "retry": true, "final_payload": map[string]any{"error": i}, "final_record_role": "error"}, 200)
		got := e.turnView(asAdmin, v.TurnID)
		want := e.clock.Now().Add(delay)
		if got.State != kernel.StateQueued || got.NotBefore == nil || !got.NotBefore.Equal(want) {
			t.Fatalf("after failure %d with retry: %s, not_before %v; want queued, not before %s", i+1, got.State, got.NotBefore, want)
		}
		if c := e.claim(w); c != nil {
			t.Fatalf("claim during the backoff = %s, want null", c.Claim.TurnID)
		}
		e.clock.Advance(delay)
	}
	c := e.claim(w)
	e.finishAs(w, c, map[string]any{"outcome": "failed", "retry": true}, 200)
	got := e.turnView(asAdmin, v.TurnID)
	if got.Outcome == nil || *got.Outcome != kernel.OutcomeDead || got.Attempts != 3 {
		t.Fatalf("failed with retry on the last attempt = %v after %d attempts, want dead after 3", got.Outcome, got.Attempts)
	}
	// Each failure's payload is a record of the Turn.
	var ctx struct{ Items []projection.ContextItem }
	e.must(asAdmin, "GET", schedP+"/turns/"+v.TurnID+"/context", nil, 200).decode(t, &ctx)
	var roles []string
	for _, it := range ctx.Items {
		roles = append(roles, fmt.Sprintf("%d:%s:%s", it.TurnSeq, it.Role, it.Payload))
	}
	if diff := cmp.Diff([]string{`1:error:{"error":0}`, `2:error:{"error":1}`}, roles); diff != "" {
		t.Errorf("records of the failures (-want +got):\n%s", diff)
	}
	// retry is for failed only.
	other := e.scheduled(req, "y", nil)
	c = e.claim(w)
	if c.Claim.TurnID != other.TurnID {
		t.Fatalf("claimed %s, want %s", c.Claim.TurnID, other.TurnID)
	}
	e.finishAs(w, c, map[string]any{"outcome": "succeeded", "retry": true}, 422)
}

func TestRetryDispatchesANewTurnFromEachRetryableOutcome(t *testing.T) {
	e, req, w := schedEnv(t)
	finished := map[string]string{} // outcome → turn id
	deadline := at(e, time.Hour)
	// failed
	f := e.scheduled(req, "failed", map[string]any{"priority": 2, "max_attempts": 5, "deadline": deadline})
	e.finishAs(w, e.claim(w), map[string]any{"outcome": "failed"}, 200)
	finished["failed"] = f.TurnID
	// stopped (queued, stopped by its requester)
	s := e.scheduled(req, "stopped", nil)
	e.must(req, "POST", schedP+"/management/turns/"+s.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req")}, 200)
	finished["stopped"] = s.TurnID
	// succeeded: not retryable
	ok := e.scheduled(req, "ok", nil)
	e.finishAs(w, e.claim(w), map[string]any{"outcome": "succeeded"}, 200)
	// dead, expired, timed_out
	d := e.scheduled(req, "dead", map[string]any{"max_attempts": 1})
	e.claim(w)
	x := e.scheduled(req, "expired", map[string]any{"claim_by": at(e, time.Minute)})
	to := e.scheduled(req, "timed_out", map[string]any{"deadline": at(e, 90*time.Second)})
	e.clock.Advance(2 * time.Minute)
	e.reap()
	finished["dead"], finished["expired"], finished["timed_out"] = d.TurnID, x.TurnID, to.TurnID

	for outcome, id := range finished {
		if got := e.turnView(asAdmin, id); got.Outcome == nil || *got.Outcome != outcome {
			t.Fatalf("setup: turn %s has outcome %v, want %s", id, got.Outcome, outcome)
		}
		var nv projection.TurnView
		e.must(req.withKey("retry-"+id), "POST", schedP+"/turns/"+id+":retry", map[string]any{"requested_by": ref("p1", "req")}, 200).decode(t, &nv)
		if nv.RetryOf == nil || *nv.RetryOf != id || nv.State != kernel.StateQueued || nv.Attempts != 0 || nv.TurnID == id {
			t.Errorf("retry of the %s Turn = %+v, want a new queued Turn with retry_of %s", outcome, nv, id)
		}
		// The same key answers the same new Turn; another request is a 409.
		var again projection.TurnView
		e.must(req.withKey("retry-"+id), "POST", schedP+"/turns/"+id+":retry", map[string]any{"requested_by": ref("p1", "req")}, 200).decode(t, &again)
		if again.TurnID != nv.TurnID {
			t.Errorf("retried :retry with its key = %s, want %s", again.TurnID, nv.TurnID)
		}
		r := e.must(req, "POST", schedP+"/turns/"+id+":retry", map[string]any{"requested_by": ref("p1", "req")}, 409)
		if !strings.Contains(errorMessage(r), nv.TurnID) {
			t.Errorf("second :retry of %s = %s, want a 409 naming the first retry %s", id, r.body, nv.TurnID)
		}
		if outcome == "failed" {
			// The same input, priority and limits; the deadline keeps its distance.
			old := e.turnView(asAdmin, id)
			if string(nv.Input) != string(old.Input) || nv.Priority != 2 || nv.MaxAttempts == nil || *nv.MaxAttempts != 5 {
				t.Errorf("retry of the failed Turn = input %s priority %d max %v, want %s, 2, 5", nv.Input, nv.Priority, nv.MaxAttempts, old.Input)
			}
			if want := nv.CreatedAt.Add(old.Deadline.Sub(old.CreatedAt)); nv.Deadline == nil || !nv.Deadline.Equal(want) {
				t.Errorf("retry's deadline = %v, want %s (the same distance from its dispatch)", nv.Deadline, want)
			}
		}
	}
	// Not from succeeded, nor from a Turn not finished, nor by a stranger.
	e.must(req, "POST", schedP+"/turns/"+ok.TurnID+":retry", map[string]any{"requested_by": ref("p1", "req")}, 409)
	live := e.scheduled(req, "live", nil)
	e.must(req, "POST", schedP+"/turns/"+live.TurnID+":retry", map[string]any{"requested_by": ref("p1", "req")}, 409)
	e.must(w, "POST", schedP+"/turns/"+f.TurnID+":retry", map[string]any{"requested_by": ref("p1", "worker")}, 403)
}

func TestScheduleValidation(t *testing.T) {
	e, req, _ := schedEnv(t)
	head := e.ledgerLast(t, "p1")
	for _, tc := range []struct {
		sched map[string]any
		field string
	}{
		{map[string]any{"priority": 0}, "priority"},
		{map[string]any{"priority": 6}, "priority"},
		{map[string]any{"priority": "high"}, "priority"},
		{map[string]any{"not_before": "tomorrow"}, "not_before"},
		{map[string]any{"claim_by": at(e, -time.Minute)}, "claim_by"},
		{map[string]any{"deadline": at(e, 0)}, "deadline"},
		{map[string]any{"claim_by": at(e, 2*time.Hour), "deadline": at(e, time.Hour)}, "claim_by"},
		{map[string]any{"not_before": at(e, time.Hour), "claim_by": at(e, time.Minute)}, "not_before"},
		{map[string]any{"max_attempts": 0}, "max_attempts"},
		{map[string]any{"retry_backoff": map[string]any{"initial_s": -1}}, "initial_s"},
		{map[string]any{"retry_backoff": map[string]any{"factor": 0.5}}, "factor"},
		{map[string]any{"retry_backoff": map[string]any{"speed": 1}}, "speed"},
	} {
		body := dispatchBody("p1", "req", "worker", "k", map[string]any{})
		for k, v := range tc.sched {
			body[k] = v
		}
		r := e.must(req, "POST", schedP+"/turns:dispatch", body, 422)
		if r.errorName() != "ValidationError" || !strings.Contains(errorMessage(r), tc.field) {
			t.Errorf("dispatch with %v = %s, want a ValidationError naming %s", tc.sched, r.body, tc.field)
		}
	}
	if got := e.ledgerLast(t, "p1"); got != head {
		t.Errorf("refused dispatches moved the ledger from %d to %d", head, got)
	}
	// A dispatch without the fields is as before, and a repeated dispatch
	// with a schedule finds its Turn.
	raw, _ := json.Marshal(map[string]any{"max_attempts": 2})
	var sched map[string]any
	json.Unmarshal(raw, &sched)
	a := e.scheduled(req, "same", sched)
	if b := e.scheduled(req, "same", sched); b.TurnID != a.TurnID {
		t.Errorf("the same dispatch again = %s, want %s", b.TurnID, a.TurnID)
	}
	body := dispatchBody("p1", "req", "worker", "same", map[string]any{"q": "same"})
	body["max_attempts"] = 3
	e.must(req, "POST", schedP+"/turns:dispatch", body, 409)
}
