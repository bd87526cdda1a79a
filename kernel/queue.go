package kernel

import (
	"container/heap"
	"time"
)

// The queues and timers of a project's write model.
//
// An agent's queued Turns wait in one heap per priority, ordered by their
// due time (when they became claimable: their dispatch, or their not_before
// when later) and then by their dispatch's ledger_seq. A claim takes the
// first claimable Turn of the best priority: the root of a heap, unless it is
// not due yet (then nothing of that priority is) or past its claim_by or
// deadline (then the search goes on below it; such a Turn waits only until
// the reaper finishes it). A released or resumed Turn goes back to its old
// place. Every operation costs O(log n) in the Turns of its heap.
//
// A project's timers are one heap of the Turns that have a next due time:
// the expiry of a live claim, a queued Turn's claim_by while it was never
// claimed, a deadline while the Turn is not finished, the input_by of a Turn
// suspended for input. The reaper finds what
// is due by touching only the due entries and the ones right below them,
// whatever the number of Turns.

// queueEntry is one queued Turn in its agent's heap of its priority.
type queueEntry struct {
	due   time.Time
	order uint64
	turn  *Turn
	prio  int
	i     int // place in its heap
}

func (a *queueEntry) less(b *queueEntry) bool {
	if !a.due.Equal(b.due) {
		return a.due.Before(b.due)
	}
	return a.order < b.order
}

type queueHeap = indexedHeap[*queueEntry]

func (a *queueEntry) setIndex(i int) { a.i = i }

// indexedHeap is a min-heap (container/heap) of entries that know their
// place in it, so that one can be fixed or removed where it stands: an
// agent's queue of one priority, or the project's timers.
type indexedHeap[E interface {
	less(E) bool
	setIndex(int)
}] []E

func (h indexedHeap[E]) Len() int           { return len(h) }
func (h indexedHeap[E]) Less(i, j int) bool { return h[i].less(h[j]) }
func (h indexedHeap[E]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].setIndex(i)
	h[j].setIndex(j)
}
func (h *indexedHeap[E]) Push(x any) {
	e := x.(E)
	e.setIndex(len(*h))
	*h = append(*h, e)
}
func (h *indexedHeap[E]) Pop() any {
	old := *h
	e := old[len(old)-1]
	var zero E
	old[len(old)-1] = zero
	*h = old[:len(old)-1]
	return e
}

// agentQueue is one agent's queued Turns, by priority.
type agentQueue struct {
	heaps [MaxPriority]queueHeap
	n     int
}

// dueAt is when t became or becomes claimable.
func dueAt(t *Turn) time.Time {
	if t.NotBefore != nil && t.NotBefore.After(t.CreatedAt) {
		return *t.NotBefore
	}
	return t.CreatedAt
}

// claimable reports whether a queued Turn may be claimed at now.
func claimable(t *Turn, now time.Time) bool {
	s := &t.Dispatch.Schedule
	if s.Deadline != nil && !now.Before(*s.Deadline) {
		return false
	}
	return !(t.Attempts == 0 && s.ClaimBy != nil && !now.Before(*s.ClaimBy))
}

func (p *Project) enqueue(t *Turn) {
	if _, ok := p.queued[t.ID]; ok {
		return
	}
	agent := t.Dispatch.TargetAgent.AgentID
	q := p.queues[agent]
	if q == nil {
		q = &agentQueue{}
		p.queues[agent] = q
	}
	e := &queueEntry{due: dueAt(t), order: t.Order, turn: t, prio: t.Dispatch.EffectivePriority()}
	heap.Push(&q.heaps[e.prio-1], e)
	q.n++
	p.queued[t.ID] = e
}

func (p *Project) dequeue(t *Turn) {
	e, ok := p.queued[t.ID]
	if !ok {
		return
	}
	q := p.queues[t.Dispatch.TargetAgent.AgentID]
	heap.Remove(&q.heaps[e.prio-1], e.i)
	q.n--
	delete(p.queued, t.ID)
}

// NextQueued returns the Turn the agent's next claim takes at now: the
// first claimable Turn of the best priority, earliest due first and then in
// order of dispatch; nil when none is claimable.
func (p *Project) NextQueued(agentID string, now time.Time) *Turn {
	q := p.queues[agentID]
	if q == nil {
		return nil
	}
	for i := range q.heaps {
		if e := firstClaimable(q.heaps[i], now); e != nil {
			return e.turn
		}
	}
	return nil
}

