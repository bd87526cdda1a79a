package kernel

import (
	"encoding/json"
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
