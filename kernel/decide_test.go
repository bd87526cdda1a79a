package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// harness drives Decide and Evolve the way the engine does, with every event
// taking a round trip through the ledger's encoding.
type harness struct {
	t   *testing.T
	p   *Project
	now time.Time
	seq uint64
	// credTTL is how long the credentials agent issues last; an hour
	// unless a test that moves the clock far sets it.
	credTTL time.Duration
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, p: NewProject("p1"), now: t0, credTTL: time.Hour}
}

var admin = Common{Caller: Caller{Admin: true}}

func (h *harness) try(cmd Command) ([]Event, error) {
	h.t.Helper()
	events, err := Decide(h.p, cmd, h.now)
	if err != nil {
		return nil, err
	}
	for _, ev := range events {
		b, err := MarshalEvent(ev)
		if err != nil {
			h.t.Fatalf("MarshalEvent(%s) = %v", ev.Type, err)
		}
		back, err := UnmarshalEvent(b)
		if err != nil {
			h.t.Fatalf("UnmarshalEvent(%s) = %v", ev.Type, err)
		}
		h.seq++
		before := h.work()
		Evolve(h.p, Recorded{Seq: h.seq, Event: back})
		// A waiting claim is woken by the events FreesWork names: every
		// event that queues a Turn for an agent or frees some of its
		// capacity must be one of them.
		for id, w := range h.work() {
			if (w.queued > before[id].queued || w.claims < before[id].claims) && !FreesWork(back.Type) {
				h.t.Fatalf("%s gave agent %s work (queued %d -> %d, claims %d -> %d) but FreesWork(%q) = false",
					back.Type, id, before[id].queued, w.queued, before[id].claims, w.claims, back.Type)
			}
		}
	}
	return events, nil
}

type agentWork struct{ queued, claims int }

// work returns every agent's queued Turns and live claims.
func (h *harness) work() map[string]agentWork {
	out := map[string]agentWork{}
	for id, a := range h.p.Agents {
		out[id] = agentWork{queued: h.p.Queued(id), claims: a.ActiveClaims}
	}
	return out
}

func (h *harness) do(cmd Command) []Event {
	h.t.Helper()
	events, err := h.try(cmd)
	if err != nil {
		h.t.Fatalf("Decide(%T) = %v, want success", cmd, err)
	}
	return events
}

func (h *harness) refuse(cmd Command, want Kind) {
	h.t.Helper()
	before := h.seq
	_, err := h.try(cmd)
	if got := ErrorKind(err); err == nil || got != want {
		h.t.Fatalf("Decide(%T) = %v, want kind %s", cmd, err, want)
	}
	if h.seq != before {
		h.t.Fatalf("a refused %T appended events", cmd)
	}
}

func spec(id string, capacity int, grants ...string) AgentSpec {
	return AgentSpec{AgentID: id, Role: "worker", Enabled: true, AcceptsWork: true, Capacity: capacity,
		Capabilities: []string{"summarize"}, Grants: grants, PublicMetadata: json.RawMessage(`{}`)}
}

// agent registers an agent and gives it a credential; it returns the caller.
func (h *harness) agent(id string, capacity int, grants ...string) Common {
	h.t.Helper()
	h.do(RegisterAgent{Common: admin, Spec: spec(id, capacity, grants...), Provenance: Provenance{Kind: "test"}})
	cred := "cred_" + id
	h.do(IssueCredential{Common: admin, AgentID: id, CredentialID: cred, TokenHash: HashSecret("tok-" + id), ExpiresAt: h.now.Add(h.credTTL)})
	c, err := Authenticate(h.p, id, HashSecret("tok-"+id), h.now)
	if err != nil {
		h.t.Fatalf("Authenticate(%s) = %v", id, err)
	}
	return Common{Caller: c}
}

func ref(agent string) AgentRef { return AgentRef{ProjectID: "p1", AgentID: agent} }

func rootDispatch(c Common, id, from, to, key string) Dispatch {
	d := Dispatch{Common: c, TurnID: id, RequestedBy: ref(from), TargetAgent: ref(to), Input: json.RawMessage(`{"q":1}`),
		TurnKind: "summarize", DispatchKey: key, Mode: AuthorityRoot, RequestID: "req-" + key, MaxDepth: 2}
	d.BodyHash = DispatchHash(d)
	return d
}

