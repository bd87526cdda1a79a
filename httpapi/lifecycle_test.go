package httpapi_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTurnLifecycle(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "worker", 2)

	tv := e.dispatch(req, "worker", "k1")
	if tv.State != "queued" || tv.Claim != nil {
		t.Fatalf("dispatched turn = %+v, want queued without claim", tv)
	}
	// Read your own writes: the snapshot is there at once.
	var got turn
	e.must(req, "GET", "/v3r1/projects/p1/turns/"+tv.TurnID, nil, 200).decode(t, &got)
	if got.TurnID != tv.TurnID || got.State != "queued" {
		t.Fatalf("GET turn = %+v", got)
	}

	c := e.claim(w)
	if c == nil || c.Turn.TurnID != tv.TurnID || c.Turn.State != "claimed" {
		t.Fatalf("claim = %+v, want turn %s claimed", c, tv.TurnID)
	}
	if c.Claim.Token == "" || c.Claim.AgentID != "worker" || c.Claim.ProjectID != "p1" {
		t.Fatalf("claim token = %+v", c.Claim)
	}
	exp, err := time.Parse(time.RFC3339Nano, c.Claim.ExpiresAt)
	if err != nil || !exp.Equal(e.clock.Now().Add(60*time.Second)) {
		t.Fatalf("claim expires_at = %s, want now+60s", c.Claim.ExpiresAt)
	}
	if again := e.claim(w); again != nil {
		t.Fatalf("second claim = %+v, want null", again)
	}

	for i := 1; i <= 2; i++ {
		var rec struct {
			TurnSeq       uint64 `json:"turn_seq"`
			StopRequested bool   `json:"stop_requested"`
		}
		e.must(w, "POST", "/v3r1/projects/p1/turns/"+tv.TurnID+"/semantic-records", map[string]any{
			"claim": c.Claim, "role": "note", "payload": map[string]any{"step": i}, "meta": map[string]any{"note": "n"}, "trace": nil,
		}, 200).decode(t, &rec)
		if rec.TurnSeq != uint64(i) || rec.StopRequested {
			t.Fatalf("record %d = %+v", i, rec)
		}
	}
	e.clock.Advance(30 * time.Second)
	var renewed struct {
		Claim         claimToken `json:"claim"`
		StopRequested bool       `json:"stop_requested"`
	}
	e.must(w, "POST", "/v3r1/projects/p1/claims:renew", map[string]any{"claim": c.Claim}, 200).decode(t, &renewed)
	if exp2, _ := time.Parse(time.RFC3339Nano, renewed.Claim.ExpiresAt); !exp2.Equal(e.clock.Now().Add(60 * time.Second)) {
		t.Fatalf("renewed expires_at = %s", renewed.Claim.ExpiresAt)
	}

	var fin turn
	e.must(w, "POST", "/v3r1/projects/p1/turns/"+tv.TurnID+":finish", map[string]any{
		"claim": renewed.Claim, "outcome": "succeeded", "final_payload": map[string]any{"answer": 42}, "final_record_role": "final",
	}, 200).decode(t, &fin)
	if fin.State != "finished" || fin.Outcome == nil || *fin.Outcome != "succeeded" || fin.Claim != nil || fin.LastTurnSeq != 3 {
		t.Fatalf("finished turn = %+v", fin)
	}

	var ctxPage struct {
		ProjectID string `json:"project_id"`
		Items     []struct {
			TurnSeq uint64          `json:"turn_seq"`
			Role    string          `json:"role"`
			Payload json.RawMessage `json:"payload"`
		} `json:"items"`
		Limit       int   `json:"limit"`
		Diagnostics []any `json:"diagnostics"`
	}
	e.must(req, "GET", "/v3r1/projects/p1/turns/"+tv.TurnID+"/context?after_turn_seq=1&limit=10", nil, 200).decode(t, &ctxPage)
	var roles []string
	for _, it := range ctxPage.Items {
		roles = append(roles, fmt.Sprintf("%d:%s:%s", it.TurnSeq, it.Role, it.Payload))
	}
	if diff := cmp.Diff([]string{`2:note:{"step":2}`, `3:final:{"answer":42}`}, roles); diff != "" {
		t.Errorf("context after 1 (-want +got):\n%s", diff)
	}
	if ctxPage.ProjectID != "p1" || ctxPage.Limit != 10 || ctxPage.Diagnostics == nil {
		t.Errorf("context page = %+v, want the projection page shape", ctxPage)
	}

	var feed struct {
		Items []struct {
			LedgerSeq uint64 `json:"ledger_seq"`
			Type      string `json:"type"`
		} `json:"items"`
	}
	e.must(req, "GET", "/v3r1/projects/p1/turns/"+tv.TurnID+"/feed", nil, 200).decode(t, &feed)
	var types []string
	for i, it := range feed.Items {
		if i > 0 && it.LedgerSeq <= feed.Items[i-1].LedgerSeq {
			t.Errorf("feed ledger_seq not increasing at %d", i)
		}
		types = append(types, it.Type)
	}
	want := []string{"turn.dispatched", "turn.claimed", "turn.record_appended", "turn.record_appended", "turn.claim_renewed", "turn.finished"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("turn feed types (-want +got):\n%s", diff)
	}
	// The claim token is dead once the Turn is finished.
	if r := e.do(w, "POST", "/v3r1/projects/p1/claims:renew", map[string]any{"claim": renewed.Claim}); r.status != 409 || r.errorName() != "FencingError" {
		t.Errorf("renew after finish = %d %s, want 409 FencingError", r.status, r.body)
	}
}

