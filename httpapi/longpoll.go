package httpapi

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/inflight"
	"github.com/turnledger/turnledger/kernel"
)

// MaxClaimWait is the longest wait a long-poll claim may ask for.
const MaxClaimWait = 60 * time.Second

// push is the state shared by the requests that wait for the ledger to move:
// long-poll claims and event streams. They wait on the projection's watches
// (a notification raised when a batch commits), never on a polling loop.
type push struct {
	stopping chan struct{} // closed by StopWaiting
	stopOnce sync.Once

	longPolls   atomic.Int64 // claims waiting now
	subscribers atomic.Int64 // event streams open now
}

func newPush() *push { return &push{stopping: make(chan struct{})} }

// StopWaiting ends every waiting long-poll claim (they answer null) and
// every event stream, and makes later ones end at once: call it when the
// server shuts down (http.Server.RegisterOnShutdown), since Shutdown waits
// for active requests and does not cancel them.
func (s *Server) StopWaiting() {
	s.push.stopOnce.Do(func() { close(s.push.stopping) })
}

// Waiting reports how many long-poll claims are waiting and how many event
// streams are open now (for metrics).
func (s *Server) Waiting() (longPolls, subscribers int64) {
	return s.push.longPolls.Load(), s.push.subscribers.Load()
}

// claimWait reads the claim route's only query parameter, wait: a Go
// duration from 0 (answer at once, the default) to MaxClaimWait.
func (s *Server) claimWait(c *call) (time.Duration, error) {
	q, err := s.query(c, "wait")
	if err != nil {
		return 0, err
	}
	v, ok := q.vals["wait"]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > MaxClaimWait {
		return 0, kernel.Errorf(kernel.Validation, "wait must be a duration from 0s to %s such as 30s, not %q", MaxClaimWait, v)
	}
	return d, nil
}

// claimResultFn claims the next Turn once.
type claimResultFn func() (*engine.ClaimResult, uint64, error)

// claimWaiting is engine.WaitClaim for a request: it lifts the server's
// read and write deadlines for the wait and counts the request as a long
// poll while it waits.
func (s *Server) claimWaiting(w http.ResponseWriter, c *call, agent string, wait time.Duration, claim claimResultFn) (*engine.ClaimResult, uint64, error) {
	if wait <= 0 {
		return claim()
	}
	// The server's ReadTimeout counts from the start of the request; without
	// this a wait near it would be cut by the connection's read deadline.
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, 0, err
	}
	// Likewise the server's WriteTimeout: the answer comes after the wait.
	if err := rc.SetWriteDeadline(time.Now().Add(wait + s.cfg.WaitTimeout + 10*time.Second)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, 0, err
	}
	counted := false // counted as waiting once the first attempt found nothing
	defer func() {
		if counted {
			s.push.longPolls.Add(-1)
		}
	}()
	return s.engine.WaitClaim(c.ctx, s.store, c.project, agent, wait, s.push.stopping, func() {
		counted = true
		s.push.longPolls.Add(1)
		inflight.Detach(c.ctx)
	}, claim)
}