func (h *harness) claim(c Common, agent, claimID string) *ClaimToken {
	h.t.Helper()
	events := h.do(ClaimNext{Common: c, AgentID: agent, ClaimID: claimID, TokenHash: HashSecret("secret-" + claimID), ExpiresAt: h.now.Add(time.Minute)})
	if len(events) == 0 {
		return nil
	}
	return &ClaimToken{ProjectID: "p1", TurnID: events[0].ID, AgentID: agent, Token: "secret-" + claimID}
}

func TestRegisterNeedsTheRegistrationGrant(t *testing.T) {
	h := newHarness(t)
	plain := h.agent("plain", 1)
	registrar := h.agent("registrar", 1, GrantRegister)
	h.refuse(RegisterAgent{Common: plain, Spec: spec("new", 1), Provenance: Provenance{Kind: "x"}}, Forbidden)
	h.do(RegisterAgent{Common: registrar, Spec: spec("new", 1), Provenance: Provenance{Kind: "x"}})
	if h.p.Agents["new"] == nil {
		t.Fatal("agent new was not registered")
	}
}

func TestRegisterValidatesTheSpec(t *testing.T) {
	bad := map[string]func(*AgentSpec){
		"dotted id":        func(s *AgentSpec) { s.AgentID = "a.b" },
		"wildcard id":      func(s *AgentSpec) { s.AgentID = "a*" },
		"empty role":       func(s *AgentSpec) { s.Role = "" },
		"negative cap":     func(s *AgentSpec) { s.Capacity = -1 },
		"unknown grant":    func(s *AgentSpec) { s.Grants = []string{"root"} },
		"metadata array":   func(s *AgentSpec) { s.PublicMetadata = json.RawMessage(`[]`) },
		"metadata missing": func(s *AgentSpec) { s.PublicMetadata = nil },
		"spaced cap":       func(s *AgentSpec) { s.Capabilities = []string{"a b"} },
	}
	for name, mutate := range bad {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			s := spec("a", 1)
			mutate(&s)
			h.refuse(RegisterAgent{Common: admin, Spec: s, Provenance: Provenance{Kind: "x"}}, Validation)
		})
	}
}

func TestCredentials(t *testing.T) {
	h := newHarness(t)
	a := h.agent("a", 1)
	issuer := h.agent("issuer", 1, GrantCredentialIssue)
	h.refuse(IssueCredential{Common: a, AgentID: "a", CredentialID: "c2", TokenHash: HashSecret("x"), ExpiresAt: h.now.Add(time.Hour)}, Forbidden)
	h.do(IssueCredential{Common: issuer, AgentID: "a", CredentialID: "c2", TokenHash: HashSecret("x"), ExpiresAt: h.now.Add(time.Hour)})
	h.refuse(IssueCredential{Common: issuer, AgentID: "ghost", CredentialID: "c3", TokenHash: HashSecret("y"), ExpiresAt: h.now.Add(time.Hour)}, NotFound)

	if _, err := Authenticate(h.p, "a", HashSecret("x"), h.now); err != nil {
		t.Fatalf("Authenticate(a, x) = %v, want success", err)
	}
	for _, tc := range []struct {
		agent, token string
	}{{"a", "wrong"}, {"issuer", "x"}, {"ghost", "x"}} {
		if _, err := Authenticate(h.p, tc.agent, HashSecret(tc.token), h.now); ErrorKind(err) != Unauthorized {
			t.Errorf("Authenticate(%s, %s) = %v, want %s", tc.agent, tc.token, err, Unauthorized)
		}
	}
	// A revoked credential stops working, also for a caller that
	// authenticated before the revocation.
	h.do(RevokeCredential{Common: a, AgentID: "a", CredentialID: "c2"})
	if _, err := Authenticate(h.p, "a", HashSecret("x"), h.now); ErrorKind(err) != Unauthorized {
		t.Errorf("Authenticate after revoke = %v, want %s", err, Unauthorized)
	}
	if events := h.do(RevokeCredential{Common: a, AgentID: "a", CredentialID: "c2"}); len(events) != 0 {
		t.Errorf("revoking a revoked credential = %d events, want 0", len(events))
	}
	h.do(RevokeCredential{Common: a, AgentID: "a", CredentialID: "cred_a"})
	h.refuse(Heartbeat{Common: a, AgentID: "a"}, Unauthorized)
	// Expiry.
	h.now = h.now.Add(2 * time.Hour)
	if _, err := Authenticate(h.p, "issuer", HashSecret("tok-issuer"), h.now); ErrorKind(err) != Unauthorized {
		t.Errorf("Authenticate with an expired credential = %v, want %s", err, Unauthorized)
	}
}

