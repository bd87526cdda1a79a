// Package inflight carries the in-flight slots a request holds in its
// context: the slots httpapi's shedding takes for a request of the instance
// and of its project (docs/limits.md), which every face served behind it
// shares. A request that waits without working (a long-poll claim with
// nothing to claim, an event stream, an MCP listen or GET stream) gives its
// slots back with Detach, so that waiting clients never crowd out commands
// (the connection limit, --max-conns, bounds them instead).
package inflight

import (
	"context"
	"sync"
)

// Slots are the in-flight slots of one request: released once, at the end
// of the request or earlier by Detach.
type Slots struct {
	mu       sync.Mutex
	releases []func()
}

// New returns the slots of a request holding the slots released by the
// functions given.
func New(releases ...func()) *Slots {
	return &Slots{releases: releases}
}

// Add records one more slot, released by f.
func (s *Slots) Add(f func()) {
	s.mu.Lock()
	s.releases = append(s.releases, f)
	s.mu.Unlock()
}

// ReleaseAll gives back every slot held; a second call does nothing.
func (s *Slots) ReleaseAll() {
	s.mu.Lock()
	rs := s.releases
	s.releases = nil
	s.mu.Unlock()
	for _, f := range rs {
		f()
	}
}

type key struct{}

// With returns ctx carrying the request's slots.
func With(ctx context.Context, s *Slots) context.Context {
	return context.WithValue(ctx, key{}, s)
}

// Hold records a slot taken for the request of ctx; without slots in ctx (a
// handler called directly) it reports false and the caller releases the
// slot itself.
func Hold(ctx context.Context, release func()) bool {
	s, ok := ctx.Value(key{}).(*Slots)
	if ok {
		s.Add(release)
	}
	return ok
}

// Detach gives back the slots of the request of ctx, if it has any: call it
// once the request waits on notifications and does no work meanwhile.
func Detach(ctx context.Context) {
	if s, ok := ctx.Value(key{}).(*Slots); ok {
		s.ReleaseAll()
	}
}
