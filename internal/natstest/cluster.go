package natstest

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/turnledger/turnledger/internal/checkfor"
)

// Cluster is a JetStream cluster of embedded servers on loopback, made the
// way nats-server's own tests make theirs (createJetStreamClusterExplicit in
// server/jetstream_helpers_test.go): explicit routes between every server,
// one cluster name, a store directory each, and a wait until the meta group
// has a leader. Servers run in-process; Kill stops one.
type Cluster struct {
	t       testing.TB
	Servers []*server.Server
}

// NewCluster starts n servers (see StartCluster) and returns them as a
// Cluster.
func NewCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	return &Cluster{t: t, Servers: StartCluster(t, n, opts...)}
}

// URLs is every running server's client URL, comma-separated, as
// nats.Connect and `serve --nats-url` take them.
func (c *Cluster) URLs() string {
	var urls []string
	for _, s := range c.Servers {
		if s.Running() {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// StreamLeader returns the server leading the stream of the global account,
// or nil while it has none.
func (c *Cluster) StreamLeader(stream string) *server.Server {
	for _, s := range c.Servers {
		if s.Running() && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return s
		}
	}
	return nil
}

// MetaLeader returns the running server that leads the JetStream meta
// group, or nil while there is none.
func (c *Cluster) MetaLeader() *server.Server {
	for _, s := range c.Servers {
		if s.Running() && s.JetStreamIsLeader() {
			return s
		}
	}
	return nil
}

// WaitStreamLeader waits up to timeout for the stream to have a leader and
// every running replica to be current, and returns the leader.
func (c *Cluster) WaitStreamLeader(stream string, timeout time.Duration) *server.Server {
	c.t.Helper()
	var leader *server.Server
	checkfor.Until(c.t, timeout, "stream "+stream+" to have a leader and current replicas", func() bool {
		leader = c.StreamLeader(stream)
		if leader == nil {
			return false
		}
		for _, s := range c.Servers {
			if s.Running() && s.JetStreamIsStreamAssigned(server.DEFAULT_GLOBAL_ACCOUNT, stream) &&
				!s.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				return false
			}
		}
		return true
	})
	return leader
}

// Kill shuts s down and waits until it has stopped. Like any nats-server
// that is stopped rather than crashed, it first hands the leadership of its
// raft groups to another server.
func (c *Cluster) Kill(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}