func TestDispatchIdempotency(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	e.register("p1", "worker", 1)
	first := e.dispatch(req, "worker", "same")
	again := e.dispatch(req, "worker", "same")
	if first.TurnID != again.TurnID {
		t.Fatalf("same key and body gave turns %s and %s", first.TurnID, again.TurnID)
	}
	body := dispatchBody("p1", "req", "worker", "same", map[string]any{"q": "different"})
	if r := e.do(req, "POST", "/v3r1/projects/p1/turns:dispatch", body); r.status != 409 || r.errorName() != "ConflictError" {
		t.Fatalf("same key, other body = %d %s, want 409 ConflictError", r.status, r.body)
	}
	var page struct {
		Items []turn `json:"items"`
	}
	e.must(req, "GET", "/v3r1/projects/p1/projection/turns", nil, 200).decode(t, &page)
	if len(page.Items) != 1 {
		t.Errorf("projection/turns has %d turns, want 1", len(page.Items))
	}
}

func TestDispatchRefusedToAgentsThatTakeNoWork(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch", "management")
	e.register("p1", "worker", 1)
	cases := []struct {
		to     string
		status int
		name   string
	}{
		{"ghost", 404, "NotFoundError"},
	}
	e.must(asAdmin, "POST", "/v3r1/projects/p1/agents:register", map[string]any{
		"spec": map[string]any{"agent_id": "off", "role": "worker", "description": "", "enabled": false, "accepts_work": true,
			"capacity": 1, "capabilities": []string{}, "grants": []string{}, "public_metadata": map[string]any{}},
		"provenance": map[string]any{"kind": "test", "external_ref": "", "payload_hash": nil},
	}, 200)
	cases = append(cases, struct {
		to     string
		status int
		name   string
	}{"off", 422, "InvariantError"})
	e.must(req, "POST", "/v3r1/projects/p1/management/agents/worker:drain", map[string]any{"agent": ref("p1", "worker"), "requested_by": ref("p1", "req")}, 200)
	cases = append(cases, struct {
		to     string
		status int
		name   string
	}{"worker", 422, "InvariantError"})
	for _, tc := range cases {
		r := e.do(req, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchBody("p1", "req", tc.to, "k-"+tc.to, map[string]any{}))
		if r.status != tc.status || r.errorName() != tc.name {
			t.Errorf("dispatch to %s = %d %s, want %d %s", tc.to, r.status, r.body, tc.status, tc.name)
		}
	}
}

