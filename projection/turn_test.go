package projection

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

func TestTurnSnapshotLifecycle(t *testing.T) {
	l := newEvents()
	l.register("worker", "coder", 2, "code")
	l.register("boss", "lead", 1)
	d := l.dispatch("t1", "worker", "boss", "code")
	c := l.claim("t1", "worker", "c1")
	l.record("t1", "worker", "c1", 1, "note", `{"n":1}`)
	renew := l.turnEvent(kernel.EvTurnClaimRenewed, "t1", agent("worker"), &kernel.TurnClaimRenewed{ClaimID: "c1", ExpiresAt: t0.Add(time.Hour)})
	s := applied(t, l)

	claimedAt := c.Event.At
	want := TurnView{
		ProjectID: proj, TurnID: "t1", TurnKind: "code", State: StateClaimed,
		TargetAgent: ref("worker"), RequestedBy: ref("boss"), Input: raw(`{"q":"t1"}`),
		DispatchKey: "k-t1", Authority: AuthorityView{Mode: kernel.AuthorityRoot, RequestID: "r-t1"},
		RootTurnID: "t1", Claim: &ClaimView{ClaimID: "c1", AgentID: "worker", ClaimedAt: claimedAt, ExpiresAt: t0.Add(time.Hour)},
		Attempts: 1, LastTurnSeq: 1, Priority: kernel.DefaultPriority, Tags: []string{}, CreatedAt: d.Event.At, UpdatedAt: renew.Event.At, LedgerSeq: renew.Seq,
	}
	got, err := s.Turn(proj, "t1")
	if err != nil {
		t.Fatalf("Turn(t1) = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Turn(t1) mismatch (-want +got):\n%s", diff)
	}

	fin := l.finish("t1", "worker", "c1", "succeeded", `{"answer":42}`, 2)
	mustApply(t, s, l.since(renew.Seq))
	want.State, want.Outcome, want.Claim = StateFinished, ptr("succeeded"), nil
	want.FinalPayload, want.FinalRecordRole, want.FinishedAt = raw(`{"answer":42}`), ptr("final"), ptr(fin.Event.At)
	want.LastTurnSeq, want.UpdatedAt, want.LedgerSeq = 2, fin.Event.At, fin.Seq
	got, err = s.Turn(proj, "t1")
	if err != nil {
		t.Fatalf("Turn(t1) = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Turn(t1) after finish mismatch (-want +got):\n%s", diff)
	}
}

