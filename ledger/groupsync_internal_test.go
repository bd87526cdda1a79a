package ledger

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/kernel"
)

// openGroup opens a Store that commits in groups on a new embedded server
// with file storage.
func openGroup(t *testing.T) *Store {
	t.Helper()
	cfg := DefaultEmbeddedConfig(t.TempDir())
	cfg.GroupCommit = true
	s := openEmbedded(t, startEmbedded(t, cfg), DefaultConfig())
	if s.group == nil {
		t.Fatal("Embedded.Open under GroupCommit made a Store that does not commit in groups")
	}
	return s
}

// TestGroupCommitSharesOneFsync: appends whose callers wait for durability
// while an fsync runs share the next one, and each returns only once an
// fsync that began after its append has ended.
func TestGroupCommitSharesOneFsync(t *testing.T) {
	s := openGroup(t)
	ctx := context.Background()
	first, err := s.Append(ctx, "p1", 0, heartbeat("a0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Durable(ctx, first); err != nil || s.DurableSeq() < first {
		t.Fatalf("Durable(%d) = %v with DurableSeq %d", first, err, s.DurableSeq())
	}
	roundsBefore := s.group.rounds

	// Hold the fsync back while ten appends wait for durability.
	g := s.group
	joined := func() uint64 { g.mu.Lock(); defer g.mu.Unlock(); return g.joined }
	base := joined()
	g.fmu.Lock()
	held := true
	defer func() {
		if held { // a failed check below: let the fsync and Close go on
			g.fmu.Unlock()
		}
	}()
	const n = 10
	seqs := make([]uint64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var appendMu sync.Mutex
	last := first
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			appendMu.Lock()
			seq, err := s.Append(ctx, "p1", last, heartbeat("a1"))
			if err == nil {
				last = seq
			}
			appendMu.Unlock()
			if err != nil {
				errs[i] = err
				return
			}
			seqs[i] = seq
			errs[i] = s.Durable(ctx, seq)
		}()
	}
	checkfor.Until(t, 10*time.Second, "ten callers waiting for durability", func() bool { return joined() >= base+n })
	if d := s.DurableSeq(); d > first {
		t.Fatalf("DurableSeq = %d while the fsync was held back, want at most %d", d, first)
	}
	held = false
	g.fmu.Unlock()
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if s.DurableSeq() < seqs[i] {
			t.Errorf("writer %d returned with ledger_seq %d above DurableSeq %d", i, seqs[i], s.DurableSeq())
		}
	}
	if r := s.group.rounds - roundsBefore; r > 2 {
		t.Errorf("ten waiting appends took %d fsyncs, want at most 2 (the one held back and one shared)", r)
	}
}

// TestFollowHandsOverOnlyDurableEvents: under group commit, the projector
// never folds an event a power loss could take back.
func TestFollowHandsOverOnlyDurableEvents(t *testing.T) {
	s := openGroup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 50
	var got, notDurable int
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(ctx, 0, func(batch []kernel.Recorded) error {
			if len(batch) == 0 {
				return nil
			}
			if d := s.DurableSeq(); d < batch[len(batch)-1].Seq {
				notDurable++
			}
			got += len(batch)
			if got >= n {
				cancel()
			}
			return nil
		})
	}()
	var last uint64
	for range n {
		seq, err := s.Append(context.Background(), "p1", last, heartbeat("a0"))
		if err != nil {
			t.Fatal(err)
		}
		last = seq
	}
	<-done
	if got < n || notDurable != 0 {
		t.Errorf("Follow handed over %d events, %d batches before they were durable; want %d and 0", got, notDurable, n)
	}
}

// TestFailedFsyncFailsEveryWaiter: an fsync that fails fails every caller
// waiting for it, as Unavailable, and leaves DurableSeq where it was; the
// next one that succeeds covers their events.
func TestFailedFsyncFailsEveryWaiter(t *testing.T) {
	s := openGroup(t)
	ctx := context.Background()
	seq, err := s.Append(ctx, "p1", 0, heartbeat("a0"))
	if err != nil {
		t.Fatal(err)
	}
	g := s.group
	dir := g.dir
	g.fmu.Lock()
	g.dir = filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(g.dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	g.fmu.Unlock()
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Durable(ctx, seq) }()
	}
	wg.Wait()
	for i, err := range errs {
		if kernel.ErrorKind(err) != kernel.Unavailable {
			t.Errorf("waiter %d of a failed fsync = %v, want %s", i, err, kernel.Unavailable)
		}
	}
	if d := s.DurableSeq(); d >= seq {
		t.Errorf("DurableSeq = %d after a failed fsync, want below %d", d, seq)
	}
	g.fmu.Lock()
	g.dir = dir
	g.fmu.Unlock()
	if err := s.Durable(ctx, seq); err != nil || s.DurableSeq() < seq {
		t.Errorf("Durable once fsync works again = %v with DurableSeq %d, want nil and at least %d", err, s.DurableSeq(), seq)
	}
}

// TestDurableEventsAreNotHeldBehindLaterOnes: events an fsync has covered
// are handed to the projector at once, even when the batch they came in
// ends in events still waiting for theirs (a command's answer waits for its
// event's fold).
func TestDurableEventsAreNotHeldBehindLaterOnes(t *testing.T) {
	s := openGroup(t)
	ctx := context.Background()
	first, err := s.Append(ctx, "p1", 0, heartbeat("a0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Durable(ctx, first); err != nil {
		t.Fatal(err)
	}
	g := s.group
	g.fmu.Lock() // no fsync ends until released
	held := true
	defer func() {
		if held {
			g.fmu.Unlock()
		}
	}()
	last := first
	for range 2 {
		if last, err = s.Append(ctx, "p1", last, heartbeat("a0")); err != nil {
			t.Fatal(err)
		}
	}
	var batch []kernel.Recorded
	if _, err := s.ReadProject(ctx, "p1", 0, func(r kernel.Recorded) error { batch = append(batch, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(batch) != 3 {
		t.Fatalf("read %d events, want 3", len(batch))
	}
	if n, err := s.durablePart(ctx, batch); err != nil || n != 1 {
		t.Fatalf("durablePart of [durable, not, not] = %d, %v; want 1 at once", n, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if n, err := s.durablePart(cancelled, batch[1:]); err == nil {
		t.Fatalf("durablePart of events no fsync covers = %d without waiting, want a wait", n)
	}

	// Through Follow: the first event is folded while the fsync of the
	// other two is held back, and they follow once it ends.
	var mu sync.Mutex
	var got []uint64
	notDurable := 0
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(fctx, 0, func(b []kernel.Recorded) error {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range b {
				if r.Seq > s.DurableSeq() {
					notDurable++
				}
				got = append(got, r.Seq)
			}
			return nil
		})
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	checkfor.Until(t, 10*time.Second, "the durable event handed over while the next fsync is held", func() bool { return count() >= 1 })
	if c := count(); c != 1 {
		t.Fatalf("Follow handed over %d events while the fsync was held, want only the durable one", c)
	}
	held = false
	g.fmu.Unlock()
	checkfor.Until(t, 10*time.Second, "the other two once the fsync ends", func() bool { return count() >= 3 })
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]uint64{batch[0].Seq, batch[1].Seq, batch[2].Seq}, got); diff != "" || notDurable != 0 {
		t.Errorf("Follow handed over (-want +got):\n%s\n%d of them before they were durable", diff, notDurable)
	}
}