func TestCapacityBoundsClaims(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "worker", 2)
	var ids []string
	for i := 0; i < 4; i++ {
		ids = append(ids, e.dispatch(req, "worker", fmt.Sprintf("k%d", i)).TurnID)
	}
	var got []string
	for i := 0; i < 4; i++ {
		if c := e.claim(w); c != nil {
			got = append(got, c.Turn.TurnID)
		}
	}
	if diff := cmp.Diff(ids[:2], got); diff != "" {
		t.Errorf("claimed (-want +got), oldest first within capacity 2:\n%s", diff)
	}
}

func TestStopSuspendResumeAndReconcile(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "worker", 1)
	t1 := e.dispatch(req, "worker", "k1")
	t2 := e.dispatch(req, "worker", "k2")

	// Stop of an unclaimed Turn ends it.
	var stopped turn
	e.must(req, "POST", "/v3r1/projects/p1/management/turns/"+t2.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req")}, 200).decode(t, &stopped)
	if stopped.State != "finished" || stopped.Outcome == nil || *stopped.Outcome != "stopped" || !stopped.StopRequested {
		t.Fatalf("stopped unclaimed turn = %+v", stopped)
	}
	if stopped.StopRequestedAt == nil || !stopped.StopRequestedAt.Equal(e.clock.Now()) {
		t.Errorf("stop_requested_at = %v, want %v", stopped.StopRequestedAt, e.clock.Now())
	}

	// Suspend and resume.
	c := e.claim(w)
	var sus turn
	e.must(w, "POST", "/v3r1/projects/p1/turns/"+t1.TurnID+":suspend", map[string]any{"claim": c.Claim}, 200).decode(t, &sus)
	if sus.State != "suspended" || sus.Claim != nil {
		t.Fatalf("suspended = %+v", sus)
	}
	if again := e.claim(w); again != nil {
		t.Fatalf("claimed a suspended turn: %+v", again)
	}
	var res turn
	e.must(req, "POST", "/v3r1/projects/p1/turns/"+t1.TurnID+":resume", map[string]any{"requested_by": ref("p1", "req")}, 200).decode(t, &res)
	if res.State != "queued" {
		t.Fatalf("resumed = %+v", res)
	}
	if r := e.do(req, "POST", "/v3r1/projects/p1/turns/"+t1.TurnID+":resume", map[string]any{"requested_by": ref("p1", "req")}); r.status != 409 {
		t.Fatalf("resume of a queued turn = %d, want 409", r.status)
	}

	// Stop of a claimed Turn sets the flag; the holder sees it on records.
	c = e.claim(w)
	e.must(req, "POST", "/v3r1/projects/p1/management/turns/"+t1.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req")}, 200).decode(t, &stopped)
	if stopped.State != "claimed" || !stopped.StopRequested {
		t.Fatalf("stop of claimed turn = %+v", stopped)
	}
	var rec struct {
		StopRequested bool `json:"stop_requested"`
	}
	e.must(w, "POST", "/v3r1/projects/p1/turns/"+t1.TurnID+"/semantic-records", map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{}}, 200).decode(t, &rec)
	if !rec.StopRequested {
		t.Fatal("record response does not show stop_requested")
	}

	// The claim expires; reconcile releases it and the stop ends the Turn.
	e.clock.Advance(61 * time.Second)
	if r := e.do(w, "POST", "/v3r1/projects/p1/turns/"+t1.TurnID+"/semantic-records", map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{}}); r.status != 409 || r.errorName() != "FencingError" {
		t.Fatalf("record with an expired claim = %d %s, want 409 FencingError", r.status, r.body)
	}
	var rc struct {
		Released []string `json:"released_turn_ids"`
	}
	e.must(w, "POST", "/v3r1/projects/p1/claims:reconcile-expired", nil, 200).decode(t, &rc)
	if diff := cmp.Diff([]string{t1.TurnID}, rc.Released); diff != "" {
		t.Fatalf("released (-want +got):\n%s", diff)
	}
	var final turn
	e.must(req, "GET", "/v3r1/projects/p1/turns/"+t1.TurnID, nil, 200).decode(t, &final)
	if final.State != "finished" || *final.Outcome != "stopped" {
		t.Fatalf("turn after reconcile = %+v, want finished/stopped", final)
	}
}

