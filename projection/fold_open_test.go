package projection

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/kernel"
)

// openClocked opens a store whose clock the test moves, with a commit
// interval of 2 ms.
func openClocked(t *testing.T, now *time.Time) (*Store, string) {
	t.Helper()
	cfg := testConfig()
	cfg.CommitInterval = 2 * time.Millisecond
	cfg.Now = func() time.Time { return *now }
	return openWith(t, cfg)
}

func mustFold(t *testing.T, s *Store, batch ...kernel.Recorded) {
	t.Helper()
	if err := s.Fold(batch); err != nil {
		t.Fatalf("Fold(%d events) = %v", len(batch), err)
	}
}

// The projector's transaction stays open across batches: a batch's Turns
// are answered (TurnAt) once it is folded, and read (Turn, WaitFor) once
// it commits, which it does at the first fold after the commit interval, on
// Commit, or on Close (CaughtUp and reads: TestCaughtUpCommitsWhenSomeoneWaits). What it commits is what
// one Apply of every event makes.
func TestFoldCommitsAfterTheIntervalOrWhenTold(t *testing.T) {
	l := newEvents()
	l.register("w", "worker", 2)
	l.register("r", "lead", 1)
	l.dispatch("t1", "w", "r", "code")
	l.dispatch("t2", "w", "r", "code")
	now := t0
	s, path := openClocked(t, &now)

	mustFold(t, s, l.recs...)
	dispatched := l.seq
	if v, err := s.TurnAt(t.Context(), proj, "t2", dispatched); err != nil || v.State != kernel.StateQueued {
		t.Fatalf("TurnAt(t2) once folded = state %q, %v; want queued", v.State, err)
	}
	if _, err := s.Turn(proj, "t1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Turn(t1) before the commit = %v, want ErrNotFound", err)
	}
	now = now.Add(time.Millisecond) // within the interval: still open
	c1 := l.claim("t1", "w", "c1")
	mustFold(t, s, c1)
	if cp := s.Checkpoint(); cp != 0 {
		t.Errorf("Checkpoint() 1 ms into the transaction = %d, want 0", cp)
	}
	if v, err := s.TurnAt(t.Context(), proj, "t1", c1.Seq); err != nil || v.State != kernel.StateClaimed {
		t.Errorf("TurnAt(t1) = state %q, %v; want claimed", v.State, err)
	}

	now = now.Add(time.Millisecond) // the interval has passed at this fold
	c2 := l.claim("t2", "w", "c2")
	mustFold(t, s, c2)
	if cp := s.Checkpoint(); cp != c2.Seq {
		t.Fatalf("Checkpoint() after a fold 2 ms into the transaction = %d, want %d", cp, c2.Seq)
	}
	if v, err := s.Turn(proj, "t1"); err != nil || v.State != kernel.StateClaimed {
		t.Errorf("Turn(t1) after the commit = state %q, %v; want claimed", v.State, err)
	}

	rec := l.record("t1", "w", "c1", 1, "note", `{"n":1}`)
	mustFold(t, s, rec) // a new transaction, with the clock standing still
	if cp := s.Checkpoint(); cp != c2.Seq {
		t.Errorf("Checkpoint() after a fold in a new transaction = %d, want %d", cp, c2.Seq)
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(t.Context(), rec.Seq); err != nil {
		t.Errorf("WaitFor(%d) after Commit = %v", rec.Seq, err)
	}

	mustFold(t, s, l.finish("t1", "w", "c1", "succeeded", `{"ok":true}`, 2))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(path, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if cp := reopened.Checkpoint(); cp != l.seq {
		t.Errorf("Checkpoint() after Close with a fold open = %d, want %d", cp, l.seq)
	}
	if diff := cmp.Diff(mustDump(t, applied(t, l)), mustDump(t, reopened)); diff != "" {
		t.Errorf("folded over four transactions, the file differs from one Apply of every event (-Apply +Fold):\n%s", diff)
	}
}

// CaughtUp (the source has nothing more on its way) commits what is folded
// only when someone waits for it — a read of a ledger_seq folded, or a
// watch of a long poll or push feed — or the commit interval has passed;
// otherwise the interval's timer commits it. A read that comes later
// commits it itself. Commands are answered from the fold, so a ledger whose
// clients only send commands commits once an interval, not at every lull.
func TestCaughtUpCommitsWhenSomeoneWaits(t *testing.T) {
	l := newEvents()
	l.register("w", "worker", 2)
	l.register("r", "lead", 1)
	now := t0
	cfg := testConfig()
	cfg.CommitInterval = time.Second // the timer does not fire within this part
	cfg.Now = func() time.Time { return now }
	s, _ := openWith(t, cfg)

	mustFold(t, s, l.recs...)
	if err := s.CaughtUp(); err != nil {
		t.Fatal(err)
	}
	if cp := s.Checkpoint(); cp != 0 {
		t.Fatalf("Checkpoint() after CaughtUp with nobody waiting = %d, want 0 (left open)", cp)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, l.seq); err != nil {
		t.Fatalf("WaitFor(%d) of a folded event = %v, want it committed for the read", l.seq, err)
	}
	if cp := s.Checkpoint(); cp != l.seq {
		t.Errorf("Checkpoint() after the read = %d, want %d", cp, l.seq)
	}

	// A long poll watching the agent: CaughtUp commits at once and wakes it.
	changed, stop := s.WatchAgent(proj, "w")
	d := l.dispatch("t1", "w", "r", "code")
	mustFold(t, s, d)
	if err := s.CaughtUp(); err != nil {
		t.Fatal(err)
	}
	if cp := s.Checkpoint(); cp != d.Seq {
		t.Errorf("Checkpoint() after CaughtUp with a watch waiting = %d, want %d", cp, d.Seq)
	}
	select {
	case <-changed:
	default:
		t.Error("the agent's watch was not woken by the dispatch's commit")
	}
	stop()

	// A read waiting before its event is folded: the fold that reaches it
	// commits, without waiting for CaughtUp or the interval.
	c := l.claim("t1", "w", "c1")
	read := make(chan error, 1)
	go func() { read <- s.WaitFor(ctx, c.Seq) }()
	checkfor.Until(t, 10*time.Second, "the read waiting", func() bool { return s.readWaiting(c.Seq) })
	mustFold(t, s, c)
	if err := <-read; err != nil || s.Checkpoint() != c.Seq {
		t.Errorf("a read waiting for the claim = %v, checkpoint %d; want it committed by the fold (%d)", err, s.Checkpoint(), c.Seq)
	}

	// Nobody waiting, and the interval runs out: its timer commits.
	now2 := t0
	quick, _ := openClocked(t, &now2)
	mustFold(t, quick, l.recs...)
	if err := quick.CaughtUp(); err != nil {
		t.Fatal(err)
	}
	checkfor.Until(t, 10*time.Second, "the interval's commit", func() bool { return quick.Checkpoint() == l.seq })
	if diff := cmp.Diff(mustDump(t, applied(t, l)), mustDump(t, quick)); diff != "" {
		t.Errorf("committed by the timer, the file differs from one Apply of every event (-Apply +Fold):\n%s", diff)
	}
}

// A commit made for a read that fails rolls back what the projector had
// folded: the projector's next call says so, and it follows again from the
// checkpoint, so that those events are folded again rather than skipped.
func TestFailedCommitForAReadStartsTheProjectorOver(t *testing.T) {
	cfg := testConfig()
	cfg.CommitInterval = time.Second
	s, _ := openWith(t, cfg)
	l := dispatchLeftOpen(t, s)
	if err := s.CaughtUp(); err != nil {
		t.Fatal(err)
	}
	s.beforeCommit = func() error { return errors.New("disk full") }
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := s.WaitFor(ctx, l.recs[2].Seq); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFor whose commit failed = %v, want it to wait", err)
	}
	s.beforeCommit = nil
	c := l.claim("t1", "w", "c1")
	if err := s.Fold([]kernel.Recorded{c}); !errors.Is(err, errAborted) {
		t.Fatalf("the projector's next Fold after the read's failed commit = %v, want errAborted", err)
	}
	foldedAgainAsApplied(t, s, l)
}