func TestDispatchRefusals(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	nogrant := h.agent("nogrant", 1)
	h.agent("worker", 1)
	off := spec("off", 1)
	off.Enabled = false
	h.do(RegisterAgent{Common: admin, Spec: off, Provenance: Provenance{Kind: "x"}})
	lazy := spec("lazy", 1)
	lazy.AcceptsWork = false
	h.do(RegisterAgent{Common: admin, Spec: lazy, Provenance: Provenance{Kind: "x"}})
	h.agent("drained", 1)
	h.do(SetAgentAdmission{Common: admin, AgentID: "drained", RequestedBy: ref("req"), Drain: true})

	h.refuse(rootDispatch(nogrant, "t0", "nogrant", "worker", "k0"), Forbidden)
	h.refuse(rootDispatch(req, "t1", "worker", "worker", "k1"), Forbidden) // requested_by is not the caller
	h.refuse(rootDispatch(req, "t1", "req", "ghost", "k1"), NotFound)
	h.refuse(rootDispatch(req, "t1", "req", "off", "k1"), Invariant)
	h.refuse(rootDispatch(req, "t1", "req", "lazy", "k1"), Invariant)
	h.refuse(rootDispatch(req, "t1", "req", "drained", "k1"), Invariant)
	other := rootDispatch(req, "t1", "req", "worker", "k1")
	other.TargetAgent.ProjectID = "p2"
	h.refuse(other, Forbidden)
	noInput := rootDispatch(req, "t1", "req", "worker", "k1")
	noInput.Input = json.RawMessage(`"text"`)
	h.refuse(noInput, Validation)
	badMode := rootDispatch(req, "t1", "req", "worker", "k1")
	badMode.Mode = "whatever"
	h.refuse(badMode, Validation)
}

func TestDispatchIsIdempotentByKey(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	h.agent("worker", 1)
	h.do(rootDispatch(req, "t1", "req", "worker", "k1"))
	if events := h.do(rootDispatch(req, "t2", "req", "worker", "k1")); len(events) != 0 {
		t.Fatalf("a repeated dispatch gave %d events, want 0", len(events))
	}
	if got := h.p.DispatchKeys[DispatchKeyOf("req", "k1")]; got != "t1" {
		t.Errorf("dispatch key k1 -> %s, want t1", got)
	}
	changed := rootDispatch(req, "t3", "req", "worker", "k1")
	changed.Input = json.RawMessage(`{"q":2}`)
	changed.BodyHash = DispatchHash(changed)
	h.refuse(changed, Conflict)
}

func TestDispatchHashIgnoresKeyOrderAndSpacing(t *testing.T) {
	a := rootDispatch(admin, "t1", "r", "w", "k")
	b := a
	a.Input = json.RawMessage(`{"x":1,"y":[1,2]}`)
	b.Input = json.RawMessage(`{ "y": [1, 2], "x": 1 }`)
	if DispatchHash(a) != DispatchHash(b) {
		t.Error("dispatchHash differs for equal inputs")
	}
}

func TestClaimTakesTheOldestQueuedTurnWithinCapacity(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	w := h.agent("worker", 2)
	for i := 1; i <= 3; i++ {
		h.do(rootDispatch(req, fmt.Sprintf("t%d", i), "req", "worker", fmt.Sprintf("k%d", i)))
	}
	var got []string
	for i := 1; i <= 3; i++ {
		if c := h.claim(w, "worker", fmt.Sprintf("c%d", i)); c != nil {
			got = append(got, c.TurnID)
		}
	}
	if diff := cmp.Diff([]string{"t1", "t2"}, got); diff != "" {
		t.Errorf("claimed turns (-want +got):\n%s", diff)
	}
	// Another agent cannot claim for the worker.
	h.refuse(ClaimNext{Common: req, AgentID: "worker", ClaimID: "c9", TokenHash: "x", ExpiresAt: h.now.Add(time.Minute)}, Forbidden)
}

