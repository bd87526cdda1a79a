package kernel

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// FuzzInvariants runs random command sequences and checks, after each step,
// the invariants the kernel promises: a claimed Turn has exactly one live
// claim and no other Turn has one; no agent holds more claims than its
// capacity; turn_seq grows without gaps; a queued Turn is in its agent's
// queue and nothing else is.
func FuzzInvariants(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{0, 0, 0, 1, 1, 2, 2, 3, 9, 9, 4, 4, 8, 1, 2, 5, 6})
	f.Add([]byte{0, 1, 7, 1, 3, 3, 10, 11, 1, 2, 6, 0, 1})
	f.Add([]byte{12, 13, 2, 3, 14, 10, 15, 2, 14, 10, 10, 15, 12, 2, 6, 16, 17})
	f.Fuzz(func(t *testing.T, script []byte) {
		h := newHarness(t)
		// The script moves the clock by up to 40s a step, past any
		// hour: the agents' credentials must outlast every script.
		h.credTTL = 100 * 365 * 24 * time.Hour
		req := h.agent("req", 1, GrantDispatch, GrantManage)
		agents := []string{"w1", "w2"}
		callers := map[string]Common{"w1": h.agent("w1", 2), "w2": h.agent("w2", 1)}
		var tokens []*ClaimToken
		lastSeq := map[string]uint64{}
		n := 0
		for i, op := range script {
			w := agents[i%2]
			c := callers[w]
			var tok *ClaimToken
			if len(tokens) > 0 {
				tok = tokens[int(op)%len(tokens)]
			}
			var cmd Command
			switch op % 18 {
			case 0, 1:
				n++
				cmd = rootDispatch(req, fmt.Sprintf("t%d", n), "req", w, fmt.Sprintf("k%d", n))
			case 12, 13:
				// A scheduled dispatch: priority, a due time, an expiry, a
				// deadline and attempts, drawn from op.
				n++
				d := rootDispatch(req, fmt.Sprintf("t%d", n), "req", w, fmt.Sprintf("k%d", n))
				d.Schedule = Schedule{Priority: ptr(1 + int(op)%5), MaxAttempts: ptr(1 + int(op)%3)}
				if op%3 == 0 {
					d.Schedule.NotBefore = ptr(h.now.Add(30 * time.Second))
				}
				if op%4 == 0 {
					d.Schedule.ClaimBy = ptr(h.now.Add(60 * time.Second))
				}
				if op%5 == 0 {
					d.Schedule.Deadline = ptr(h.now.Add(100 * time.Second))
				}
				cmd = d
			case 14:
				if tok != nil {
					cmd = Finish{Common: callers[tok.AgentID], TurnID: tok.TurnID, Claim: *tok, TokenHash: HashSecret(tok.Token), Outcome: "failed", Retry: true,
						FinalPayload: json.RawMessage(`{}`), FinalRecordRole: "error"}
				}
			case 15:
				for _, id := range DueTurns(h.p, h.now) {
					h.do(ExpireDue{Common: admin, TurnID: id})
				}
			case 16:
				cmd = Retry{Common: req, TurnID: fmt.Sprintf("t%d", int(op)%(n+1)), NewTurnID: fmt.Sprintf("r%d", i), RequestedBy: ref("req"),
					Original: &TurnDispatched{TargetAgent: ref(w), RequestedBy: ref("req"), Input: json.RawMessage(`{}`), TurnKind: "k",
						Authority: Authority{Mode: AuthorityRoot, RequestID: "r"}}, OriginalAt: h.now}
			case 17:
				h.now = h.now.Add(15 * time.Second)
			case 2, 3:
				if got := h.claim(c, w, fmt.Sprintf("c%d", i)); got != nil {
					tokens = append(tokens, got)
				}
			case 4, 5:
				if tok != nil {
					cmd = AppendRecord{Common: callers[tok.AgentID], TurnID: tok.TurnID, Claim: *tok, TokenHash: HashSecret(tok.Token), Role: "note", Payload: json.RawMessage(`{}`)}
				}
			case 6:
				if tok != nil {
					cmd = Finish{Common: callers[tok.AgentID], TurnID: tok.TurnID, Claim: *tok, TokenHash: HashSecret(tok.Token), Outcome: "succeeded", FinalPayload: json.RawMessage(`{}`), FinalRecordRole: "final"}
				}
			case 7:
				if tok != nil {
					cmd = Suspend{Common: callers[tok.AgentID], TurnID: tok.TurnID, Claim: *tok, TokenHash: HashSecret(tok.Token)}
				}
			case 8:
				cmd = Resume{Common: req, TurnID: fmt.Sprintf("t%d", int(op)%(n+1)), RequestedBy: ref("req")}
			case 9:
				cmd = Stop{Common: req, TurnID: fmt.Sprintf("t%d", int(op)%(n+1)), RequestedBy: ref("req")}
			case 10:
				h.now = h.now.Add(40 * time.Second)
			case 11:
				for _, id := range ExpiredClaims(h.p, h.now) {
					h.do(ExpireClaim{Common: admin, TurnID: id})
				}
			}
			if cmd != nil {
				events, err := h.try(cmd)
				if err != nil && ErrorKind(err) == Internal {
					t.Fatalf("step %d: %T = internal error %v", i, cmd, err)
				}
				for _, ev := range events {
					if d, ok := ev.Data.(*TurnRecordAppended); ok {
						if d.TurnSeq != lastSeq[ev.ID]+1 {
							t.Fatalf("step %d: turn %s record turn_seq %d after %d", i, ev.ID, d.TurnSeq, lastSeq[ev.ID])
						}
						lastSeq[ev.ID] = d.TurnSeq
					}
					if d, ok := ev.Data.(*TurnRetryScheduled); ok && d.TurnSeq != 0 {
						if d.TurnSeq != lastSeq[ev.ID]+1 {
							t.Fatalf("step %d: failure record turn_seq %d after %d", i, d.TurnSeq, lastSeq[ev.ID])
						}
						lastSeq[ev.ID] = d.TurnSeq
					}
					if d, ok := ev.Data.(*TurnFinished); ok && d.TurnSeq != 0 {
						if d.TurnSeq != lastSeq[ev.ID]+1 {
							t.Fatalf("step %d: final record turn_seq %d after %d", i, d.TurnSeq, lastSeq[ev.ID])
						}
						lastSeq[ev.ID] = d.TurnSeq
					}
				}
			}
			checkInvariants(t, h.p)
			checkSchedule(t, h.p)
		}
	})
}

