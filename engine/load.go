package engine

import (
	"github.com/turnledger/turnledger/kernel"

	"context"
	"time"
)

// Loading a project's write model.
//
// A project's write model is loaded on first use, not before serve listens:
// the first request that names the project starts the load in the
// background and waits for it at most Config.LoadWait; so does every request
// that arrives while it runs. A request whose wait runs out is answered
// Unavailable (503 with Retry-After) and changes nothing, so a client retries
// it; the load goes on meanwhile and the retry finds the project ready. A
// small project loads within the wait and its first request never sees the
// 503. A failed load is reported to the requests waiting for it, and the next
// request starts another.

// awaitLoad returns once s is loaded, starting its load when none runs. It
// waits at most wait (0: without bound) and then returns Unavailable.
func (e *Engine) awaitLoad(ctx context.Context, s *slot, wait time.Duration) error {
	if s.loaded.Load() {
		return nil
	}
	e.mu.Lock()
	if s.loaded.Load() {
		e.mu.Unlock()
		return nil
	}
	done := s.loading
	if done == nil {
		done = make(chan struct{})
		s.loading = done
		go e.load(s, done)
	}
	e.mu.Unlock()
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-done:
	case <-timeout:
		return kernel.Errorf(kernel.Unavailable, "project %s is still loading its write model; retry after the time in Retry-After", s.id)
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.loaded.Load() {
		return nil
	}
	e.mu.Lock()
	err := s.loadErr
	e.mu.Unlock()
	return err
}

// load folds the project's write model (from its snapshot when there is one)
// and marks s loaded; it closes done when it ends, whatever the outcome. It
// runs on its own, not under a request's context: a request that gives up
// does not waste the work for the next one.
func (e *Engine) load(s *slot, done chan struct{}) {
	s.mu.Lock()
	err := e.fold(s)
	if err == nil {
		s.loaded.Store(true)
		s.auth.publish(s.p)
	}
	s.mu.Unlock()
	e.mu.Lock()
	s.loading, s.loadErr = nil, err
	e.mu.Unlock()
	close(done)
}

// Loading returns how many projects are loading their write model now.
func (e *Engine) Loading() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, s := range e.projects {
		if s.loading != nil {
			n++
		}
	}
	return n
}

// fold loads s's write model: from its snapshot when there is a usable one,
// then the events after it. A load that folded at least snapEvery events
// saves a new snapshot (a failed save only costs the next load time).
func (e *Engine) fold(s *slot) error {
	ctx := context.Background()
	if e.snaps != nil && s.p.Seq == 0 {
		p, snapSeq, err := e.fromSnapshot(ctx, s.id)
		if err != nil {
			return err
		}
		if p != nil {
			s.p, s.snapSeq = p, snapSeq
		}
	}
	if err := e.catchUp(ctx, s.p); err != nil {
		return err
	}
	if e.snaps != nil && s.p.Seq >= s.snapSeq+e.snapEvery {
		_ = e.saveSnapshot(s)
	}
	return nil
}
