package kernel

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// turnSamples has one sample of every event of the turn aggregate, pinned by
// the golden files under testdata/events (golden_test.go).
func turnSamples() []Event {
	return []Event{
		sample(EvTurnDispatched, AggTurn, "turn_1", &TurnDispatched{TargetAgent: AgentRef{"p1", "worker"}, RequestedBy: AgentRef{"p1", "req"}, Input: json.RawMessage(`{"q":1}`),
			TurnKind: "summarize", DispatchKey: "k1", BodyHash: sampleHash, Authority: Authority{Mode: AuthorityChild, ParentTurnID: "turn_0", ParentClaim: "clm_0"}, RootTurnID: "turn_0", Depth: 1}),
		sample(EvTurnClaimed, AggTurn, "turn_1", &TurnClaimed{ClaimID: "clm_1", AgentID: "worker", TokenHash: sampleHash, ExpiresAt: t0}),
		sample(EvTurnClaimRenewed, AggTurn, "turn_1", &TurnClaimRenewed{ClaimID: "clm_1", ExpiresAt: t0}),
		sample(EvTurnRecordAppended, AggTurn, "turn_1", &TurnRecordAppended{ClaimID: "clm_1", TurnSeq: 1, Role: "note", Payload: json.RawMessage(`{"x":1}`)}),
		sample(EvTurnSuspended, AggTurn, "turn_1", &TurnSuspended{ClaimID: "clm_1"}),
		sample(EvTurnResumed, AggTurn, "turn_1", &TurnResumed{RequestedBy: AgentRef{"p1", "req"}}),
		sample(EvTurnFinished, AggTurn, "turn_1", &TurnFinished{ClaimID: "clm_1", Outcome: "succeeded", FinalPayload: json.RawMessage(`{"ok":true}`), FinalRecordRole: "final", TurnSeq: 2}),
		sample(EvTurnStopRequested, AggTurn, "turn_1", &TurnStopRequested{RequestedBy: AgentRef{"p1", "req"}}),
		sample(EvTurnStopped, AggTurn, "turn_1", &TurnStopped{RequestedBy: AgentRef{"p1", "req"}}),
		sample(EvTurnClaimExpired, AggTurn, "turn_1", &TurnClaimExpired{ClaimID: "clm_1", Stopped: true}),
		sample(EvTurnExpired, AggTurn, "turn_1", &TurnExpired{ClaimBy: t0}),
		sample(EvTurnTimedOut, AggTurn, "turn_1", &TurnTimedOut{Deadline: t0, ClaimID: "clm_1"}),
		sample(EvTurnClaimReleased, AggTurn, "turn_1", &TurnClaimReleased{ClaimID: "clm_1"}),
		sample(EvTurnInputProvided, AggTurn, "turn_1", &TurnInputProvided{Input: json.RawMessage(`{"approve":true}`), TurnSeq: 4}),
		sample(EvTurnRetryScheduled, AggTurn, "turn_1", &TurnRetryScheduled{ClaimID: "clm_1", NotBefore: t0.Add(time.Second),
			FinalPayload: json.RawMessage(`{"error":"boom"}`), FinalRecordRole: "error", TurnSeq: 3}),
	}
}

// TestGoldenDispatchWithSchedule pins a turn.dispatched carrying every
// optional field of the schedule and retry_of (v1: the file without them
// still decodes).
func TestGoldenDispatchWithSchedule(t *testing.T) {
	want := sample(EvTurnDispatched, AggTurn, "turn_2", &TurnDispatched{TargetAgent: AgentRef{"p1", "worker"}, RequestedBy: AgentRef{"p1", "req"},
		Input: json.RawMessage(`{"q":1}`), TurnKind: "summarize", DispatchKey: "retry:turn_1", BodyHash: sampleHash,
		Authority: Authority{Mode: AuthorityRoot, RequestID: "r1"}, RootTurnID: "turn_2", RetryOf: "turn_1",
		Schedule: Schedule{Priority: ptr(1), NotBefore: ptr(t0), ClaimBy: ptr(t0.Add(time.Minute)), Deadline: ptr(t0.Add(time.Hour)),
			MaxAttempts: ptr(3), RetryBackoff: &Backoff{InitialS: 1, Factor: 2, MaxS: 60}}})
	checkGolden(t, filepath.Join("testdata", "events", "turn.dispatched.v1.with-schedule.json"), want)
}

