package kernel

import (
	"container/heap"
	"sort"
	"time"
)

// claimIndex holds the live claims of a project by expiry: a min-heap of
// the claimed Turns keyed by their claim's ExpiresAt, with each Turn's place
// in it. Evolve keeps it (one entry per Turn with a claim), so the reaper
// finds the expired claims by touching only them and the heap entries just
// below them, not every Turn of the project.
type claimIndex struct {
	heap  claimHeap
	where map[string]*claimEntry // turn id → its entry
}

type claimEntry struct {
	expires time.Time
	turn    *Turn
	i       int // place in the heap
}

type claimHeap []*claimEntry

func (h claimHeap) Len() int           { return len(h) }
func (h claimHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h claimHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *claimHeap) Push(x any) {
	e := x.(*claimEntry)
	e.i = len(*h)
	*h = append(*h, e)
}
func (h *claimHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// track puts t in the index by its claim's expiry, or takes it out when it
// holds no claim.
func (x *claimIndex) track(t *Turn) {
	if x.where == nil {
		x.where = map[string]*claimEntry{}
	}
	e := x.where[t.ID]
	switch {
	case t.Claim == nil && e != nil:
		heap.Remove(&x.heap, e.i)
		delete(x.where, t.ID)
	case t.Claim != nil && e == nil:
		e = &claimEntry{expires: t.Claim.ExpiresAt, turn: t}
		heap.Push(&x.heap, e)
		x.where[t.ID] = e
	case t.Claim != nil && !e.expires.Equal(t.Claim.ExpiresAt):
		e.expires, e.turn = t.Claim.ExpiresAt, t
		heap.Fix(&x.heap, e.i)
	}
}

// expired returns the Turns whose claim has expired at now, and how many
// heap entries it looked at: the expired ones and at most two children of
// each (a heap's subtree below an unexpired entry holds none).
func (x *claimIndex) expired(now time.Time) (out []*Turn, visited int) {
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(x.heap) {
			continue
		}
		visited++
		e := x.heap[i]
		if now.Before(e.expires) {
			continue
		}
		out = append(out, e.turn)
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return out, visited
}

// ExpiredClaims returns the ids of the Turns whose claim has expired at now,
// oldest dispatch first: what claims:reconcile-expired releases. It reads
// the project's claim index, so it costs the expired claims, not the Turns.
func ExpiredClaims(p *Project, now time.Time) []string {
	expired, _ := p.claims.expired(now)
	sort.Slice(expired, func(i, j int) bool { return expired[i].Order < expired[j].Order })
	ids := make([]string, len(expired))
	for i, t := range expired {
		ids[i] = t.ID
	}
	return ids
}

// ClaimCounts returns how many claims of the project are live at now and
// how many have expired without being released yet.
func (p *Project) ClaimCounts(now time.Time) (live, expired int) {
	exp, _ := p.claims.expired(now)
	return len(p.claims.heap) - len(exp), len(exp)
}
