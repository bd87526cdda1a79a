package ledger_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// benchStore opens a Store on an embedded server reached in-process, as
// serve does.
func benchStore(b *testing.B, storage ledger.Storage, expect ledger.Expectation) *ledger.Store {
	b.Helper()
	e, err := ledger.StartEmbedded(ledger.DefaultEmbeddedConfig(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	nc, err := e.Connect()
	if err != nil {
		b.Fatal(err)
	}
	cfg := ledger.DefaultConfig()
	cfg.Storage = storage
	cfg.Expect = expect
	s, err := ledger.Open(context.Background(), nc, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

var benchVariants = []variant{
	{"memory", ledger.MemoryStorage, ledger.ExpectProject},
	{"file", ledger.FileStorage, ledger.ExpectProject},
	{"file/stream-wide", ledger.FileStorage, ledger.ExpectStream},
}

func eventsPerSecond(b *testing.B, n int) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppend appends one event per op: to one project in sequence, and
// from GOMAXPROCS goroutines in parallel, each to a project of its own.
func BenchmarkAppend(b *testing.B) {
	for _, v := range benchVariants {
		b.Run(v.name+"/sequential", func(b *testing.B) {
			appendInSequence(b, benchStore(b, v.storage, v.expect))
		})
		b.Run(v.name+"/parallel-projects", func(b *testing.B) {
			s := benchStore(b, v.storage, v.expect)
			var next atomic.Int64
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

// fill appends n events: every tenth to project "small", the rest to
// "big".
func fill(b *testing.B, s *ledger.Store, n int) {
	b.Helper()
	last := map[string]uint64{}
	for i := range n {
		p := "big"
		if i%10 == 0 {
			p = "small"
		}
		seq, err := s.Append(context.Background(), p, last[p], record(p, "t1", uint64(i+1)))
		if err != nil {
			b.Fatal(err)
		}
		last[p] = seq
	}
}

// BenchmarkRead reads a stream of 20,000 events: one op reads a whole
// project (ReadProject) or the whole stream (ReadAll, in batches of 1000, the
// way Follow delivers a replay).
func BenchmarkRead(b *testing.B) {
	const total = 20_000
	for _, v := range benchVariants[:2] {
		s := benchStore(b, v.storage, v.expect)
		fill(b, s, total)
		for _, p := range []struct {
			name string
			n    int
		}{{"big", total * 9 / 10}, {"small", total / 10}} {
			b.Run(fmt.Sprintf("%s/ReadProject-%d", v.name, p.n), func(b *testing.B) {
				read := 0
				for b.Loop() {
					_, err := s.ReadProject(context.Background(), p.name, 0, func(kernel.Recorded) error {
						read++
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				if read != p.n*b.N {
					b.Fatalf("read %d events, want %d", read, p.n*b.N)
				}
				eventsPerSecond(b, read)
			})
		}
		b.Run(fmt.Sprintf("%s/ReadAll-%d", v.name, total), func(b *testing.B) {
			read := 0
			for b.Loop() {
				_, err := s.ReadAll(context.Background(), 0, func(batch []kernel.Recorded, _ uint64) error {
					read += len(batch)
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			eventsPerSecond(b, read)
		})
		b.Run(v.name+"/ReadProject-caught-up", func(b *testing.B) {
			// The cost of "is there anything new" when there is not: one
			// LastSeq round trip.
			last, err := s.LastSeq(context.Background(), "small")
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.ReadProject(context.Background(), "small", last, func(kernel.Recorded) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(v.name+"/ReadProject-one-new", func(b *testing.B) {
			// Catching up on one event: what the engine does after a
			// conflict.
			last, err := s.LastSeq(context.Background(), "small")
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.ReadProject(context.Background(), "small", last-1, func(kernel.Recorded) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
