package httpapi

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/internal/throttle"
)

// Protection against overload and abuse. The decisions, documented in the
// docs/limits.md:
//
//   - Work in flight is bounded per instance (Config.MaxInFlight requests)
//     and per project (Config.MaxProjectInFlight). A request beyond either
//     bound is answered at once with 503 ServiceUnavailableError and
//     Retry-After: 1, so accepted requests keep their latency, clients back
//     off, and nothing queues without bound. /healthz and /readyz are never
//     shed.
//   - Failed authentication is throttled by token buckets
//     (Config.AuthFailures, or Config.AuthGuard shared with the MCP and A2A
//     endpoints, so that an address has one budget whichever face it tries
//     a token on): one per remote address, one per claimed agent (project
//     and X-Svc-Agent-Id). Each failure takes a token; a request
//     from an address whose bucket is empty is answered 429
//     TooManyRequestsError with Retry-After, unless its credential is one
//     the engine knows as valid (engine.KnownCredential: a hash look-up in
//     the published view, no I/O), so a flood of wrong tokens from an
//     address (a laptop, a NAT, a proxy) never locks out the valid agents
//     there; the flood itself still gets 429s and learns nothing more. An
//     agent whose bucket is empty is refused the same way only from
//     addresses that have failed recently themselves. Successful requests
//     never take a token.
//   - The in-flight counter of a project exists only while a request of it
//     is in flight: requests naming made-up projects leave nothing behind.

// Rate is a token bucket: Burst tokens, refilled at one per Every (the
// throttle of failed authentication, shared with package authn).
type Rate = throttle.Rate

// limiter is a bounded in-flight counter.
type limiter struct {
	n   atomic.Int64
	max int64
}

func (l *limiter) acquire() bool {
	if l.max <= 0 {
		return true
	}
	if l.n.Add(1) > l.max {
		l.n.Add(-1)
		return false
	}
	return true
}

func (l *limiter) release() {
	if l.max > 0 {
		l.n.Add(-1)
	}
}

// shedder bounds the requests in flight per instance and per project.
type shedder struct {
	instance   limiter
	perProject int64
	mu         sync.Mutex
	projects   map[string]*limiter
}

func newShedder(instance, perProject int) *shedder {
	return &shedder{instance: limiter{max: int64(instance)}, perProject: int64(perProject), projects: map[string]*limiter{}}
}

// admitInstance takes a slot of the instance; release gives it back.
func (s *shedder) admitInstance() (release func(), err error) {
	if !s.instance.acquire() {
		return nil, &statusError{errUnavailable, fmt.Sprintf("the server is at its bound of %d requests in flight; retry after the time in Retry-After", s.instance.max), time.Second}
	}
	return s.instance.release, nil
}

// admitProject takes a slot of the project; release gives it back. A
// project's counter is made by its first request in flight and dropped by
// its last, under s.mu, so the map holds only projects with requests in
// flight.
func (s *shedder) admitProject(project string) (release func(), err error) {
	if s.perProject <= 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.projects[project]
	if l == nil {
		l = &limiter{max: s.perProject}
		s.projects[project] = l
	}
	if !l.acquire() {
		return nil, &statusError{errUnavailable, fmt.Sprintf("project %s is at its bound of %d requests in flight; retry after the time in Retry-After", project, s.perProject), time.Second}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			l.release()
			if l.n.Load() == 0 {
				delete(s.projects, project)
			}
		})
	}, nil
}

// InFlight returns how many requests the instance (project "") or a project
// is serving now.
func (s *Server) InFlight(project string) int {
	if project == "" {
		return int(s.shed.instance.n.Load())
	}
	s.shed.mu.Lock()
	defer s.shed.mu.Unlock()
	if l := s.shed.projects[project]; l != nil {
		return int(l.n.Load())
	}
	return 0
}

// admit refuses, 429 with Retry-After, a request whose address, or whose
// claimed agent (from an address that failed recently), has no failure
// tokens left, unless known (nil: never) reports that its credential is one
// the engine knows.
func (s *Server) admit(r *http.Request, project, agent string, known func() bool) error {
	if t, ok := s.fails.Admit(r, project, agent, known).(*faceauth.Throttled); ok {
		return &statusError{errThrottled, t.Error(), t.Wait}
	}
	return nil
}

// authFailed records a failed authentication of r.
func (s *Server) authFailed(r *http.Request, project, agent string) {
	s.fails.Fail(r, project, agent)
}
