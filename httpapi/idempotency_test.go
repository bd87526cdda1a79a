package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/natstest"
)

// feedTypes lists the event types of a Turn's feed.
func (e *env) feedTypes(who as, turnID string) []string {
	e.t.Helper()
	var feed struct {
		Items []struct {
			Type string `json:"type"`
		} `json:"items"`
	}
	e.must(who, "GET", "/v3r1/projects/"+who.project+"/turns/"+turnID+"/feed", nil, 200).decode(e.t, &feed)
	var types []string
	for _, it := range feed.Items {
		types = append(types, it.Type)
	}
	return types
}

// TestIdempotencyKeyRetriesAnswerTheFirstResult retries every step of a
// lifecycle with the same key and body: each retry answers what the first
// request did and appends nothing.
func TestIdempotencyKeyRetriesAnswerTheFirstResult(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "worker", 2)
	t1 := e.dispatch(req, "worker", "a")
	t2 := e.dispatch(req, "worker", "b")

	claimPath := "/v3r1/projects/p1/agents/worker/claims:claim"
	claimBody := map[string]any{"agent": ref("p1", "worker")}
	first := e.must(w.withKey("claim-1"), "POST", claimPath, claimBody, 200)
	again := e.must(w.withKey("claim-1"), "POST", claimPath, claimBody, 200)
	var c1, c2 claimed
	first.decode(t, &c1)
	again.decode(t, &c2)
	if c1.Claim.Token == "" || c1.Turn.TurnID != t1.TurnID {
		t.Fatalf("first claim = %s, want a claim of %s", first.body, t1.TurnID)
	}
	if diff := cmp.Diff(c1.Claim, c2.Claim); diff != "" {
		t.Fatalf("retried claim's token differs (-first +retry):\n%s", diff)
	}
	var t2now turn
	e.must(req, "GET", "/v3r1/projects/p1/turns/"+t2.TurnID, nil, 200).decode(t, &t2now)
	if t2now.State != "queued" {
		t.Fatalf("after a retried claim the second Turn is %s, want queued (the retry must not take another Turn)", t2now.State)
	}

	recPath := "/v3r1/projects/p1/turns/" + t1.TurnID + "/semantic-records"
	rec := map[string]any{"claim": c1.Claim, "role": "note", "payload": map[string]any{"step": 1}}
	r1 := e.must(w.withKey("rec-1"), "POST", recPath, rec, 200)
	r2 := e.must(w.withKey("rec-1"), "POST", recPath, rec, 200)
	if string(r1.body) != string(r2.body) {
		t.Errorf("retried record = %s, want the first answer %s", r2.body, r1.body)
	}
	// The same key with another body is refused; another key is a new record.
	rec2 := map[string]any{"claim": c1.Claim, "role": "note", "payload": map[string]any{"step": 2}}
	if r := e.do(w.withKey("rec-1"), "POST", recPath, rec2); r.status != 422 || r.errorName() != "ValidationError" {
		t.Errorf("same key, other body = %d %s, want 422 ValidationError", r.status, r.body)
	}
	e.must(w.withKey("rec-2"), "POST", recPath, rec2, 200)

	finPath := "/v3r1/projects/p1/turns/" + t1.TurnID + ":finish"
	fin := map[string]any{"claim": c1.Claim, "outcome": "succeeded"}
	f1 := e.must(w.withKey("fin-1"), "POST", finPath, fin, 200)
	f2 := e.must(w.withKey("fin-1"), "POST", finPath, fin, 200)
	if string(f1.body) != string(f2.body) {
		t.Errorf("retried finish = %s, want the first answer %s", f2.body, f1.body)
	}
	// Without the key the same finish is what it always was: a stale claim.
	if r := e.do(w, "POST", finPath, fin); r.status != 409 || r.errorName() != "FencingError" {
		t.Errorf("finish again without a key = %d %s, want 409 FencingError", r.status, r.body)
	}

	want := []string{"turn.dispatched", "turn.claimed", "turn.record_appended", "turn.record_appended", "turn.finished"}
	if diff := cmp.Diff(want, e.feedTypes(req, t1.TurnID)); diff != "" {
		t.Errorf("turn feed (-want +got):\n%s", diff)
	}
}