func TestExpiredClaimGoesBackToTheQueue(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "worker", 1)
	tv := e.dispatch(req, "worker", "k1")
	old := e.claim(w)
	e.clock.Advance(2 * time.Minute)
	if n, err := e.engine.Reap(t.Context()); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v; want 1 released", n, err)
	}
	c := e.claim(w)
	if c == nil || c.Turn.TurnID != tv.TurnID {
		t.Fatalf("claim after expiry = %+v, want %s", c, tv.TurnID)
	}
	r := e.do(w, "POST", "/v3r1/projects/p1/turns/"+tv.TurnID+":finish", map[string]any{"claim": old.Claim, "outcome": "succeeded", "final_payload": nil, "final_record_role": ""})
	if r.status != 409 || r.errorName() != "FencingError" {
		t.Fatalf("finish with the stale claim = %d %s, want 409 FencingError", r.status, r.body)
	}
	var got turn
	e.must(req, "GET", "/v3r1/projects/p1/turns/"+tv.TurnID, nil, 200).decode(t, &got)
	if got.State != "claimed" {
		t.Fatalf("a stale finish changed the turn: %+v", got)
	}
}

func TestChildTurnsAndLineage(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "worker", 20)
	root := e.dispatch(req, "worker", "root")
	c := e.claim(w)
	child := func(parent claimToken, key string) response {
		return e.do(w, "POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
			"requested_by": ref("p1", "worker"), "target_agent": ref("p1", "worker"), "input": map[string]any{},
			"turn_kind": "summarize", "dispatch_key": key,
			"authority": map[string]any{"mode": "child_derivation", "parent_claim": parent},
		})
	}
	var kid turn
	if r := child(c.Claim, "child1"); r.status != 200 {
		t.Fatalf("child dispatch = %d %s", r.status, r.body)
	} else {
		r.decode(t, &kid)
	}
	if kid.Depth != 1 || kid.RootTurnID != root.TurnID {
		t.Fatalf("child = %+v, want depth 1 under %s", kid, root.TurnID)
	}
	forged := c.Claim
	forged.Token = "tlc_forged"
	if r := child(forged, "child2"); r.status != 409 || r.errorName() != "FencingError" {
		t.Fatalf("child with a forged parent claim = %d %s", r.status, r.body)
	}
	var lin struct {
		Items []struct {
			TurnID   string `json:"turn_id"`
			Relation string `json:"relation"`
			Depth    int    `json:"depth"`
		} `json:"items"`
	}
	e.must(req, "GET", "/v3r1/projects/p1/projection/turns/"+kid.TurnID+"/lineage", nil, 200).decode(t, &lin)
	var got []string
	for _, it := range lin.Items {
		got = append(got, fmt.Sprintf("%s:%s:%d", it.TurnID, it.Relation, it.Depth))
	}
	want := []string{root.TurnID + ":ancestor:0", kid.TurnID + ":self:1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lineage (-want +got):\n%s", diff)
	}

	// The depth bound (8 by default) is a 422 InvariantError.
	parent := c.Claim
	for depth := 1; depth <= 9; depth++ {
		r := child(parent, fmt.Sprintf("deep%d", depth))
		if depth == 9 {
			if r.status != 422 || r.errorName() != "InvariantError" {
				t.Fatalf("child at depth 9 = %d %s, want 422 InvariantError", r.status, r.body)
			}
			break
		}
		if r.status != 200 {
			t.Fatalf("child at depth %d = %d %s", depth, r.status, r.body)
		}
		var next *claimed
		for next == nil || next.Turn.Depth != depth {
			next = e.claim(w)
			if next == nil {
				t.Fatalf("no turn to claim at depth %d", depth)
			}
		}
		parent = next.Claim
	}
}

