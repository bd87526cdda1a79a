package projection

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/turnledger/turnledger/kernel"
)

// randomScenario appends n random but plausible events to l: agents register,
// drain and resume, send heartbeats, get credentials; Turns are dispatched
// (roots and children), claimed, recorded, suspended, resumed, stopped,
// expired and finished, following the Turn state table.
func randomScenario(l *events, rng *rand.Rand, n int) {
	kinds := []string{"code", "review", "test"}
	var agents []string
	for i := range 5 {
		id := fmt.Sprintf("a%d", i)
		agents = append(agents, id)
		var caps []string
		for _, k := range kinds {
			if rng.IntN(2) == 0 {
				caps = append(caps, k)
			}
		}
		l.register(id, []string{"coder", "lead"}[rng.IntN(2)], 1+rng.IntN(3), caps...)
	}
	type turn struct {
		id, target, claim, state string
		seq                      uint64
		stop                     bool
		depth                    int
		root                     string
	}
	var turns []*turn
	pick := func(state string) *turn {
		var c []*turn
		for _, t := range turns {
			if t.state == state {
				c = append(c, t)
			}
		}
		if len(c) == 0 {
			return nil
		}
		return c[rng.IntN(len(c))]
	}
	nTurn, nClaim, nCred := 0, 0, 0
	var creds []string
	credAgent := map[string]string{}
	for range n {
		switch rng.IntN(12) {
		case 0, 1:
			nTurn++
			id := fmt.Sprintf("t%06d", nTurn) // in dispatch order, as Turn ids sort (kernel newTurnID)
			target, requester := agents[rng.IntN(len(agents))], agents[rng.IntN(len(agents))]
			kind := kinds[rng.IntN(len(kinds))]
			t := &turn{id: id, target: target, state: StateQueued, root: id}
			if parent := pick(StateClaimed); parent != nil && rng.IntN(2) == 0 {
				t.depth, t.root = parent.depth+1, parent.root
				l.child(id, parent.id, parent.root, t.depth, target, parent.target, kind)
			} else {
				l.dispatch(id, target, requester, kind)
			}
			turns = append(turns, t)
		case 2:
			if t := pick(StateQueued); t != nil {
				nClaim++
				t.claim, t.state = fmt.Sprintf("c%d", nClaim), StateClaimed
				l.claim(t.id, t.target, t.claim)
			}
		case 3, 4:
			if t := pick(StateClaimed); t != nil {
				t.seq++
				l.record(t.id, t.target, t.claim, t.seq, "note", fmt.Sprintf(`{"i":%d}`, t.seq))
			}
		case 5:
			if t := pick(StateClaimed); t != nil {
				final := ""
				var seq uint64
				if rng.IntN(2) == 0 {
					t.seq++
					final, seq = `{"done":true}`, t.seq
				}
				t.state = StateFinished
				l.finish(t.id, t.target, t.claim, []string{"succeeded", "failed"}[rng.IntN(2)], final, seq)
			}
		case 6:
			if t := pick(StateClaimed); t != nil {
				t.state = StateSuspended
				l.turnEvent(kernel.EvTurnSuspended, t.id, agent(t.target), &kernel.TurnSuspended{ClaimID: t.claim})
			} else if t := pick(StateSuspended); t != nil {
				t.state = StateQueued
				l.turnEvent(kernel.EvTurnResumed, t.id, admin(), &kernel.TurnResumed{RequestedBy: ref(t.target)})
			}
		case 7:
			if t := pick(StateClaimed); t != nil && !t.stop {
				t.stop = true
				l.turnEvent(kernel.EvTurnStopRequested, t.id, admin(), &kernel.TurnStopRequested{RequestedBy: ref(t.target)})
			} else if t := pick(StateQueued); t != nil {
				t.state = StateFinished
				l.turnEvent(kernel.EvTurnStopped, t.id, admin(), &kernel.TurnStopped{RequestedBy: ref(t.target)})
			}
		case 8:
			if t := pick(StateClaimed); t != nil {
				t.state = StateQueued
				if t.stop {
					t.state = StateFinished
				}
				l.turnEvent(kernel.EvTurnClaimExpired, t.id, admin(), &kernel.TurnClaimExpired{ClaimID: t.claim, Stopped: t.stop})
			}
		case 9:
			a := agents[rng.IntN(len(agents))]
			typ := []string{kernel.EvAgentHeartbeat, kernel.EvAgentDrained, kernel.EvAgentResumed}[rng.IntN(3)]
			var data any = &kernel.AgentHeartbeat{}
			if typ != kernel.EvAgentHeartbeat {
				data = &kernel.AgentDrained{RequestedBy: ref(a)}
				if typ == kernel.EvAgentResumed {
					data = &kernel.AgentResumed{RequestedBy: ref(a)}
				}
			}
			l.add(typ, proj, kernel.AggAgent, a, agent(a), data)
		case 10:
			nCred++
			id := fmt.Sprintf("cred%d", nCred)
			creds = append(creds, id)
			credAgent[id] = agents[nCred%len(agents)]
			l.issue(credAgent[id], id, time.Duration(rng.IntN(3600))*time.Second)
		case 11:
			if len(creds) > 0 {
				i := rng.IntN(len(creds))
				id := creds[i]
				creds = slices.Delete(creds, i, i+1)
				l.add(kernel.EvCredentialRevoked, proj, kernel.AggCredential, id, admin(), &kernel.CredentialRevoked{CredentialID: id, AgentID: credAgent[id]})
			}
		}
	}
}

