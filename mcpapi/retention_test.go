package mcpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// Below the retention horizon, read_feed answers GoneError, and a retired
// Turn's get_turn a NotFoundError that says it was retired: the kernel's
// kinds, as the HTTP API answers them.
func TestRetiredTurnsAndFeedsBelowTheHorizon(t *testing.T) {
	e := newEnv(t)
	reqTok := e.agent("p1", "req", false, "turns:dispatch", "projections:read")
	wrkTok := e.agent("p1", "wrk", true)
	requester := e.client("p1", "req", reqTok, eras[0], nil)
	worker := e.client("p1", "wrk", wrkTok, eras[0], nil)
	var d turnView
	mustCall(t, requester, "dispatch_turn", map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{"x": 1}}, &d)
	var c claimed
	mustCall(t, worker, "claim_turn", map[string]any{"wait_s": 5}, &c)
	var fin struct {
		LedgerSeq uint64 `json:"ledger_seq"`
	}
	mustCall(t, worker, "finish_turn", map[string]any{"claim": c.Claim, "outcome": "succeeded"}, &fin)
	// The answer does not wait for the projections; the retirement reads
	// what they committed, so wait for the commit of the finish.
	if fin.LedgerSeq == 0 {
		t.Fatal("finish_turn answered no ledger_seq")
	}
	if err := e.store.WaitFor(t.Context(), fin.LedgerSeq); err != nil {
		t.Fatal(err)
	}
	cp := e.store.Checkpoint()
	if _, err := e.store.Retire(projection.Retirement{Horizon: cp + 1, FinishedBefore: e.clock.Now().Add(time.Hour), Now: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	var b errBody
	if res := call(t, requester, "read_feed", map[string]any{"feed": "project", "after_ledger_seq": 0}, &b); !res.IsError || b.Error != string(kernel.Gone) {
		t.Errorf("read_feed below the horizon = isError %v %+v, want a GoneError", res.IsError, b)
	}
	b = errBody{}
	if res := call(t, requester, "get_turn", map[string]any{"turn_id": d.TurnID}, &b); !res.IsError || b.Error != string(kernel.NotFound) || !strings.Contains(b.Message, "retired") {
		t.Errorf("get_turn of a retired Turn = isError %v %+v, want a NotFoundError saying it was retired", res.IsError, b)
	}
}