// TestGoldenInputWait pins a suspension for input and a time-out of its
// input_by (optional fields of v1).
func TestGoldenInputWait(t *testing.T) {
	for name, want := range map[string]Event{
		"turn.suspended.v1.awaiting-input.json": sample(EvTurnSuspended, AggTurn, "turn_1", &TurnSuspended{ClaimID: "clm_1", AwaitingInput: &AwaitingInput{
			Prompt: "Approve the refund?", Schema: json.RawMessage(`{"type":"object"}`), InputBy: ptr(t0.Add(time.Hour)), TokenHash: sampleHash}}),
		"turn.timed_out.v1.awaiting-input.json": sample(EvTurnTimedOut, AggTurn, "turn_1", &TurnTimedOut{Deadline: t0, AwaitingInput: true}),
	} {
		checkGolden(t, filepath.Join("testdata", "events", name), want)
	}
}

func TestInputWait(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	w := h.agent("w", 1)
	other := h.agent("other", 1)
	h.do(rootDispatch(req, "t1", "req", "w", "k1"))
	tok := h.claim(w, "w", "c1")
	wait := &AwaitingInput{Prompt: "Approve?", Schema: json.RawMessage(`{"type":"object"}`), InputBy: ptr(t0.Add(time.Hour)), TokenHash: HashSecret("input-1")}
	suspend := func(aw *AwaitingInput) Suspend {
		return Suspend{Common: w, TurnID: "t1", Claim: *tok, TokenHash: HashSecret(tok.Token), AwaitingInput: aw}
	}
	h.refuse(suspend(&AwaitingInput{Prompt: "", TokenHash: "x"}), Validation)
	h.refuse(suspend(&AwaitingInput{Prompt: "p", Schema: json.RawMessage(`[1]`), TokenHash: "x"}), Validation)
	h.refuse(suspend(&AwaitingInput{Prompt: "p", InputBy: ptr(t0), TokenHash: "x"}), Validation)
	h.do(suspend(wait))
	if got := h.p.Turn("t1"); got.State != StateSuspended || got.AwaitingInput == nil || got.AwaitingInput.Prompt != "Approve?" {
		t.Fatalf("after the suspend for input: %+v", got)
	}
	provide := func(c Common, token string) ProvideInput {
		p := ProvideInput{Common: c, TurnID: "t1", Input: json.RawMessage(`{"approve":true}`)}
		if token != "" {
			p.TokenHash = HashSecret(token)
		}
		return p
	}
	h.refuse(provide(Common{}, "not-the-token"), Unauthorized)
	h.refuse(provide(other, ""), Forbidden)
	h.refuse(ProvideInput{TurnID: "t1", Input: json.RawMessage(`"yes"`), TokenHash: HashSecret("input-1")}, Validation)
	evs := h.do(provide(Common{}, "input-1"))
	if d := evs[0].Data.(*TurnInputProvided); d.TurnSeq != 1 || evs[0].Actor.Kind != ActorInputToken {
		t.Errorf("input provided = %+v by %+v, want turn_seq 1 by the input token", d, evs[0].Actor)
	}
	if got := h.p.Turn("t1"); got.State != StateQueued || got.AwaitingInput != nil || got.TurnSeq != 1 {
		t.Fatalf("after the input: %+v, want queued, not awaiting, turn_seq 1", got)
	}
	h.refuse(provide(Common{}, "input-1"), Conflict) // the token works once
	h.refuse(provide(req, ""), Conflict)             // and the Turn waits no more

	// The requester may answer too; an input_by that passes times it out.
	tok = h.claim(w, "w", "c2")
	h.do(Suspend{Common: w, TurnID: "t1", Claim: *tok, TokenHash: HashSecret(tok.Token), AwaitingInput: &AwaitingInput{Prompt: "Again?", TokenHash: HashSecret("input-2")}})
	h.do(provide(req, ""))
	tok = h.claim(w, "w", "c3")
	h.do(Suspend{Common: w, TurnID: "t1", Claim: *tok, TokenHash: HashSecret(tok.Token), AwaitingInput: &AwaitingInput{Prompt: "Last?", InputBy: ptr(t0.Add(time.Minute)), TokenHash: HashSecret("input-3")}})
	h.now = t0.Add(time.Minute)
	for _, id := range DueTurns(h.p, h.now) {
		h.do(ExpireDue{Common: admin, TurnID: id})
	}
	if got := h.p.Turn("t1"); got.Outcome != OutcomeTimedOut {
		t.Errorf("a Turn past its input_by: %s/%s, want finished/timed_out", got.State, got.Outcome)
	}
}

