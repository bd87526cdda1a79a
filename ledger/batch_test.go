package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// TestAppendBatchIsAllOrNone: a batch is stored as consecutive ledger_seqs
// under the project's expectation, and a batch whose expectation fails
// stores nothing; another project's appends in between do not disturb it.
func TestAppendBatchIsAllOrNone(t *testing.T) {
	forEach(t, func(t *testing.T, e env) {
		s := e.open(t)
		ctx := context.Background()
		first := mustAppend(t, s, "p1", 0, record("p1", "t1", 1))
		mustAppend(t, s, "p2", 0, record("p2", "t9", 1))
		batch := []kernel.Event{record("p1", "t1", 2), record("p1", "t2", 1), record("p1", "t3", 1)}
		seqs, err := s.AppendBatch(ctx, "p1", first, batch)
		if e.cfg.Expect == ledger.ExpectStream {
			// Stream-wide expectations cannot guard a batch: refused, nothing stored.
			if kernel.ErrorKind(err) != kernel.Unavailable || lastSeq(t, s, "p1") != first {
				t.Fatalf("AppendBatch in stream-wide mode = %v, %v; want Unavailable and nothing stored", seqs, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("AppendBatch = %v", err)
		}
		if want := []uint64{seqs[0], seqs[0] + 1, seqs[0] + 2}; !cmp.Equal(want, seqs) || seqs[0] <= first {
			t.Errorf("AppendBatch seqs = %v, want three consecutive after %d", seqs, first)
		}
		got, last := readProject(t, s, "p1", first)
		if last != seqs[2] || len(got) != 3 {
			t.Fatalf("ReadProject after the batch = %d events up to %d, want 3 up to %d", len(got), last, seqs[2])
		}
		for i, r := range got {
			if r.Seq != seqs[i] || r.Event.ID != batch[i].ID {
				t.Errorf("event %d read back = %d %s, want %d %s", i, r.Seq, r.Event.ID, seqs[i], batch[i].ID)
			}
		}
		// A stale expectation stores none of the batch.
		_, err = s.AppendBatch(ctx, "p1", first, []kernel.Event{record("p1", "t1", 3), record("p1", "t4", 1)})
		if !errors.Is(err, ledger.ErrConflict) {
			t.Errorf("AppendBatch with a stale expectation = %v, want ErrConflict", err)
		}
		if l := lastSeq(t, s, "p1"); l != seqs[2] {
			t.Errorf("last seq of p1 after the refused batch = %d, want %d", l, seqs[2])
		}
		// Too many at once is the caller's error.
		big := make([]kernel.Event, ledger.MaxBatch+1)
		for i := range big {
			big[i] = record("p1", "t5", uint64(i+1))
		}
		if _, err := s.AppendBatch(ctx, "p1", seqs[2], big); kernel.ErrorKind(err) != kernel.Validation {
			t.Errorf("AppendBatch of %d = %v, want a ValidationError", len(big), err)
		}
	})
}

// TestAppendBatchOnAStreamWithoutAtomicBatches: a stream made before the
// ledger asked for atomic batches is left as it is; a batch on it is
// refused as Unavailable, saying how to allow them, and stores nothing.
func TestAppendBatchOnAStreamWithoutAtomicBatches(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ledger.DefaultConfig()
	cfg.Storage = ledger.MemoryStorage
	_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{Name: cfg.Stream, Subjects: []string{cfg.Prefix + ".>"},
		Storage: jetstream.MemoryStorage, DenyDelete: true, DenyPurge: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ledger.Open(context.Background(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := mustAppend(t, s, "p1", 0, record("p1", "t1", 1))
	_, err = s.AppendBatch(context.Background(), "p1", first, []kernel.Event{record("p1", "t1", 2), record("p1", "t2", 1)})
	if kernel.ErrorKind(err) != kernel.Unavailable || !strings.Contains(err.Error(), "allow_atomic") {
		t.Errorf("AppendBatch on a stream without atomic batches = %v, want Unavailable naming allow_atomic", err)
	}
	if l := lastSeq(t, s, "p1"); l != first {
		t.Errorf("the refused batch moved p1 to %d", l)
	}
	info, err := js.Stream(context.Background(), cfg.Stream)
	if err != nil || info.CachedInfo().Config.AllowAtomicPublish {
		t.Errorf("Open changed the stream: %v", err)
	}
}