// TestTurnTransitions runs each event sequence on a fresh Turn and checks the
// fields the transition table of the package doc sets.
func TestTurnTransitions(t *testing.T) {
	type fields struct {
		State         string
		Outcome       *string
		StopRequested bool
		HasClaim      bool
		Attempts      int
		Finished      bool
	}
	claim := func(l *events) { l.claim("t", "w", "c1") }
	ev := func(typ string, data any) func(*events) {
		return func(l *events) { l.turnEvent(typ, "t", agent("w"), data) }
	}
	stopReq := ev(kernel.EvTurnStopRequested, &kernel.TurnStopRequested{RequestedBy: ref("b")})
	tests := []struct {
		name  string
		steps []func(*events)
		want  fields
	}{
		{"dispatched", nil, fields{State: StateQueued}},
		{"claimed", []func(*events){claim}, fields{State: StateClaimed, HasClaim: true, Attempts: 1}},
		{"suspended", []func(*events){claim, ev(kernel.EvTurnSuspended, &kernel.TurnSuspended{ClaimID: "c1"})},
			fields{State: StateSuspended, Attempts: 1}},
		{"resumed", []func(*events){claim, ev(kernel.EvTurnSuspended, &kernel.TurnSuspended{ClaimID: "c1"}), ev(kernel.EvTurnResumed, &kernel.TurnResumed{RequestedBy: ref("b")})},
			fields{State: StateQueued, Attempts: 1}},
		{"finished failed", []func(*events){claim, ev(kernel.EvTurnFinished, &kernel.TurnFinished{ClaimID: "c1", Outcome: "failed"})},
			fields{State: StateFinished, Outcome: ptr("failed"), Attempts: 1, Finished: true}},
		{"stop requested while claimed", []func(*events){claim, stopReq},
			fields{State: StateClaimed, StopRequested: true, HasClaim: true, Attempts: 1}},
		{"stop of queued Turn", []func(*events){ev(kernel.EvTurnStopped, &kernel.TurnStopped{RequestedBy: ref("b")})},
			fields{State: StateFinished, Outcome: ptr(OutcomeStopped), StopRequested: true, Finished: true}},
		{"claim expired", []func(*events){claim, ev(kernel.EvTurnClaimExpired, &kernel.TurnClaimExpired{ClaimID: "c1"})},
			fields{State: StateQueued, Attempts: 1}},
		{"claim expired then claimed again", []func(*events){claim, ev(kernel.EvTurnClaimExpired, &kernel.TurnClaimExpired{ClaimID: "c1"}), claim},
			fields{State: StateClaimed, HasClaim: true, Attempts: 2}},
		{"claim expired after stop request", []func(*events){claim, stopReq, ev(kernel.EvTurnClaimExpired, &kernel.TurnClaimExpired{ClaimID: "c1", Stopped: true})},
			fields{State: StateFinished, Outcome: ptr(OutcomeStopped), StopRequested: true, Attempts: 1, Finished: true}},
		{"data as values, not pointers", []func(*events){
			func(l *events) {
				l.turnEvent(kernel.EvTurnClaimed, "t", agent("w"), kernel.TurnClaimed{ClaimID: "c1", AgentID: "w"})
			},
			ev(kernel.EvTurnFinished, kernel.TurnFinished{ClaimID: "c1", Outcome: "succeeded"}),
		}, fields{State: StateFinished, Outcome: ptr("succeeded"), Attempts: 1, Finished: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newEvents()
			l.register("w", "worker", 1, "k")
			l.dispatch("t", "w", "b", "k")
			for _, step := range tt.steps {
				step(l)
			}
			s := applied(t, l)
			v, err := s.Turn(proj, "t")
			if err != nil {
				t.Fatalf("Turn(t) = %v", err)
			}
			got := fields{State: v.State, Outcome: v.Outcome, StopRequested: v.StopRequested, HasClaim: v.Claim != nil, Attempts: v.Attempts, Finished: v.FinishedAt != nil}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Turn(t) mismatch (-want +got):\n%s", diff)
			}
			if v.LedgerSeq != l.seq {
				t.Errorf("Turn(t).LedgerSeq = %d, want %d", v.LedgerSeq, l.seq)
			}
			// The agent directory's active claims follow the claim.
			a, err := s.Agent(proj, "w", l.now())
			if err != nil {
				t.Fatalf("Agent(w) = %v", err)
			}
			wantClaims := 0
			if tt.want.HasClaim {
				wantClaims = 1
			}
			if a.ActiveClaims != wantClaims || a.FreeCapacity != 1-wantClaims {
				t.Errorf("Agent(w) active_claims, free_capacity = %d, %d, want %d, %d", a.ActiveClaims, a.FreeCapacity, wantClaims, 1-wantClaims)
			}
		})
	}
}

