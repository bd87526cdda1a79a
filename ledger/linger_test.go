package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
)

// Follow waits for the events of appends still unanswered before it hands a
// batch over (group commit), and hands a lone event over at once when no
// append is in flight, however long the linger.
func TestFollowLingersOnlyWhileAppendsAreInFlight(t *testing.T) {
	srv := natstest.Start(t)
	cfg := DefaultConfig()
	cfg.Storage = MemoryStorage
	cfg.BatchSize = 3
	cfg.FollowLinger = time.Second // the test would take a second per batch if it lingered for nothing
	s, err := Open(t.Context(), natstest.Connect(t, srv), cfg)
	if err != nil {
		t.Fatal(err)
	}
	appendOne := func(last uint64) uint64 {
		t.Helper()
		seq, err := s.Append(t.Context(), "p1", last, kernel.Event{
			Type: kernel.EvAgentHeartbeat, V: 1, ProjectID: "p1", Aggregate: kernel.AggAgent, ID: "a1",
			At: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), Actor: kernel.Actor{Kind: "admin"}, Data: &kernel.AgentHeartbeat{},
		})
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	batches := make(chan []uint64, 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		done <- s.Follow(ctx, 0, func(batch []kernel.Recorded) error {
			var seqs []uint64
			for _, r := range batch {
				seqs = append(seqs, r.Seq)
			}
			batches <- seqs
			return nil
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	next := func() []uint64 {
		t.Helper()
		select {
		case b := <-batches:
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("no batch handed over in 10 s")
			return nil
		}
	}

	// An append of this Store stays unanswered, its event not received
	// (as under load, where one always is), while three events are written
	// one after another: Follow holds the first until the batch is full.
	s.unseen.add("an append still unanswered")
	last := uint64(0)
	for range 3 {
		last = appendOne(last)
	}
	if got := next(); len(got) != 3 {
		t.Errorf("batch while an append was in flight = ledger_seq %v, want the 3 events in one", got)
	}
	// Nothing else in flight: a lone event is handed over before the
	// linger could end (its own append may still be unanswered when it
	// arrives).
	s.unseen.seen("an append still unanswered")
	start := time.Now()
	last = appendOne(last)
	if got := next(); len(got) != 1 || got[0] != last {
		t.Errorf("batch of a lone append = ledger_seq %v, want [%d]", got, last)
	}
	if waited := time.Since(start); waited >= cfg.FollowLinger {
		t.Errorf("a lone event was handed over after %v, the whole linger", waited)
	}
}