func TestDrainedAgentClaimsNothingAndKeepsItsQueue(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch, GrantManage)
	w := h.agent("worker", 1)
	h.do(rootDispatch(req, "t1", "req", "worker", "k1"))
	h.do(SetAgentAdmission{Common: req, AgentID: "worker", RequestedBy: ref("req"), Drain: true})
	if c := h.claim(w, "worker", "c1"); c != nil {
		t.Fatalf("a drained agent claimed %s", c.TurnID)
	}
	if got := h.p.Turn("t1").State; got != StateQueued {
		t.Errorf("turn state while drained = %s, want %s", got, StateQueued)
	}
	h.do(SetAgentAdmission{Common: req, AgentID: "worker", RequestedBy: ref("req"), Drain: false})
	if c := h.claim(w, "worker", "c1"); c == nil || c.TurnID != "t1" {
		t.Fatalf("claim after resume = %v, want t1", c)
	}
	h.refuse(SetAgentAdmission{Common: w, AgentID: "worker", RequestedBy: ref("worker"), Drain: true}, Forbidden)
}

func TestFencing(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	w := h.agent("worker", 2)
	other := h.agent("other", 1)
	h.do(rootDispatch(req, "t1", "req", "worker", "k1"))
	tok := h.claim(w, "worker", "c1")
	rec := func(c Common, tok ClaimToken) AppendRecord {
		return AppendRecord{Common: c, TurnID: "t1", Claim: tok, TokenHash: HashSecret(tok.Token), Role: "note", Payload: json.RawMessage(`{}`)}
	}
	forged := *tok
	forged.Token = "guess"
	h.refuse(rec(w, forged), Fencing)
	foreign := *tok
	foreign.AgentID = "other"
	h.refuse(rec(other, foreign), Fencing)
	h.refuse(rec(other, *tok), Fencing) // a stolen token in another agent's hands
	wrongTurn := *tok
	wrongTurn.TurnID = "t2"
	h.refuse(rec(w, wrongTurn), Fencing)
	wrongProject := *tok
	wrongProject.ProjectID = "p2"
	h.refuse(rec(w, wrongProject), Forbidden)

	for i := 1; i <= 3; i++ {
		ev := h.do(rec(w, *tok))
		if got := ev[0].Data.(*TurnRecordAppended).TurnSeq; got != uint64(i) {
			t.Fatalf("record %d has turn_seq %d", i, got)
		}
	}
	// Expiry fences the old holder out; reconcile releases; a new claim
	// takes over and the old token stays dead.
	h.now = h.now.Add(2 * time.Minute)
	h.refuse(rec(w, *tok), Fencing)
	h.do(ExpireClaim{Common: admin, TurnID: "t1"})
	tok2 := h.claim(w, "worker", "c2")
	h.refuse(rec(w, *tok), Fencing)
	fin := Finish{Common: w, TurnID: "t1", Claim: *tok2, TokenHash: HashSecret(tok2.Token), Outcome: "succeeded",
		FinalPayload: json.RawMessage(`{"ok":true}`), FinalRecordRole: "final"}
	ev := h.do(fin)
	if got := ev[0].Data.(*TurnFinished).TurnSeq; got != 4 {
		t.Errorf("final record turn_seq = %d, want 4", got)
	}
	h.refuse(fin, Fencing) // finished: the claim is gone
	if got := h.p.Turn("t1"); got.State != StateFinished || got.Outcome != "succeeded" {
		t.Errorf("turn = %s/%s, want finished/succeeded", got.State, got.Outcome)
	}
	if got := h.p.Agents["worker"].ActiveClaims; got != 0 {
		t.Errorf("active claims after finish = %d, want 0", got)
	}
}

func TestFinishValidatesOutcomeAndFinalRecord(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	w := h.agent("worker", 1)
	h.do(rootDispatch(req, "t1", "req", "worker", "k1"))
	tok := h.claim(w, "worker", "c1")
	base := Finish{Common: w, TurnID: "t1", Claim: *tok, TokenHash: HashSecret(tok.Token), Outcome: "succeeded"}
	bad := base
	bad.Outcome = "great"
	h.refuse(bad, Validation)
	bad = base
	bad.FinalPayload = json.RawMessage(`{"a":1}`)
	h.refuse(bad, Validation) // no final_record_role
	bad.FinalRecordRole = "final"
	bad.FinalPayload = json.RawMessage(`[1]`)
	h.refuse(bad, Validation)
	h.do(base)
}