// TestIdempotencyKeyIsScopedToCallerAndRoute: the same key from another
// caller, or on another route, is another request.
func TestIdempotencyKeyIsScopedToCallerAndRoute(t *testing.T) {
	e := newEnv(t)
	e.register("p1", "req", 1, "turns:dispatch")
	a := e.register("p1", "a", 1)
	b := e.register("p1", "b", 1)
	hb := func(who as) string { return "/v3r1/projects/p1/management/agents/" + who.agent + ":heartbeat-presence" }
	e.must(a.withKey("k"), "POST", hb(a), map[string]any{"agent": ref("p1", "a")}, 200)
	// Another caller, another body, same key: not a clash.
	e.must(b.withKey("k"), "POST", hb(b), map[string]any{"agent": ref("p1", "b")}, 200)
	// Same caller, another route, another body, same key: not a clash.
	e.must(a.withKey("k"), "PUT", "/v3r1/projects/p1/management/agents/a/public-metadata", map[string]any{"x": 1}, 200)
}

func TestIdempotencyKeyMustBePrintable(t *testing.T) {
	e := newEnv(t)
	a := e.register("p1", "a", 1)
	path := "/v3r1/projects/p1/management/agents/a:heartbeat-presence"
	for _, k := range []string{strings.Repeat("k", 256), "tab\there", "é"} {
		if r := e.do(a.withKey(k), "POST", path, map[string]any{}); r.status != 422 || r.errorName() != "ValidationError" {
			t.Errorf("Idempotency-Key %q = %d %s, want 422 ValidationError", k, r.status, r.body)
		}
	}
	e.must(a.withKey(strings.Repeat("k", 255)), "POST", path, map[string]any{}, 200)
}

// TestIdempotencyKeySurvivesARestartAndHoldsAcrossInstances: the answer is
// kept in the ledger-derived write model, so another engine (a restart, or a
// second instance on the same NATS) answers a retry the same way, claim
// token included; after the retention the key is forgotten.
func TestIdempotencyKeySurvivesARestartAndHoldsAcrossInstances(t *testing.T) {
	srv := natstest.Start(t)
	clk := &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	e1 := newEnvOn(t, srv.ClientURL(), clk)
	req := e1.register("p1", "req", 1, "turns:dispatch")
	w := e1.register("p1", "worker", 1)
	tv := e1.dispatch(req, "worker", "a")
	claimPath := "/v3r1/projects/p1/agents/worker/claims:claim"
	claimBody := map[string]any{"agent": ref("p1", "worker")}
	var c1 claimed
	e1.must(w.withKey("c"), "POST", claimPath, claimBody, 200).decode(t, &c1)
	recPath := "/v3r1/projects/p1/turns/" + tv.TurnID + "/semantic-records"
	rec := map[string]any{"claim": c1.Claim, "role": "note", "payload": map[string]any{"x": 1}}
	r1 := e1.must(w.withKey("r"), "POST", recPath, rec, 200)

	e2 := newEnvOn(t, srv.ClientURL(), clk) // a fresh engine: nothing in memory
	var c2 claimed
	e2.must(w.withKey("c"), "POST", claimPath, claimBody, 200).decode(t, &c2)
	if diff := cmp.Diff(c1.Claim, c2.Claim); diff != "" {
		t.Errorf("claim retried on another instance (-first +retry):\n%s", diff)
	}
	if r2 := e2.must(w.withKey("r"), "POST", recPath, rec, 200); string(r2.body) != string(r1.body) {
		t.Errorf("record retried on another instance = %s, want %s", r2.body, r1.body)
	}
	if got := e2.feedTypes(req, tv.TurnID); len(got) != 3 {
		t.Errorf("turn feed = %v, want dispatched, claimed, one record", got)
	}

	// Past the retention the key is forgotten: the same key is a new request.
	clk.Advance(24*time.Hour + time.Minute)
	e2.must(w, "POST", "/v3r1/projects/p1/management/agents/worker:heartbeat-presence", map[string]any{}, 200)
	rec2 := map[string]any{"claim": c1.Claim, "role": "note", "payload": map[string]any{"y": 1}}
	if r := e2.do(w.withKey("r"), "POST", recPath, rec2); r.errorName() == "ValidationError" {
		t.Errorf("key reused after the retention = %d %s, want it decided afresh", r.status, r.body)
	}
}

