package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// BenchmarkAppendManyTurns appends to a project that already holds 50k
// Turns, each its own aggregate. The per-project expectation must not cost
// more as the project grows (see the package doc on subjects): compare with
// BenchmarkAppend.
func BenchmarkAppendManyTurns(b *testing.B) {
	srv := natstest.Start(b)
	cfg := ledger.DefaultConfig()
	cfg.Storage = ledger.MemoryStorage
	s, err := ledger.Open(context.Background(), natstest.Connect(b, srv), cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var last uint64
	turn := func(i int) kernel.Event {
		return kernel.Event{Type: kernel.EvTurnStopRequested, V: 1, ProjectID: "p1", Aggregate: kernel.AggTurn,
			ID: fmt.Sprintf("turn_%d", i), At: time.Unix(0, 0).UTC(), Actor: kernel.Actor{Kind: kernel.ActorAdmin},
			Data: &kernel.TurnStopRequested{RequestedBy: kernel.AgentRef{ProjectID: "p1", AgentID: "a"}}}
	}
	for i := 0; i < 50_000; i++ {
		if last, err = s.Append(ctx, "p1", last, turn(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if last, err = s.Append(ctx, "p1", last, turn(50_000+i)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAppendRefusesEventsOverMaxPayload: an event larger than the server
// takes is the client's error (kernel Validation), and nothing is written.
func TestAppendRefusesEventsOverMaxPayload(t *testing.T) {
	srv := natstest.Start(t, natstest.Options(func(o *server.Options) { o.MaxPayload = 64 * 1024 }))
	cfg := ledger.DefaultConfig()
	cfg.Storage = ledger.MemoryStorage
	s, err := ledger.Open(context.Background(), natstest.Connect(t, srv), cfg)
	if err != nil {
		t.Fatal(err)
	}
	big := kernel.Event{Type: kernel.EvTurnRecordAppended, V: 1, ProjectID: "p1", Aggregate: kernel.AggTurn, ID: "t1",
		At: time.Unix(0, 0).UTC(), Actor: kernel.Actor{Kind: kernel.ActorAdmin},
		Data: &kernel.TurnRecordAppended{ClaimID: "c", TurnSeq: 1, Role: "note", Payload: json.RawMessage(`{"t":"` + strings.Repeat("x", 70*1024) + `"}`)}}
	if _, err := s.Append(context.Background(), "p1", 0, big); kernel.ErrorKind(err) != kernel.Validation {
		t.Fatalf("Append of a 70 KiB event to a 64 KiB server = %v, want %s", err, kernel.Validation)
	}
	if head, _ := s.Head(context.Background()); head != 0 {
		t.Errorf("head = %d after a refused append, want 0", head)
	}
}
