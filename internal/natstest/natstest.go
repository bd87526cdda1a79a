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
	"fmt"
	"net"
	"net/url"
	"strconv"
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
	if !o.NoLog {
		s.ConfigureLogger()
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

// StartCluster runs n embedded servers (n >= 3 for replicated streams) that
// form one JetStream cluster over loopback routes, and waits until it has a
// meta leader and every server is current. Each has its own store directory
// and client port; opts apply to each.
func StartCluster(t testing.TB, n int, opts ...Option) []*server.Server {
	t.Helper()
	// JetStream wants every server to have routes configured, so the route
	// ports are picked before the servers start.
	ports := make([]int, n)
	var routes []*url.URL
	for i := range ports {
		ports[i] = freePort(t)
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i]))})
	}
	var servers []*server.Server
	for i := range n {
		o := []Option{Options(func(o *server.Options) {
			o.ServerName = fmt.Sprintf("natstest-%d", i+1)
			o.Cluster.Name = "natstest"
			o.Cluster.Host = "127.0.0.1"
			o.Cluster.Port = ports[i]
			o.Routes = routes
		})}
		servers = append(servers, Start(t, append(o, opts...)...))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		leaders, current := 0, 0
		for _, s := range servers {
			// Only the meta leader lists the peers.
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == n {
				leaders++
			}
			if s.JetStreamIsCurrent() {
				current++
			}
		}
		if leaders == 1 && current == n {
			return servers
		}
		if time.Now().After(deadline) {
			var state []string
			for _, s := range servers {
				state = append(state, fmt.Sprintf("%s: leader %v current %v peers %v", s.Name(), s.JetStreamIsLeader(), s.JetStreamIsCurrent(), s.JetStreamClusterPeers()))
			}
			t.Fatalf("natstest: cluster of %d: %d meta leaders and %d current servers after 20s: %v", n, leaders, current, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
