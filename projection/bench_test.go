package projection

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/turnledger/turnledger/kernel"
)

// lifecycleEvents returns about n events: Turns dispatched to 10 agents, each
// claimed, given one record and finished (5 events a Turn).
func lifecycleEvents(n int) *events {
	l := newEvents()
	for a := range 10 {
		l.register(fmt.Sprintf("a%d", a), "coder", 4, "code")
	}
	for i := 0; len(l.recs) < n; i++ {
		id, target := fmt.Sprintf("t%d", i), fmt.Sprintf("a%d", i%10)
		claim := "c" + id
		l.dispatch(id, target, "a0", "code")
		l.claim(id, target, claim)
		l.record(id, target, claim, 1, "note", `{"text":"some progress on the work"}`)
		l.finish(id, target, claim, "succeeded", `{"ok":true}`, 2)
	}
	return l
}

// bigStore folds n lifecycle events into a store in batches of 1000.
func bigStore(b *testing.B, n int) (*Store, *events) {
	b.Helper()
	l := lifecycleEvents(n)
	s, _ := openStore(b)
	for i := 0; i < len(l.recs); i += 1000 {
		mustApply(b, s, l.recs[i:min(i+1000, len(l.recs))])
	}
	return s, l
}

// BenchmarkProjectFeedPage100k reads a page of 100 items of the project feed
// at a random cursor of a 100k-event ledger.
func BenchmarkProjectFeedPage100k(b *testing.B) {
	s, l := bigStore(b, 100_000)
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for b.Loop() {
		after := rng.Uint64N(l.seq - 100)
		page, err := s.ProjectFeed(proj, after, 100)
		if err != nil || len(page.Items) != 100 {
			b.Fatalf("ProjectFeed(%d, 100) = %d items, %v", after, len(page.Items), err)
		}
	}
}

// BenchmarkAgentFeedPage100k reads a page of 100 items of one agent's feed
// (an index into the project feed) at a random cursor of a 100k-event ledger.
func BenchmarkAgentFeedPage100k(b *testing.B) {
	s, l := bigStore(b, 100_000)
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for b.Loop() {
		after := rng.Uint64N(l.seq * 9 / 10)
		page, err := s.AgentFeed(proj, "a3", after, 100)
		if err != nil || len(page.Items) != 100 {
			b.Fatalf("AgentFeed(%d, 100) = %d items, %v", after, len(page.Items), err)
		}
	}
}

// BenchmarkApply measures fold throughput: batches of 1000 lifecycle events
// per transaction, with and without fsync.
func BenchmarkApply(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("batch1000/fsync=%v", sync), func(b *testing.B) {
			l := lifecycleEvents(200_000)
			cfg := DefaultConfig()
			cfg.NoSync = !sync
			s, err := Open(filepath.Join(b.TempDir(), "p.db"), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			next := 0
			b.ResetTimer()
			for b.Loop() {
				if next+1000 > len(l.recs) {
					b.StopTimer()
					s.Close()
					s, err = Open(filepath.Join(b.TempDir(), fmt.Sprintf("p%d.db", next)), cfg)
					if err != nil {
						b.Fatal(err)
					}
					next = 0
					b.StartTimer()
				}
				if err := s.Apply(l.recs[next : next+1000]); err != nil {
					b.Fatal(err)
				}
				next += 1000
			}
			b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkApplyOne measures one event per transaction with fsync, the cost
// of a projector that folds each event as it arrives.
func BenchmarkApplyOne(b *testing.B) {
	l := lifecycleEvents(100_000)
	s, err := Open(filepath.Join(b.TempDir(), "p.db"), DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	i := 0
	for b.Loop() {
		if i == len(l.recs) {
			b.Fatal("benchmark ran past the prepared events")
		}
		if err := s.Apply([]kernel.Recorded{l.recs[i]}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkApplySmall measures small batches (4 events) per transaction with
// fsync: a projector that folds the few events of one command at a time.
func BenchmarkApplySmall(b *testing.B) {
	const n = 4
	l := lifecycleEvents(100_000)
	s, err := Open(filepath.Join(b.TempDir(), "p.db"), DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	i := 0
	for b.Loop() {
		if i+n > len(l.recs) {
			b.Fatal("benchmark ran past the prepared events")
		}
		if err := s.Apply(l.recs[i : i+n]); err != nil {
			b.Fatal(err)
		}
		i += n
	}
}

// BenchmarkApplyOneNoSync is BenchmarkApplyOne without fsync: the CPU and
// allocation cost of folding one event, without the disk's.
func BenchmarkApplyOneNoSync(b *testing.B) {
	l := lifecycleEvents(100_000)
	cfg := DefaultConfig()
	cfg.NoSync = true
	s, err := Open(filepath.Join(b.TempDir(), "p.db"), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	i := 0
	for b.Loop() {
		if i == len(l.recs) {
			b.Fatal("benchmark ran past the prepared events")
		}
		if err := s.Apply([]kernel.Recorded{l.recs[i]}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkRebuild measures Rebuild of 200k lifecycle events from a ledger
// in memory (events already decoded): the fold, the feed items and the
// writes of a replay, without the reading and decoding of the ledger.
func BenchmarkRebuild(b *testing.B) {
	l := lifecycleEvents(200_000)
	src := newMemLedger(1000)
	src.append(l.recs...)
	dir := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		if err := Rebuild(context.Background(), filepath.Join(dir, fmt.Sprintf("p%d.db", i)), src, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*float64(len(l.recs))/b.Elapsed().Seconds(), "events/s")
}