// firstClaimable is the least claimable entry of h at now. A subtree whose
// root is not due holds nothing due (a heap's children are not less than
// their parent), and nor does one whose root is past the best found.
func firstClaimable(h queueHeap, now time.Time) *queueEntry {
	var best *queueEntry
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h) {
			continue
		}
		e := h[i]
		if e.due.After(now) || best != nil && best.less(e) {
			continue
		}
		if claimable(e.turn, now) {
			best = e
			continue // its children are not less than it
		}
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return best
}

// NextDue returns the earliest time after now at which a queued Turn of the
// agent becomes due (its not_before), or false when none waits for one: how
// long a waiting claim may sleep before it has something to claim.
func (p *Project) NextDue(agentID string, now time.Time) (time.Time, bool) {
	q := p.queues[agentID]
	if q == nil {
		return time.Time{}, false
	}
	var next time.Time
	for _, h := range q.heaps {
		stack := []int{0}
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if i >= len(h) {
				continue
			}
			e := h[i]
			if e.due.After(now) {
				if next.IsZero() || e.due.Before(next) {
					next = e.due
				}
				continue
			}
			stack = append(stack, 2*i+1, 2*i+2)
		}
	}
	return next, !next.IsZero()
}

// Queued returns how many Turns wait in the agent's queue, due or not.
func (p *Project) Queued(agentID string) int {
	if q := p.queues[agentID]; q != nil {
		return q.n
	}
	return 0
}

// timerEntry is one Turn in the project's timers, at its next due time.
type timerEntry struct {
	due     time.Time
	turn    *Turn
	claimed bool // the Turn held a claim when last tracked
	i       int
}

type timerHeap = indexedHeap[*timerEntry]

func (a *timerEntry) less(b *timerEntry) bool { return a.due.Before(b.due) }
func (a *timerEntry) setIndex(i int)          { a.i = i }

// timers holds the Turns that have a next due time, and how many hold a
// claim (every claimed Turn is in it: its claim expires).
type timers struct {
	heap   timerHeap
	where  map[string]*timerEntry
	claims int
}

// nextDue is the next time something happens to t by itself: its claim
// expires, its claim_by passes while it was never claimed, its deadline
// passes. False when nothing will.
func nextDue(t *Turn) (time.Time, bool) {
	if t.State == StateFinished {
		return time.Time{}, false
	}
	var due time.Time
	at := func(x *time.Time) {
		if x != nil && (due.IsZero() || x.Before(due)) {
			due = *x
		}
	}
	s := &t.Dispatch.Schedule
	at(s.Deadline)
	if t.Claim != nil {
		at(&t.Claim.ExpiresAt)
	}
	if t.State == StateQueued && t.Attempts == 0 {
		at(s.ClaimBy)
	}
	if w := t.AwaitingInput; w != nil && t.State == StateSuspended {
		at(w.InputBy)
	}
	return due, !due.IsZero()
}

// track puts t in the timers at its next due time, or takes it out when it
// has none.
func (x *timers) track(t *Turn) {
	if x.where == nil {
		x.where = map[string]*timerEntry{}
	}
	due, ok := nextDue(t)
	e := x.where[t.ID]
	if e != nil && e.claimed {
		x.claims--
	}
	switch {
	case !ok && e != nil:
		heap.Remove(&x.heap, e.i)
		delete(x.where, t.ID)
		return
	case !ok:
		return
	case e == nil:
		e = &timerEntry{due: due, turn: t}
		heap.Push(&x.heap, e)
		x.where[t.ID] = e
	default:
		e.turn = t
		if !e.due.Equal(due) {
			e.due = due
			heap.Fix(&x.heap, e.i)
		}
	}
	if e.claimed = t.Claim != nil; e.claimed {
		x.claims++
	}
}

// due returns the Turns whose next due time has come at now, and how many
// heap entries it looked at: the due ones and at most two children of each
// (a heap's subtree below an entry not due holds none).
func (x *timers) due(now time.Time) (out []*Turn, visited int) {
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(x.heap) {
			continue
		}
		visited++
		e := x.heap[i]
		if now.Before(e.due) {
			continue
		}
		out = append(out, e.turn)
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return out, visited
}
