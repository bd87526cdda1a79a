package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
	s := openOn(t, srv, cfg)
	appendOne := func(last uint64) uint64 {
		t.Helper()
		seq, err := s.Append(t.Context(), "p1", last, heartbeat("a1"))
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
	s.sent.add("an append still unanswered", kernel.Event{})
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
	s.sent.answered("an append still unanswered", false)
	start := time.Now()
	last = appendOne(last)
	if got := next(); len(got) != 1 || got[0] != last {
		t.Errorf("batch of a lone append = ledger_seq %v, want [%d]", got, last)
	}
	if waited := time.Since(start); waited >= cfg.FollowLinger {
		t.Errorf("a lone event was handed over after %v, the whole linger", waited)
	}
}

// Follow hands over the events this Store appended as they were appended,
// without decoding their messages again, and decodes those of another
// Store; either way the events are those the ledger holds.
func TestFollowTakesItsOwnEventsWithoutDecoding(t *testing.T) {
	srv := natstest.Start(t)
	cfg := DefaultConfig()
	cfg.Storage = MemoryStorage
	mine, other := openOn(t, srv, cfg), openOn(t, srv, cfg)
	first := heartbeat("a1")
	if _, err := mine.Append(t.Context(), "p1", 0, first); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Append(t.Context(), "p1", 1, heartbeat("a2")); err != nil {
		t.Fatal(err)
	}
	var got []kernel.Recorded
	ctx, cancel := context.WithCancel(t.Context())
	err := mine.Follow(ctx, 0, func(batch []kernel.Recorded) error {
		got = append(got, batch...)
		if len(got) == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow = %v", err)
	}
	if got[0].Event.Data != first.Data {
		t.Errorf("Follow decoded the event its own Store appended (data %p, appended %p)", got[0].Event.Data, first.Data)
	}
	if got[1].Event.Data == nil || got[1].Event.ID != "a2" {
		t.Errorf("Follow's second event = %+v, want a2 decoded", got[1].Event)
	}
	var read []kernel.Recorded
	if _, err := mine.ReadAll(t.Context(), 0, func(batch []kernel.Recorded, _ uint64) error {
		read = append(read, batch...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(read, got); diff != "" {
		t.Errorf("Follow's events differ from the ledger's (-ReadAll +Follow):\n%s", diff)
	}
	if mine.sent.waiting() || len(mine.sent.m) != 0 {
		t.Errorf("after Follow took them, %d events are still kept", len(mine.sent.m))
	}
}
