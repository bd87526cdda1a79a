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
