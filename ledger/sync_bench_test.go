package ledger_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/turnledger/turnledger/ledger"
)

// BenchmarkAppendSync measures what --sync costs: appends to file storage
// on the embedded server with an fsync per message (always) and with
// nats-server's periodic sync (interval), from one client in sequence and
// from 16 clients at once, each on a project of its own (JetStream then
// batches the flushes of concurrent appends).
//
//	go test ./ledger -run '^$' -bench AppendSync -benchtime 2s
func BenchmarkAppendSync(b *testing.B) {
	for _, sync := range []ledger.Sync{ledger.SyncAlways, ledger.SyncInterval} {
		b.Run(string(sync)+"/sequential", func(b *testing.B) {
			s, _ := openSync(b, sync, false)
			appendInSequence(b, s)
		})
		b.Run(string(sync)+"/16-clients", func(b *testing.B) {
			s, _ := openSync(b, sync, false)
			var next atomic.Int64
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				p := fmt.Sprintf("p%d", next.Add(1))
				ev := record(p, "t1", 1)
				var last uint64
				for pb.Next() {
					seq, err := s.Append(context.Background(), p, last, ev)
					if err != nil {
						b.Error(err)
						return
					}
					last = seq
				}
			})
			eventsPerSecond(b, b.N)
		})
	}
}

// openSync opens a Store with Embedded.Open on an embedded server with file
// storage and the given sync (and group commit), reached in-process.
func openSync(b *testing.B, sync ledger.Sync, group bool) (*ledger.Store, *nats.Conn) {
	b.Helper()
	cfg := ledger.DefaultEmbeddedConfig(b.TempDir())
	cfg.Sync, cfg.GroupCommit = sync, group
	e, err := ledger.StartEmbedded(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	nc, s, err := e.Open(context.Background(), ledger.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	return s, nc
}

// appendInSequence appends to one project, one event at a time, each made
// durable (Store.Durable: at once unless the Store commits in groups)
// before the next.
func appendInSequence(b *testing.B, s *ledger.Store) {
	ev := record("p1", "t1", 1)
	var last uint64
	for b.Loop() {
		seq, err := s.Append(context.Background(), "p1", last, ev)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Durable(context.Background(), seq); err != nil {
			b.Fatal(err)
		}
		last = seq
	}
	eventsPerSecond(b, b.N)
}