func TestTurnNotFound(t *testing.T) {
	l := newEvents()
	l.dispatch("t1", "w", "b", "k")
	// An event of a Turn never dispatched is kept in the feed, changes no model.
	l.claim("ghost", "w", "c9")
	s := applied(t, l)
	for _, id := range []string{"nope", "ghost", "", "t1\x00"} {
		if _, err := s.Turn(proj, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Turn(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := s.Context(proj, id, 0, 10); !errors.Is(err, ErrNotFound) {
			t.Errorf("Context(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := s.TurnFeed(proj, id, 0, 10); !errors.Is(err, ErrNotFound) {
			t.Errorf("TurnFeed(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := s.Lineage(proj, id, 10, ""); !errors.Is(err, ErrNotFound) {
			t.Errorf("Lineage(%q) = %v, want ErrNotFound", id, err)
		}
	}
	if _, err := s.Turn("other", "t1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Turn(other project, t1) = %v, want ErrNotFound", err)
	}
	page, err := s.ProjectFeed(proj, 0, 10)
	if err != nil || len(page.Items) != 2 {
		t.Errorf("ProjectFeed = %d items, %v; want 2 items", len(page.Items), err)
	}
}

func TestContext(t *testing.T) {
	l := newEvents()
	l.dispatch("t1", "w", "b", "k")
	l.dispatch("t2", "w", "b", "k")
	l.claim("t1", "w", "c1")
	l.claim("t2", "w", "c2")
	var want []ContextItem
	for i := uint64(1); i <= 7; i++ {
		r := l.record("t1", "w", "c1", i, "step", `{"i":`+string(rune('0'+i))+`}`)
		want = append(want, ContextItem{TurnSeq: i, Role: "step", Payload: raw(`{"i":` + string(rune('0'+i)) + `}`), ClaimID: "c1", AgentID: "w", At: r.Event.At, LedgerSeq: r.Seq})
		l.record("t2", "w", "c2", i, "other", `{}`)
	}
	fin := l.finish("t1", "w", "c1", "succeeded", `{"done":true}`, 8)
	want = append(want, ContextItem{TurnSeq: 8, Role: "final", Payload: raw(`{"done":true}`), ClaimID: "c1", AgentID: "w", At: fin.Event.At, LedgerSeq: fin.Seq})
	l.finish("t2", "w", "c2", "failed", "", 0) // no final payload: no final record
	s := applied(t, l)

	tests := []struct {
		after   uint64
		limit   int
		want    []ContextItem
		next    uint64
		hasMore bool
	}{
		{0, 500, want, 8, false},
		{0, 3, want[:3], 3, true},
		{3, 3, want[3:6], 6, true},
		{6, 3, want[6:], 8, false},
		{8, 3, []ContextItem{}, 8, false},
		{100, 3, []ContextItem{}, 100, false},
		{^uint64(0), 3, []ContextItem{}, ^uint64(0), false},
	}
	for _, tt := range tests {
		got, err := s.Context(proj, "t1", tt.after, tt.limit)
		if err != nil {
			t.Fatalf("Context(t1, %d, %d) = %v", tt.after, tt.limit, err)
		}
		wantPage := ContextPage{Items: tt.want, NextAfterTurnSeq: tt.next, HasMore: tt.hasMore}
		if diff := cmp.Diff(wantPage, got); diff != "" {
			t.Errorf("Context(t1, %d, %d) mismatch (-want +got):\n%s", tt.after, tt.limit, diff)
		}
	}
	got, err := s.Context(proj, "t2", 0, 500)
	if err != nil || len(got.Items) != 7 {
		t.Errorf("Context(t2) = %d items, %v; want 7 (no final record without a final payload)", len(got.Items), err)
	}
	v, _ := s.Turn(proj, "t2")
	if v.FinalPayload != nil || v.LastTurnSeq != 7 {
		t.Errorf("Turn(t2) final_payload, last_turn_seq = %s, %d; want null, 7", v.FinalPayload, v.LastTurnSeq)
	}
}

func TestTurnsFilters(t *testing.T) {
	l := newEvents()
	l.dispatch("a1", "alice", "boss", "code")   // queued
	l.dispatch("a2", "alice", "bob", "review")  // claimed, stop requested
	l.dispatch("b1", "bob", "boss", "code")     // finished succeeded
	l.dispatch("b2", "bob", "alice", "code")    // finished stopped
	l.dispatch("a3", "alice", "boss", "code")   // finished failed
	l.dispatch("c1", "carol", "boss", "review") // suspended
	l.claim("a2", "alice", "ca2")
	l.turnEvent(kernel.EvTurnStopRequested, "a2", admin(), &kernel.TurnStopRequested{RequestedBy: ref("boss")})
	l.claim("b1", "bob", "cb1")
	l.finish("b1", "bob", "cb1", "succeeded", "", 0)
	l.turnEvent(kernel.EvTurnStopped, "b2", admin(), &kernel.TurnStopped{RequestedBy: ref("boss")})
	l.claim("a3", "alice", "ca3")
	l.finish("a3", "alice", "ca3", "failed", "", 0)
	l.claim("c1", "carol", "cc1")
	l.turnEvent(kernel.EvTurnSuspended, "c1", agent("carol"), &kernel.TurnSuspended{ClaimID: "cc1"})
	// Requested by bob of another project: not bob of this one.
	l.add(kernel.EvTurnDispatched, proj, kernel.AggTurn, "x1", admin(), &kernel.TurnDispatched{
		TargetAgent: ref("carol"), RequestedBy: kernel.AgentRef{ProjectID: "p2", AgentID: "bob"}, TurnKind: "code"})
	s := applied(t, l)

	tests := []struct {
		name  string
		f     TurnFilter
		limit int
		want  []string
	}{
		{"all in dispatch order", TurnFilter{}, 500, []string{"a1", "a2", "b1", "b2", "a3", "c1", "x1"}},
		{"limit", TurnFilter{}, 2, []string{"a1", "a2"}},
		{"target agent", TurnFilter{TargetAgentID: "alice"}, 500, []string{"a1", "a2", "a3"}},
		{"target agent and limit", TurnFilter{TargetAgentID: "alice"}, 1, []string{"a1"}},
		{"turn kind", TurnFilter{TurnKind: "review"}, 500, []string{"a2", "c1"}},
		{"state queued", TurnFilter{State: StateQueued}, 500, []string{"a1", "x1"}},
		{"state claimed", TurnFilter{State: StateClaimed}, 500, []string{"a2"}},
		{"state suspended", TurnFilter{State: StateSuspended}, 500, []string{"c1"}},
		{"state finished", TurnFilter{State: StateFinished}, 500, []string{"b1", "b2", "a3"}},
		{"state unknown", TurnFilter{State: "nonsense"}, 500, []string{}},
		{"outcome succeeded", TurnFilter{Outcome: "succeeded"}, 500, []string{"b1"}},
		{"outcome stopped", TurnFilter{Outcome: OutcomeStopped}, 500, []string{"b2"}},
		{"stop requested only", TurnFilter{StopRequestedOnly: true}, 500, []string{"a2", "b2"}},
		{"visible to bob", TurnFilter{VisibleTo: "bob"}, 500, []string{"a2", "b1", "b2"}},
		{"visible to carol", TurnFilter{VisibleTo: "carol"}, 500, []string{"c1", "x1"}},
		{"visible to carol and limit", TurnFilter{VisibleTo: "carol"}, 1, []string{"c1"}},
		{"visible to alice, finished", TurnFilter{VisibleTo: "alice", State: StateFinished}, 500, []string{"b2", "a3"}},
		{"visible to bob, targeting alice", TurnFilter{VisibleTo: "bob", TargetAgentID: "alice"}, 500, []string{"a2"}},
		{"visible to stranger", TurnFilter{VisibleTo: "zed"}, 500, []string{}},
		{"target and state", TurnFilter{TargetAgentID: "alice", State: StateFinished}, 500, []string{"a3"}},
		{"state and kind", TurnFilter{State: StateFinished, TurnKind: "code"}, 500, []string{"b1", "b2", "a3"}},
		{"everything", TurnFilter{TargetAgentID: "bob", TurnKind: "code", State: StateFinished, Outcome: OutcomeStopped, StopRequestedOnly: true, VisibleTo: "alice"}, 500, []string{"b2"}},
		{"turn kind code", TurnFilter{TurnKind: "code"}, 500, []string{"a1", "b1", "b2", "a3", "x1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Turns(proj, tt.f, tt.limit)
			if err != nil {
				t.Fatalf("Turns(%+v) = %v", tt.f, err)
			}
			ids := []string{}
			for _, v := range got {
				ids = append(ids, v.TurnID)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("Turns(%+v, %d) mismatch (-want +got):\n%s", tt.f, tt.limit, diff)
			}
		})
	}
	if got, _ := s.Turns("other", TurnFilter{}, 500); len(got) != 0 {
		t.Errorf("Turns(other project) = %d Turns, want 0", len(got))
	}
}

func TestLineage(t *testing.T) {
	l := newEvents()
	l.dispatch("root", "a", "boss", "plan")
	l.child("c1", "root", "root", 1, "b", "a", "code")
	l.child("c2", "root", "root", 1, "c", "a", "code")
	l.child("g1", "c1", "root", 2, "d", "b", "test")
	l.child("g2", "c2", "root", 2, "d", "c", "test")
	l.child("gg", "g1", "root", 3, "e", "d", "lint")
	l.dispatch("other", "a", "boss", "plan")
	l.claim("c1", "b", "x")
	s := applied(t, l)

	item := func(id, parent string, depth int, rel, kind, target string) LineageItem {
		it := LineageItem{TurnID: id, Depth: depth, Relation: rel, State: StateQueued, TurnKind: kind, TargetAgent: ref(target)}
		if parent != "" {
			it.ParentTurnID = ptr(parent)
		}
		return it
	}
	root := item("root", "", 0, RelationAncestor, "plan", "a")
	c1 := item("c1", "root", 1, RelationSelf, "code", "b")
	c1.State = StateClaimed
	tests := []struct {
		turn  string
		limit int
		want  []LineageItem
	}{
		{"c1", 500, []LineageItem{root, c1, item("g1", "c1", 2, RelationDescendant, "test", "d"), item("gg", "g1", 3, RelationDescendant, "lint", "e")}},
		{"gg", 500, []LineageItem{
			root, func() LineageItem { x := c1; x.Relation = RelationAncestor; return x }(),
			item("g1", "c1", 2, RelationAncestor, "test", "d"), item("gg", "g1", 3, RelationSelf, "lint", "e"),
		}},
		{"root", 500, []LineageItem{
			item("root", "", 0, RelationSelf, "plan", "a"),
			func() LineageItem { x := c1; x.Relation = RelationDescendant; return x }(),
			item("c2", "root", 1, RelationDescendant, "code", "c"),
			item("g1", "c1", 2, RelationDescendant, "test", "d"),
			item("g2", "c2", 2, RelationDescendant, "test", "d"),
			item("gg", "g1", 3, RelationDescendant, "lint", "e"),
		}},
		{"root", 3, []LineageItem{
			item("root", "", 0, RelationSelf, "plan", "a"),
			func() LineageItem { x := c1; x.Relation = RelationDescendant; return x }(),
			item("c2", "root", 1, RelationDescendant, "code", "c"),
		}},
		{"gg", 2, []LineageItem{root, func() LineageItem { x := c1; x.Relation = RelationAncestor; return x }()}},
		{"other", 500, []LineageItem{item("other", "", 0, RelationSelf, "plan", "a")}},
	}
	for _, tt := range tests {
		got, err := s.Lineage(proj, tt.turn, tt.limit, "")
		if err != nil {
			t.Fatalf("Lineage(%s, %d) = %v", tt.turn, tt.limit, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Lineage(%s, %d) mismatch (-want +got):\n%s", tt.turn, tt.limit, diff)
		}
	}
	v, _ := s.Turn(proj, "g1")
	if diff := cmp.Diff(tref("c1"), v.Parent); diff != "" || v.RootTurnID != "root" || v.Depth != 2 {
		t.Errorf("Turn(g1) parent, root, depth = %v, %s, %d; want c1, root, 2 (%s)", v.Parent, v.RootTurnID, v.Depth, diff)
	}
	if v.Authority != (AuthorityView{Mode: kernel.AuthorityChild, ParentTurnID: "c1"}) {
		t.Errorf("Turn(g1).Authority = %+v, want child_derivation from c1", v.Authority)
	}
}

// TestJSONShapes pins the field names of the views httpapi serves.
func TestJSONShapes(t *testing.T) {
	keys := func(v any) []string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%T) = %v", v, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("Unmarshal(%T) = %v", v, err)
		}
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	tests := []struct {
		v    any
		want []string
	}{
		{TurnView{}, sorted("project_id", "turn_id", "turn_kind", "state", "outcome", "stop_requested", "stop_requested_at", "target_agent",
			"requested_by", "input", "dispatch_key", "authority", "parent", "root_turn_id", "depth", "claim", "attempts",
			"last_turn_seq", "final_payload", "final_record_role", "created_at", "updated_at", "finished_at", "ledger_seq",
			"priority", "not_before", "claim_by", "deadline", "max_attempts", "retry_backoff", "retry_of", "awaiting_input", "tags", "context_id")},
		{ClaimView{}, sorted("claim_id", "agent_id", "claimed_at", "expires_at")},
		{ContextItem{}, sorted("turn_seq", "role", "payload", "claim_id", "agent_id", "at", "ledger_seq")},
		{LineageItem{}, sorted("turn_id", "parent_turn_id", "depth", "relation", "state", "outcome", "turn_kind", "target_agent")},
		{FeedItem{}, sorted("ledger_seq", "type", "v", "project_id", "aggregate", "id", "at", "actor", "data", "meta", "trace")},
		{AgentView{}, sorted("project_id", "agent_id", "role", "description", "enabled", "accepts_work", "drained", "admitting",
			"capacity", "active_claims", "free_capacity", "capabilities", "grants", "public_metadata", "provenance",
			"registered_at", "updated_at", "last_seen_at", "presence", "ledger_seq", "claim_ttl_s")},
		{TurnOffer{}, sorted("agent_id", "turn_kind", "role", "enabled", "accepts_work", "drained", "admitting", "capacity",
			"free_capacity", "queued", "presence")},
		{CredentialView{}, sorted("credential_id", "project_id", "agent_id", "status", "issued_at", "expires_at", "revoked_at", "via")},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, keys(tt.v)); diff != "" {
			t.Errorf("JSON keys of %T mismatch (-want +got):\n%s", tt.v, diff)
		}
	}
}