func TestStopAndResume(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	w := h.agent("worker", 1)
	stranger := h.agent("stranger", 1)
	for i := 1; i <= 3; i++ {
		h.do(rootDispatch(req, fmt.Sprintf("t%d", i), "req", "worker", fmt.Sprintf("k%d", i)))
	}
	// An unclaimed Turn ends when a stop is asked.
	h.refuse(Stop{Common: stranger, TurnID: "t3", RequestedBy: ref("stranger")}, Forbidden)
	h.do(Stop{Common: req, TurnID: "t3", RequestedBy: ref("req")})
	if got := h.p.Turn("t3"); got.State != StateFinished || got.Outcome != OutcomeStopped || !got.StopRequested {
		t.Fatalf("stopped unclaimed turn = %+v", got)
	}
	h.refuse(Stop{Common: req, TurnID: "t3", RequestedBy: ref("req")}, Conflict)

	// A claimed Turn gets the flag; the holder sees it and may not suspend.
	tok := h.claim(w, "worker", "c1")
	h.do(Stop{Common: req, TurnID: "t1", RequestedBy: ref("req")})
	if got := h.p.Turn("t1"); got.State != StateClaimed || !got.StopRequested {
		t.Fatalf("stop of a claimed turn = %s, stop_requested %v", got.State, got.StopRequested)
	}
	h.refuse(Suspend{Common: w, TurnID: "t1", Claim: *tok, TokenHash: HashSecret(tok.Token)}, Conflict)
	// The claim expires: the stop ends the Turn.
	h.now = h.now.Add(2 * time.Minute)
	h.do(ExpireClaim{Common: admin, TurnID: "t1"})
	if got := h.p.Turn("t1"); got.State != StateFinished || got.Outcome != OutcomeStopped {
		t.Fatalf("expired stop-requested turn = %s/%s, want finished/stopped", got.State, got.Outcome)
	}

	// Suspend then resume puts the Turn back in its old place in the queue.
	tok = h.claim(w, "worker", "c2")
	if tok.TurnID != "t2" {
		t.Fatalf("claimed %s, want t2", tok.TurnID)
	}
	h.refuse(Resume{Common: req, TurnID: "t2", RequestedBy: ref("req")}, Conflict)
	h.do(Suspend{Common: w, TurnID: "t2", Claim: *tok, TokenHash: HashSecret(tok.Token)})
	if c := h.claim(w, "worker", "c3"); c != nil {
		t.Fatalf("claimed suspended turn %s", c.TurnID)
	}
	h.do(Resume{Common: req, TurnID: "t2", RequestedBy: ref("req")})
	if c := h.claim(w, "worker", "c4"); c == nil || c.TurnID != "t2" {
		t.Fatalf("claim after resume = %v, want t2", c)
	}
}

func TestChildDispatchRecordsLineageAndBoundsDepth(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	w := h.agent("worker", 5)
	h.do(rootDispatch(req, "t0", "req", "worker", "k0"))
	parent := h.claim(w, "worker", "c0")
	for depth := 1; depth <= 3; depth++ {
		d := Dispatch{Common: w, TurnID: fmt.Sprintf("t%d", depth), RequestedBy: ref("worker"), TargetAgent: ref("worker"),
			Input: json.RawMessage(`{}`), TurnKind: "summarize", DispatchKey: fmt.Sprintf("child%d", depth),
			Mode: AuthorityChild, ParentClaim: parent, ParentHash: HashSecret(parent.Token), MaxDepth: 2}
		d.BodyHash = DispatchHash(d)
		if depth == 3 {
			h.refuse(d, Invariant)
			break
		}
		ev := h.do(d)
		data := ev[0].Data.(*TurnDispatched)
		if data.Depth != depth || data.RootTurnID != "t0" || data.Authority.ParentTurnID != parent.TurnID {
			t.Fatalf("child %d = depth %d root %s parent %s", depth, data.Depth, data.RootTurnID, data.Authority.ParentTurnID)
		}
		parent = h.claim(w, "worker", fmt.Sprintf("c%d", depth))
	}
	// A forged parent claim is fenced.
	d := Dispatch{Common: w, TurnID: "tx", RequestedBy: ref("worker"), TargetAgent: ref("worker"), Input: json.RawMessage(`{}`),
		TurnKind: "summarize", DispatchKey: "forged", Mode: AuthorityChild, ParentClaim: parent, ParentHash: HashSecret("nope"), MaxDepth: 2}
	h.refuse(d, Fencing)
}

