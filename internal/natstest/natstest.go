// Package natstest starts a real embedded nats-server with JetStream for
// tests: loopback only, a random port, its store in a temporary directory,
// shut down when the test ends.
//
// The server always has a store directory, so both file and memory streams
// work on it; which one a test gets is chosen by the stream's configuration
// (ledger.Config.Storage). To test a restart on the same data, pass the same
// StoreDir to a second Start after shutting the first server down.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Option changes the server options before the server starts.
type Option func(*server.Options)

// StoreDir puts the JetStream store in dir instead of a fresh t.TempDir().
func StoreDir(dir string) Option {
	return func(o *server.Options) { o.StoreDir = dir }
}

// Port listens on the given loopback port instead of a random one.
func Port(port int) Option {
	return func(o *server.Options) { o.Port = port }
}

// Options applies any change to the server options.
func Options(f func(*server.Options)) Option { return Option(f) }

// Start runs an embedded nats-server with JetStream on 127.0.0.1 and a random
// port, its store in t.TempDir(), and shuts it down in t.Cleanup. Its client
// URL is s.ClientURL().
func Start(t testing.TB, opts ...Option) *server.Server {
	t.Helper()
	o := &server.Options{
		ServerName: "natstest",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		NoLog:      true,
		NoSigs:     true,
	}
	for _, opt := range opts {
		opt(o)
	}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("natstest: server not ready for connections after 10s")
	}
	return s
}

// Connect connects to s over loopback and closes the connection in
// t.Cleanup.
func Connect(t testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", s.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ConnectURL connects to the server at url and closes the connection in
// t.Cleanup.
func ConnectURL(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}
