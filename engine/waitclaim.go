package engine

import (
	"context"
	"time"
)

// AgentWatch tells of changes to an agent's Turns; projection.Store is one.
type AgentWatch interface {
	// WatchAgent answers a channel closed at the next change of the
	// agent's Turns, and a func that ends the watch.
	WatchAgent(project, agent string) (changed <-chan struct{}, stop func())
	// Closed reports that the watch will never tell of a change again.
	Closed() bool
}

// WaitClaim is the waiting claim every face serves. It claims at once, and
// when nothing is claimable waits up to wait for a change of the agent's
// Turns through any instance (one queued for it, one of its claims ended,
// the agent resumed) or for a Turn of its queue to become due (its
// not_before, which no event marks), then tries again. It answers a nil
// result when the wait ends, ctx ends, stopping closes or the watch closes.
// waiting, when not nil, is called once, when the first attempt found
// nothing.
func (e *Engine) WaitClaim(ctx context.Context, watch AgentWatch, project, agent string, wait time.Duration,
	stopping <-chan struct{}, waiting func(), claim func() (*ClaimResult, uint64, error)) (*ClaimResult, uint64, error) {
	if wait <= 0 {
		return claim()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	dueTimer := time.NewTimer(time.Hour)
	dueTimer.Stop()
	defer dueTimer.Stop()
	for first := true; ; first = false {
		changed, stop := watch.WatchAgent(project, agent)
		// The next due time is asked as of before the attempt: a Turn
		// that became due while the attempt ran is then still a reason
		// to try again, not lost between the two readings of the clock.
		asOf := e.cfg.Now()
		res, seq, err := claim()
		if err != nil || res != nil {
			stop()
			return res, seq, err
		}
		if first && waiting != nil {
			waiting()
		}
		var due <-chan time.Time
		if at, ok, err := e.nextDue(ctx, project, agent, asOf); err == nil && ok {
			dueTimer.Reset(max(at.Sub(e.cfg.Now()), time.Millisecond))
			due = dueTimer.C
		}
		over := false
		select {
		case <-changed:
			over = watch.Closed()
		case <-due:
		case <-timer.C:
			over = true
		case <-ctx.Done():
			over = true // the client went away: nobody reads the answer
		case <-stopping:
			over = true
		}
		stop()
		if over {
			return nil, seq, nil
		}
	}
}
