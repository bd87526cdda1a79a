package ledger_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

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
		open := func(b *testing.B) *ledger.Store {
			cfg := ledger.DefaultEmbeddedConfig(b.TempDir())
			cfg.Sync = sync
			e, err := ledger.StartEmbedded(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { e.Close() })
			nc, err := e.Connect()
			if err != nil {
				b.Fatal(err)
			}
			s, err := ledger.Open(context.Background(), nc, ledger.DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			return s
		}
		b.Run(string(sync)+"/sequential", func(b *testing.B) {
			s := open(b)
			ev := record("p1", "t1", 1)
			var last uint64
			for b.Loop() {
				seq, err := s.Append(context.Background(), "p1", last, ev)
				if err != nil {
					b.Fatal(err)
				}
				last = seq
			}
			eventsPerSecond(b, b.N)
		})
		b.Run(string(sync)+"/16-clients", func(b *testing.B) {
			s := open(b)
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