func TestProjectionTurnFilters(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch", "projections:read")
	w1 := e.register("p1", "w1", 5)
	e.register("p1", "w2", 5)
	a := e.dispatch(req, "w1", "a")
	b := e.dispatch(req, "w1", "b")
	c := e.dispatch(req, "w2", "c")
	e.must(req, "POST", "/v3r1/projects/p1/management/turns/"+c.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req")}, 200)
	cl := e.claim(w1)
	e.must(req, "POST", "/v3r1/projects/p1/management/turns/"+a.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req")}, 200)
	_ = cl
	ids := func(who as, query string) []string {
		t.Helper()
		var page struct {
			Items []turn `json:"items"`
			Limit int    `json:"limit"`
		}
		e.must(who, "GET", "/v3r1/projects/p1/projection/turns"+query, nil, 200).decode(t, &page)
		out := []string{}
		for _, it := range page.Items {
			out = append(out, it.TurnID)
		}
		return out
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{a.TurnID, b.TurnID, c.TurnID}},
		{"?target_agent_id=w1", []string{a.TurnID, b.TurnID}},
		{"?state=queued", []string{b.TurnID}},
		{"?state=claimed", []string{a.TurnID}},
		{"?state=finished&outcome=stopped", []string{c.TurnID}},
		{"?stop_requested_only=true", []string{a.TurnID, c.TurnID}},
		{"?turn_kind=summarize&limit=2", []string{a.TurnID, b.TurnID}},
		{"?turn_kind=other", []string{}},
	} {
		if diff := cmp.Diff(tc.want, ids(req, tc.query)); diff != "" {
			t.Errorf("projection/turns%s (-want +got):\n%s", tc.query, diff)
		}
	}
	// Without the read grant an agent sees only its own Turns.
	if diff := cmp.Diff([]string{a.TurnID, b.TurnID}, ids(w1, "")); diff != "" {
		t.Errorf("projection/turns as w1 (-want +got):\n%s", diff)
	}
}

// TestProjectionTurnsPages walks more Turns than one page holds with the
// after_ledger_seq cursor, with and without a filter that skips most of them:
// every Turn comes once, in dispatch order, and no page examines more than
// its scan budget.
func TestProjectionTurnsPages(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch", "projections:read")
	e.register("p1", "worker", 1)
	var all, stopped []string
	for i := 0; i < 130; i++ {
		tv := e.dispatch(req, "worker", fmt.Sprintf("k%d", i))
		all = append(all, tv.TurnID)
		if i%40 == 0 {
			e.must(req, "POST", "/v3r1/projects/p1/management/turns/"+tv.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req")}, 200)
			stopped = append(stopped, tv.TurnID)
		}
	}
	walk := func(query string, limit int) ([]string, int) {
		var got []string
		after, pages := uint64(0), 0
		for ; pages < 100; pages++ {
			var page struct {
				Items   []turn `json:"items"`
				Next    uint64 `json:"next_after_ledger_seq"`
				HasMore bool   `json:"has_more"`
			}
			e.must(req, "GET", fmt.Sprintf("/v3r1/projects/p1/projection/turns?limit=%d&after_ledger_seq=%d%s", limit, after, query), nil, 200).decode(t, &page)
			for _, it := range page.Items {
				got = append(got, it.TurnID)
			}
			if !page.HasMore {
				break
			}
			if page.Next <= after {
				t.Fatalf("cursor did not advance: %d after %d", page.Next, after)
			}
			after = page.Next
		}
		return got, pages + 1
	}
	if got, _ := walk("", 50); !cmp.Equal(all, got) {
		t.Errorf("paging all turns: got %d turns, want %d in dispatch order", len(got), len(all))
	}
	// A filter that matches 4 of 130: pages of 1 examine at most 110 Turns,
	// so the walk takes more than one page even when a page is short.
	got, pages := walk("&state=finished&outcome=stopped", 1)
	if diff := cmp.Diff(stopped, got); diff != "" {
		t.Errorf("paging stopped turns (-want +got):\n%s", diff)
	}
	if pages < len(stopped) {
		t.Errorf("walked %d pages for %d turns of limit 1", pages, len(stopped))
	}
	got, _ = walk("&stop_requested_only=true", 1)
	if diff := cmp.Diff(stopped, got); diff != "" {
		t.Errorf("paging stop-requested turns with a scan budget (-want +got):\n%s", diff)
	}
}
