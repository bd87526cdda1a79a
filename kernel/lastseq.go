package kernel

import (
	"context"
	"sync"
)

// lastSeqProbe asks the ledger for a project's last ledger_seq on behalf of
// every request that needs it, outside the project's lock, and shares one
// answer among the requests that wait at the same time.
//
// What a request needs is a last ledger_seq read after it arrived: every
// event acknowledged before the request (a revocation through any instance,
// say) is then at or below it. A look-up already in flight may have started
// before a request arrived, so the request does not take its answer: it
// joins the next look-up, which starts once the one in flight ends and is
// shared by everyone who arrived meanwhile. Under load that is at most one
// look-up in flight and one queued per project, whatever the number of
// requests, and none of them holds the project's lock.
type lastSeqProbe struct {
	mu   sync.Mutex
	cur  *probeCall // the look-up in flight, nil when none
	next *probeCall // the one that starts when cur ends, nil when nobody waits for it
}

type probeCall struct {
	done chan struct{}
	seq  uint64
	err  error
}

// get returns the project's last ledger_seq as read by a look-up that
// started after get was called.
func (q *lastSeqProbe) get(ctx context.Context, fetch func(context.Context) (uint64, error)) (uint64, error) {
	q.mu.Lock()
	if q.cur == nil {
		c := &probeCall{done: make(chan struct{})}
		q.cur = c
		q.mu.Unlock()
		q.run(ctx, c, fetch)
		return c.seq, c.err
	}
	c := q.next
	if c == nil {
		c = &probeCall{done: make(chan struct{})}
		q.next = c
		prev := q.cur
		go func() {
			<-prev.done
			q.run(ctx, c, fetch)
		}()
	}
	q.mu.Unlock()
	select {
	case <-c.done:
		return c.seq, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run does look-up c and hands the probe over to the queued one, if any. The
// look-up is shared, so it does not end with the context of the request
// that happens to run it (the ledger bounds its own retries).
func (q *lastSeqProbe) run(ctx context.Context, c *probeCall, fetch func(context.Context) (uint64, error)) {
	c.seq, c.err = fetch(context.WithoutCancel(ctx))
	q.mu.Lock()
	q.cur, q.next = q.next, nil
	q.mu.Unlock()
	close(c.done)
}