// memLedger is an in-memory ledger for the Projector and Rebuild tests: the
// real one (package ledger) may not be imported here.
type memLedger struct {
	mu       sync.Mutex
	recs     []kernel.Recorded
	more     chan struct{} // closed on append
	batch    int
	failNext error // returned once, by a Follow on its next turn
}

func newMemLedger(batch int) *memLedger {
	return &memLedger{more: make(chan struct{}), batch: batch}
}

func (m *memLedger) append(recs ...kernel.Recorded) {
	m.mu.Lock()
	m.recs = append(m.recs, recs...)
	close(m.more)
	m.more = make(chan struct{})
	m.mu.Unlock()
}

func (m *memLedger) failOnce(err error) {
	m.mu.Lock()
	m.failNext = err
	m.mu.Unlock()
}

// after returns up to max events after seq and the channel of the next append.
func (m *memLedger) after(seq uint64, upTo uint64) ([]kernel.Recorded, chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, _ := slices.BinarySearchFunc(m.recs, seq+1, func(r kernel.Recorded, s uint64) int {
		switch {
		case r.Seq < s:
			return -1
		case r.Seq > s:
			return 1
		}
		return 0
	})
	var out []kernel.Recorded
	for ; i < len(m.recs) && len(out) < m.batch && m.recs[i].Seq <= upTo; i++ {
		out = append(out, m.recs[i])
	}
	return out, m.more
}

func (m *memLedger) Follow(ctx context.Context, after uint64, fn func([]kernel.Recorded) error) error {
	owed := false // as the ledger does: an empty batch once caught up
	for {
		m.mu.Lock()
		err := m.failNext
		m.failNext = nil
		m.mu.Unlock()
		if err != nil {
			return err
		}
		batch, more := m.after(after, ^uint64(0))
		if len(batch) == 0 {
			if owed {
				if err := fn(nil); err != nil {
					return err
				}
				owed = false
			}
			select {
			case <-more:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := fn(batch); err != nil {
			return err
		}
		after, owed = batch[len(batch)-1].Seq, true
	}
}

func (m *memLedger) ReadAll(ctx context.Context, after uint64, fn func([]kernel.Recorded, uint64) error) (uint64, error) {
	m.mu.Lock()
	var head uint64
	if len(m.recs) > 0 {
		head = m.recs[len(m.recs)-1].Seq
	}
	m.mu.Unlock()
	for after < head {
		batch, _ := m.after(after, head)
		if len(batch) == 0 {
			break
		}
		if err := fn(batch, head); err != nil {
			return head, err
		}
		after = batch[len(batch)-1].Seq
	}
	return head, nil
}