func TestInvites(t *testing.T) {
	h := newHarness(t)
	a := h.agent("a", 1)
	inv := InviteCreated{InviteID: "inv1", AgentID: "newbie", ProfileKind: "default", RuntimeKind: "byoa",
		ExpiresAt: h.now.Add(time.Hour), SingleUse: true, CodeHash: HashSecret("code"), Spec: spec("", 1)}
	h.refuse(CreateInvite{Common: a, Invite: inv}, Forbidden)
	h.do(CreateInvite{Common: admin, Invite: inv})
	h.refuse(RedeemInvite{CodeHash: HashSecret("other"), CredentialID: "c1", TokenHash: "h1", ExpiresAt: h.now.Add(time.Hour)}, Unauthorized)
	h.do(RedeemInvite{CodeHash: HashSecret("code"), CredentialID: "c1", TokenHash: HashSecret("t1"), ExpiresAt: h.now.Add(time.Hour)})
	h.refuse(RedeemInvite{CodeHash: HashSecret("code"), CredentialID: "c2", TokenHash: "h2", ExpiresAt: h.now.Add(time.Hour)}, Conflict)
	if _, err := Authenticate(h.p, "newbie", HashSecret("t1"), h.now); err != nil {
		t.Fatalf("Authenticate(newbie) = %v", err)
	}
	multi := inv
	multi.InviteID, multi.SingleUse, multi.CodeHash = "inv2", false, HashSecret("multi")
	h.do(CreateInvite{Common: admin, Invite: multi})
	h.do(RedeemInvite{CodeHash: HashSecret("multi"), CredentialID: "c3", TokenHash: "h3", ExpiresAt: h.now.Add(time.Hour)})
	h.do(RedeemInvite{CodeHash: HashSecret("multi"), CredentialID: "c4", TokenHash: "h4", ExpiresAt: h.now.Add(time.Hour)})
	h.now = h.now.Add(2 * time.Hour)
	h.refuse(RedeemInvite{CodeHash: HashSecret("multi"), CredentialID: "c5", TokenHash: "h5", ExpiresAt: h.now.Add(time.Hour)}, Unauthorized)
}

