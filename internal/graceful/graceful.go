// Package graceful makes an HTTP server's Shutdown close at once the
// connections no request has arrived on, as it closes idle ones.
//
// net/http's Server.Shutdown counts a connection in http.StateNew (accepted,
// no request read yet: a client's spare dial is one) busy for its first five
// seconds (golang/go#22682), so a Shutdown given five seconds or less fails
// with context.DeadlineExceeded whenever a client holds such a connection,
// and a process that stops on it exits as if it had failed. Every server of
// the project is made with CloseFreshConns.
package graceful

import (
	"net"
	"net/http"
	"sync"
)

// CloseFreshConns makes hs's Shutdown close the connections no request has
// arrived on when it begins (and any accepted after), while a request being
// served still finishes. It keeps hs's own ConnState hook, called after its
// own. Call it before hs serves.
func CloseFreshConns(hs *http.Server) {
	f := &freshConns{conns: map[net.Conn]struct{}{}, next: hs.ConnState}
	hs.ConnState = f.track
	hs.RegisterOnShutdown(f.closeAll)
}

// freshConns are a server's connections in http.StateNew.
type freshConns struct {
	next func(net.Conn, http.ConnState)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool // the server is shutting down
}

func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	switch {
	case st == http.StateNew && f.closed:
		c.Close()
	case st == http.StateNew:
		f.conns[c] = struct{}{}
	default:
		delete(f.conns, c)
	}
	f.mu.Unlock()
	if f.next != nil {
		f.next(c, st)
	}
}

func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for c := range f.conns {
		c.Close()
		delete(f.conns, c)
	}
}