// checkSchedule checks the scheduling invariants: no claimed Turn was
// claimed before it was due, after its deadline, or never-claimed after its
// claim_by; the timers hold exactly the Turns with a next due time.
func checkSchedule(t *testing.T, p *Project) {
	t.Helper()
	for id, turn := range p.Turns {
		s := turn.Dispatch.Schedule
		if c := turn.Claim; c != nil {
			if turn.NotBefore != nil && c.ClaimedAt.Before(*turn.NotBefore) {
				t.Fatalf("turn %s claimed at %s before its not_before %s", id, c.ClaimedAt, turn.NotBefore)
			}
			if s.Deadline != nil && !c.ClaimedAt.Before(*s.Deadline) {
				t.Fatalf("turn %s claimed at %s, past its deadline %s", id, c.ClaimedAt, s.Deadline)
			}
			if s.ClaimBy != nil && turn.Attempts == 1 && !c.ClaimedAt.Before(*s.ClaimBy) {
				t.Fatalf("turn %s first claimed at %s, past its claim_by %s", id, c.ClaimedAt, s.ClaimBy)
			}
		}
		_, due := nextDue(turn)
		if _, tracked := p.timers.where[id]; tracked != due {
			t.Fatalf("turn %s: in the timers %v, has a next due time %v", id, tracked, due)
		}
	}
}

func checkInvariants(t *testing.T, p *Project) {
	t.Helper()
	claims := map[string]int{}
	queued := map[string]bool{}
	for agent, q := range p.queues {
		n := 0
		for prio, h := range q.heaps {
			for i, e := range h {
				if i > 0 && e.less(h[(i-1)/2]) {
					t.Fatalf("queue of %s, priority %d, is not a heap at %d", agent, prio+1, i)
				}
				if e.i != i || p.queued[e.turn.ID] != e {
					t.Fatalf("queue of %s: entry of turn %s misplaced", agent, e.turn.ID)
				}
				queued[e.turn.ID] = true
				n++
			}
		}
		if n != q.n {
			t.Fatalf("queue of %s counts %d, holds %d", agent, q.n, n)
		}
	}
	for id, turn := range p.Turns {
		if (turn.State == StateClaimed) != (turn.Claim != nil) {
			t.Fatalf("turn %s is %s with claim %v", id, turn.State, turn.Claim)
		}
		if turn.Claim != nil {
			claims[turn.Claim.AgentID]++
		}
		if (turn.State == StateQueued) != queued[id] {
			t.Fatalf("turn %s is %s but queued=%v", id, turn.State, queued[id])
		}
	}
	for id, a := range p.Agents {
		if a.ActiveClaims != claims[id] || a.ActiveClaims > a.Spec.Capacity {
			t.Fatalf("agent %s: active claims %d, holds %d, capacity %d", id, a.ActiveClaims, claims[id], a.Spec.Capacity)
		}
	}
}