func TestWorkMemoryReport(t *testing.T) {
	h := newHarness(t)
	a := h.agent("a", 1)
	h.agent("b", 1)
	good := `{"kind":"agent_work_memory_report_manifest.v1","request_id":"r1","summary":"s",
		"records":[{"role":"note","payload":{"x":1},"source_refs":[]}],"final_payload":null,
		"declared_project_id":"p1","declared_agent_id":"a"}`
	r, err := ParseWorkMemoryReport([]byte(good))
	if err != nil {
		t.Fatalf("ParseWorkMemoryReport(good) = %v", err)
	}
	h.do(ReportWorkMemory{Common: a, AgentID: "a", ReportID: "rep1", Report: r})

	for name, tc := range map[string]struct {
		raw  string
		want Kind
	}{
		"meta at the top":   {`{"meta":{},"kind":"agent_work_memory_report_manifest.v1"}`, Validation},
		"meta in a payload": {`{"kind":"agent_work_memory_report_manifest.v1","records":[{"role":"n","payload":{"deep":{"meta":1}},"source_refs":[]}]}`, Validation},
		"unknown field":     {`{"kind":"agent_work_memory_report_manifest.v1","extra":1}`, Validation},
		"not json":          {`{`, Validation},
	} {
		if _, err := ParseWorkMemoryReport([]byte(tc.raw)); ErrorKind(err) != tc.want {
			t.Errorf("ParseWorkMemoryReport(%s) = %v, want %s", name, err, tc.want)
		}
	}
	// An unknown field is named by its path.
	for raw, path := range map[string]string{
		`{"kind":"agent_work_memory_report_manifest.v1","extra":1}`:                                                     "extra",
		`{"kind":"agent_work_memory_report_manifest.v1","records":[{"role":"n"},{"role":"n","weight":1}],"zz":1}`:       "zz",
		`{"kind":"agent_work_memory_report_manifest.v1","records":[{"role":"n"},{"role":"n","weight":1}]}`:              "records[1].weight",
		`{"kind":"agent_work_memory_report_manifest.v1","records":[{"role":"n","payload":{"anything":1},"b":1,"a":2}]}`: "records[0].a",
	} {
		_, err := ParseWorkMemoryReport([]byte(raw))
		var ke *Error
		if want := `unknown field "` + path + `" in the work-memory report manifest`; !errors.As(err, &ke) || ke.Kind != Validation || ke.Message != want {
			t.Errorf("ParseWorkMemoryReport(%s) = %v, want %s %q", raw, err, Validation, want)
		}
	}
	for name, tc := range map[string]struct {
		mutate func(*WorkMemoryReport)
		want   Kind
	}{
		"wrong kind":        {func(r *WorkMemoryReport) { r.Kind = "v2" }, Validation},
		"other project":     {func(r *WorkMemoryReport) { r.DeclaredProjectID = "p2" }, Forbidden},
		"other agent":       {func(r *WorkMemoryReport) { r.DeclaredAgentID = "b" }, Forbidden},
		"record no payload": {func(r *WorkMemoryReport) { r.Records[0].Payload = nil }, Validation},
		"record no refs":    {func(r *WorkMemoryReport) { r.Records[0].SourceRefs = nil }, Validation},
		"no records":        {func(r *WorkMemoryReport) { r.Records = nil }, Validation},
	} {
		r, _ := ParseWorkMemoryReport([]byte(good))
		tc.mutate(&r)
		_, err := h.try(ReportWorkMemory{Common: a, AgentID: "a", ReportID: "rep2", Report: r})
		if ErrorKind(err) != tc.want {
			t.Errorf("report with %s = %v, want %s", name, err, tc.want)
		}
	}
	// Only the agent itself reports.
	r, _ = ParseWorkMemoryReport([]byte(good))
	h.refuse(ReportWorkMemory{Common: admin, AgentID: "a", ReportID: "rep3", Report: r}, Forbidden)
}

func TestUnknownEventIsAnError(t *testing.T) {
	for _, raw := range []string{
		`{"type":"turn.teleported","v":1,"project_id":"p","aggregate":"turn","id":"t","data":{}}`,
		`{"type":"turn.dispatched","v":9,"project_id":"p","aggregate":"turn","id":"t","data":{}}`,
	} {
		if _, err := UnmarshalEvent([]byte(raw)); err == nil {
			t.Errorf("UnmarshalEvent(%s) = nil error, want an error", raw)
		}
	}
	if _, err := MarshalEvent(Event{Type: EvTurnDispatched, V: 1, ProjectID: "p.x", ID: "t", Data: &TurnDispatched{}}); err == nil {
		t.Error("MarshalEvent with a dotted project id = nil error, want an error")
	}
}

func TestErrorKind(t *testing.T) {
	if got := ErrorKind(fmt.Errorf("wrapped: %w", Errorf(Fencing, "x"))); got != Fencing {
		t.Errorf("ErrorKind(wrapped fencing) = %s", got)
	}
	if got := ErrorKind(errors.New("boom")); got != Internal {
		t.Errorf("ErrorKind(plain) = %s, want %s", got, Internal)
	}
}

func TestDispatchKeysAreScopedAndGuarded(t *testing.T) {
	h := newHarness(t)
	a := h.agent("a", 1, GrantDispatch)
	b := h.agent("b", 1, GrantDispatch)
	spy := h.agent("spy", 1)
	h.agent("worker", 1)
	h.do(rootDispatch(a, "t1", "a", "worker", "same"))
	// Another requester with the same key makes its own Turn.
	if ev := h.do(rootDispatch(b, "t2", "b", "worker", "same")); len(ev) != 1 || ev[0].ID != "t2" {
		t.Fatalf("b's dispatch with a's key = %v, want a new turn t2", ev)
	}
	// Replaying a's dispatch without the right to make it shows nothing.
	h.refuse(rootDispatch(spy, "t3", "a", "worker", "same"), Forbidden)
	h.refuse(rootDispatch(spy, "t3", "spy", "worker", "same"), Forbidden)
}
