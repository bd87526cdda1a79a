package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
)

// openOn opens a Store with cfg over a new connection to srv.
func openOn(t *testing.T, srv *server.Server, cfg Config) *Store {
	t.Helper()
	s, err := Open(context.Background(), natstest.Connect(t, srv), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startEmbedded starts an embedded server of cfg that stops when the test
// ends.
func startEmbedded(t *testing.T, cfg EmbeddedConfig) *Embedded {
	t.Helper()
	e, err := StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// openEmbedded opens a Store with cfg on e (Embedded.Open: the server knows
// its Stores, for group commit and the pipeline).
func openEmbedded(t *testing.T, e *Embedded, cfg Config) *Store {
	t.Helper()
	_, s, err := e.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// heartbeat is an event of agent id of project p1, at a fixed time.
func heartbeat(id string) kernel.Event {
	return kernel.Event{
		Type: kernel.EvAgentHeartbeat, V: 1, ProjectID: "p1", Aggregate: kernel.AggAgent, ID: id,
		At: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), Actor: kernel.Actor{Kind: "admin"}, Data: &kernel.AgentHeartbeat{},
	}
}