// TestIdempotencyKeyOnSecretBearingRoutes: a retried credential issue, invite
// and redeem answer the same secret (re-derived, never stored), and a retried
// claims:reconcile-expired the same released Turns.
func TestIdempotencyKeyOnSecretBearingRoutes(t *testing.T) {
	e := newEnv(t)
	e.register("p1", "a", 1)
	issue := "/v3r1/projects/p1/agents/a/credentials:issue"
	i1 := e.must(asAdmin.withKey("i"), "POST", issue, nil, 200)
	i2 := e.must(asAdmin.withKey("i"), "POST", issue, nil, 200)
	if string(i1.body) != string(i2.body) {
		t.Errorf("retried credential issue = %s, want %s", i2.body, i1.body)
	}

	inv := "/admin/v1/projects/p1/agent-join-invites"
	v1 := e.must(asAdmin.withKey("v"), "POST", inv, inviteBody("j", nil), 200)
	v2 := e.must(asAdmin.withKey("v"), "POST", inv, inviteBody("j", nil), 200)
	if string(v1.body) != string(v2.body) {
		t.Errorf("retried invite = %s, want %s", v2.body, v1.body)
	}
	var code struct {
		JoinCode string `json:"join_code"`
	}
	v1.decode(t, &code)
	red := map[string]any{"join_code": code.JoinCode}
	d1 := e.must(asNobody.withKey("d"), "POST", redeemRoute, red, 200)
	d2 := e.must(asNobody.withKey("d"), "POST", redeemRoute, red, 200)
	if string(d1.body) != string(d2.body) {
		t.Errorf("retried redeem = %s, want %s", d2.body, d1.body)
	}

	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "w", 2)
	e.dispatch(req, "w", "x")
	e.dispatch(req, "w", "y")
	e.claim(w)
	e.claim(w)
	e.clock.Advance(2 * time.Minute)
	rec := "/v3r1/projects/p1/claims:reconcile-expired"
	var rc1, rc2 struct {
		Released []string `json:"released_turn_ids"`
	}
	e.must(asAdmin.withKey("rc"), "POST", rec, nil, 200).decode(t, &rc1)
	e.must(asAdmin.withKey("rc"), "POST", rec, nil, 200).decode(t, &rc2)
	if len(rc1.Released) != 2 {
		t.Fatalf("reconcile released %v, want 2 Turns", rc1.Released)
	}
	if diff := cmp.Diff(rc1.Released, rc2.Released); diff != "" {
		t.Errorf("retried reconcile (-first +retry):\n%s", diff)
	}
}

// TestIdempotencyKeyOnBootstrap: the bootstrap request appends one event
// that registers the agent and issues its credential; its retry answers the
// same material (the same token) and appends none.
func TestIdempotencyKeyOnBootstrap(t *testing.T) {
	e := newEnv(t)
	const path = "/admin/v1/projects/p1/agent-credential-tokens:request"
	body := map[string]any{"agent_id": "boot", "spec": map[string]any{"role": "bootstrapper", "capacity": 2,
		"capabilities": []string{"summarize"}, "grants": []string{}, "public_metadata": map[string]any{}},
		"provenance": map[string]any{"kind": "operator", "external_ref": "t", "payload_hash": nil}}
	first := e.must(asAdmin.withKey("boot-1"), "POST", path, body, 200)
	seq, err := e.ledger.LastSeq(t.Context(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	again := e.must(asAdmin.withKey("boot-1"), "POST", path, body, 200)
	if string(first.body) != string(again.body) {
		t.Errorf("retried bootstrap = %s, want %s", again.body, first.body)
	}
	if seq2, _ := e.ledger.LastSeq(t.Context(), "p1"); seq2 != seq {
		t.Errorf("the retry appended: ledger at %d, was %d", seq2, seq)
	}
}