// dispatchLeftOpen folds two registrations into s and commits them, then
// folds a dispatch into a transaction left open: what a failure in the
// tests below takes back. It returns the events.
func dispatchLeftOpen(t *testing.T, s *Store) *events {
	t.Helper()
	l := newEvents()
	l.register("w", "worker", 1)
	l.register("r", "lead", 1)
	l.dispatch("t1", "w", "r", "code")
	mustFold(t, s, l.recs[:2]...)
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	mustFold(t, s, l.recs[2])
	return l
}

// foldedAgainAsApplied checks that s is back at the registrations' commit
// after a failure took the dispatchLeftOpen's transaction back, and that
// the events it folds again from there leave the file one Apply of every
// event makes.
func foldedAgainAsApplied(t *testing.T, s *Store, l *events) {
	t.Helper()
	if cp := s.Checkpoint(); cp != l.recs[1].Seq {
		t.Errorf("Checkpoint() = %d, want the last commit's %d", cp, l.recs[1].Seq)
	}
	mustFold(t, s, l.recs[2:]...)
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(mustDump(t, applied(t, l)), mustDump(t, s)); diff != "" {
		t.Errorf("folded again from the checkpoint, the file differs from one Apply of every event (-Apply +Fold):\n%s", diff)
	}
}

// A fold that fails takes back every event folded since the last commit:
// their answers wait again, and the same events fold again from the
// checkpoint into the same rows.
func TestFoldFailureTakesBackTheOpenTransaction(t *testing.T) {
	now := t0
	s, _ := openClocked(t, &now)
	l := dispatchLeftOpen(t, s)
	c := l.claim("t1", "w", "c1")
	if err := s.Fold([]kernel.Recorded{c, l.recs[2]}); err == nil {
		t.Fatal("Fold of a batch out of order = nil, want an error")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.TurnAt(ctx, proj, "t1", l.recs[2].Seq); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("TurnAt(t1) of an event folded before the failure = %v, want it to wait", err)
	}
	foldedAgainAsApplied(t, s, l)
}

// Each waiter wakes once its own ledger_seq is folded, not before, whatever
// the order they came in.
func TestWaitersWakeAtTheirOwnSeq(t *testing.T) {
	l := newEvents()
	for _, id := range []string{"a", "b", "c", "d"} {
		l.register(id, "worker", 1)
	}
	now := t0
	s, _ := openClocked(t, &now)
	woke := make(chan uint64, 4)
	for _, seq := range []uint64{3, 1, 4, 2} {
		go func() {
			if err := s.WaitFolded(t.Context(), seq); err == nil {
				woke <- seq
			}
		}()
	}
	checkfor.Until(t, 5*time.Second, "four waiters", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.foldedGate.ws) == 4
	})
	for _, r := range l.recs {
		mustFold(t, s, r)
		select {
		case got := <-woke:
			if got != r.Seq {
				t.Fatalf("folded up to %d, and the waiter of %d woke", r.Seq, got)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("folded up to %d, and its waiter did not wake", r.Seq)
		}
	}
}
