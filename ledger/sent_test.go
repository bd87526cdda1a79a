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

// Follow hands events over as they come, and tells fn it has caught up (an
// empty batch, on which the projector commits) once it has handed over
// every event it holds and no append of its own Store is on its way: at
// once when none is, after Config.FollowLinger when one stays unanswered.
func TestFollowTellsWhenCaughtUp(t *testing.T) {
	srv := natstest.Start(t)
	cfg := DefaultConfig()
	cfg.Storage = MemoryStorage
	cfg.FollowLinger = time.Second
	s := openOn(t, srv, cfg)
	appendOne := func(last uint64) uint64 {
		t.Helper()
		seq, err := s.Append(t.Context(), "p1", last, heartbeat("a1"))
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	type delivery struct {
		seqs []uint64
		at   time.Time
	}
	batches := make(chan delivery, 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		done <- s.Follow(ctx, 0, func(batch []kernel.Recorded) error {
			var seqs []uint64
			for _, r := range batch {
				seqs = append(seqs, r.Seq)
			}
			batches <- delivery{seqs, time.Now()}
			return nil
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	next := func() delivery {
		t.Helper()
		select {
		case d := <-batches:
			return d
		case <-time.After(10 * time.Second):
			t.Fatal("nothing handed over in 10 s")
			return delivery{}
		}
	}
	// events reads batches up to ledger_seq last; none may be empty.
	events := func(last uint64) delivery {
		t.Helper()
		var got []uint64
		for {
			d := next()
			if len(d.seqs) == 0 {
				t.Fatalf("an empty batch after ledger_seq %v, before %d was handed over", got, last)
			}
			got = append(got, d.seqs...)
			if got[len(got)-1] >= last {
				if want := seqsUpTo(got[0], last); !cmp.Equal(got, want) {
					t.Errorf("handed over ledger_seq %v, want %v", got, want)
				}
				return d
			}
		}
	}

	// An append of this Store stays unanswered, its event not received (as
	// under load, where one always is): after the events written meanwhile,
	// Follow waits the linger for it before it tells fn it caught up.
	s.sent.add("an append still unanswered", kernel.Event{})
	last := uint64(0)
	for range 3 {
		last = appendOne(last)
	}
	lastAt := events(last).at
	d := next()
	if len(d.seqs) != 0 {
		t.Fatalf("after the events, a batch of %v, want an empty one", d.seqs)
	}
	if waited := d.at.Sub(lastAt); waited < cfg.FollowLinger*9/10 {
		t.Errorf("caught up %v after the last event while an append was unanswered, want about the linger (%v)", waited, cfg.FollowLinger)
	}

	// Nothing else in flight: a lone event is handed over, and Follow
	// tells it caught up at once, not after the linger.
	s.sent.answered("an append still unanswered", false)
	start := time.Now()
	last = appendOne(last)
	events(last)
	if d := next(); len(d.seqs) != 0 {
		t.Fatalf("after a lone event, a batch of %v, want an empty one", d.seqs)
	}
	if waited := time.Since(start); waited >= cfg.FollowLinger {
		t.Errorf("caught up %v after a lone append, the whole linger", waited)
	}
}

func seqsUpTo(first, last uint64) []uint64 {
	var out []uint64
	for q := first; q <= last; q++ {
		out = append(out, q)
	}
	return out
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