// TestGoldenClaimWithALease pins a claim whose lease is not the default.
func TestGoldenClaimWithALease(t *testing.T) {
	checkGolden(t, filepath.Join("testdata", "events", "turn.claimed.v1.with-lease.json"),
		sample(EvTurnClaimed, AggTurn, "turn_1", &TurnClaimed{ClaimID: "clm_1", AgentID: "worker", TokenHash: sampleHash, ExpiresAt: t0, LeaseS: 10}))
}

func TestLeasesPerAgentAndPerClaim(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	h.do(RegisterAgent{Common: admin, Spec: func() AgentSpec { s := spec("short", 2); s.ClaimTTLS = 10; return s }(), Provenance: Provenance{Kind: "test"}})
	h.do(IssueCredential{Common: admin, AgentID: "short", CredentialID: "cred_short", TokenHash: HashSecret("tok-short"), ExpiresAt: h.now.Add(time.Hour)})
	caller, _ := Authenticate(h.p, "short", HashSecret("tok-short"), h.now)
	w := Common{Caller: caller}
	for i := range 3 {
		h.do(rootDispatch(req, fmt.Sprintf("t%d", i), "req", "short", fmt.Sprintf("k%d", i)))
	}
	bad := RegisterAgent{Common: admin, Spec: func() AgentSpec { s := spec("x", 1); s.ClaimTTLS = MaxClaimTTLS + 1; return s }(), Provenance: Provenance{Kind: "test"}}
	h.refuse(bad, Validation)
	claim := func(lease int) (*TurnClaimed, error) {
		evs, err := h.try(ClaimNext{Common: w, AgentID: "short", ClaimID: fmt.Sprintf("c%d", h.seq), TokenHash: HashSecret("s"), ExpiresAt: h.now.Add(time.Minute), LeaseS: lease})
		if err != nil || len(evs) == 0 {
			return nil, err
		}
		return evs[0].Data.(*TurnClaimed), nil
	}
	// The agent's claim_ttl_s replaces the default; a claim may ask less, not more.
	if d, err := claim(0); err != nil || d.LeaseS != 10 || !d.ExpiresAt.Equal(h.now.Add(10*time.Second)) {
		t.Errorf("claim of an agent with claim_ttl_s 10 = %+v, %v; want a 10 s lease", d, err)
	}
	if _, err := claim(11); ErrorKind(err) != Validation {
		t.Errorf("a claim asking 11 s of a 10 s agent = %v, want a ValidationError", err)
	}
	d, err := claim(3)
	if err != nil || d.LeaseS != 3 || !d.ExpiresAt.Equal(h.now.Add(3*time.Second)) {
		t.Fatalf("a claim asking 3 s = %+v, %v", d, err)
	}
	// A renew extends the claim by its own lease.
	h.now = h.now.Add(time.Second)
	tok := ClaimToken{ProjectID: "p1", TurnID: "t1", AgentID: "short", Token: "s"}
	evs := h.do(Renew{Common: w, Claim: tok, TokenHash: HashSecret("s"), ExpiresAt: h.now.Add(time.Minute)})
	if got := evs[0].Data.(*TurnClaimRenewed).ExpiresAt; !got.Equal(h.now.Add(3 * time.Second)) {
		t.Errorf("renew of a 3 s claim ends at %s, want %s", got, h.now.Add(3*time.Second))
	}
	// A release hands the Turn back to its old place, the attempt not counted.
	h.do(ReleaseClaim{Common: w, Claim: tok, TokenHash: HashSecret("s")})
	if got := h.p.Turn("t1"); got.State != StateQueued || got.Attempts != 0 || h.p.NextQueued("short", h.now).ID != "t1" {
		t.Errorf("after the release: %s, %d attempts, next %s; want queued, 0, t1 first", got.State, got.Attempts, h.p.NextQueued("short", h.now).ID)
	}
	h.refuse(ReleaseClaim{Common: w, Claim: tok, TokenHash: HashSecret("s")}, Fencing)
}
