package serve

import (
	"context"
	"sync"
)

// headProbe reads the ledger's head for the diagnostics of every page a
// read answers (Service.diagnostics), and shares one read among the pages
// that wait for it at the same time. Where the ledger is its stream's only
// writer (serve's embedded server) it knows its head (ledger.Store.KnownHead)
// and pages take that instead: a read of the stream's state per page was
// most of what a page cost.
//
// What a page needs is a head read after the request asked for it, so that
// a lag it reports (or does not) is the lag at some moment of the request,
// as when every page reads the head itself. A read already in flight when a
// request asks may have been answered before; the request waits instead for
// the next read, which starts when the one in flight ends and answers every
// request that asked in between. A request that finds no read in flight
// reads the head itself, on its own goroutine: a lone reader pays nothing
// for the sharing. So under many readers one instance asks its NATS server
// for the head at most about once per round trip, instead of once per page.
type headProbe struct {
	fetch func(context.Context) (uint64, error)

	mu      sync.Mutex
	probing bool      // a read is in flight
	next    *headCall // the requests that asked since it started; nil when none
}

// headCall is one read of the head and its answer.
type headCall struct {
	done  chan struct{}
	asked int // requests waiting for it (besides the one that runs it)
	head  uint64
	err   error
}

// get returns the head as read by a read that started after get was called.
func (q *headProbe) get(ctx context.Context) (uint64, error) {
	q.mu.Lock()
	if !q.probing {
		q.probing = true
		q.mu.Unlock()
		c := &headCall{done: make(chan struct{})}
		q.run(ctx, c)
		return c.head, c.err
	}
	c := q.next
	if c == nil {
		c = &headCall{done: make(chan struct{})}
		q.next = c
	}
	c.asked++
	q.mu.Unlock()
	select {
	case <-c.done:
		return c.head, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run reads the head for c, then starts the read of the requests that
// asked meanwhile, if any, on a goroutine of its own (they wait for it; the
// request that ran c has its answer).
func (q *headProbe) run(ctx context.Context, c *headCall) {
	c.head, c.err = q.fetch(ctx)
	close(c.done)
	q.mu.Lock()
	next := q.next
	q.next = nil
	q.probing = next != nil
	q.mu.Unlock()
	if next != nil {
		// Its requests may leave (their contexts) before it ends; the
		// read is bounded on its own.
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
			defer cancel()
			q.run(ctx, next)
		}()
	}
}
