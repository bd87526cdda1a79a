package projection

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

// A command's answer may show its Turn (TurnAt), or return (WaitFolded),
// once the batch is folded, before the batch's commit; everything else waits
// for the commit; a failed commit takes the answer back until the batch is
// folded again.
func TestTurnAtAnswersBeforeTheCommit(t *testing.T) {
	l := newEvents()
	l.register("w", "worker", 1)
	l.register("r", "lead", 1)
	l.dispatch("t1", "w", "r", "code")
	l.dispatch("t2", "w", "r", "code")
	s, _ := openStore(t)
	mustApply(t, s, l.recs)
	committed := l.seq
	t2, err := s.Turn(proj, "t2")
	if err != nil {
		t.Fatal(err)
	}

	claim := l.claim("t1", "w", "c1")
	folded := make(chan struct{})
	release := make(chan error)
	s.beforeCommit = func() error {
		close(folded)
		return <-release
	}
	applied := make(chan error)
	go func() { applied <- s.Apply(l.recs[committed:]) }()
	<-folded

	v, err := s.TurnAt(t.Context(), proj, "t1", claim.Seq)
	if err != nil || v.State != "claimed" {
		t.Fatalf("TurnAt(t1, %d) before the commit = state %q, %v; want claimed", claim.Seq, v.State, err)
	}
	if cp := s.Checkpoint(); cp != committed {
		t.Fatalf("Checkpoint() while the batch commits = %d, want %d", cp, committed)
	}
	if v, err := s.TurnAt(t.Context(), proj, "t2", claim.Seq); err != nil || !cmp.Equal(v, t2) {
		t.Errorf("TurnAt(t2, %d) of a Turn the batch left alone = %+v, %v; want the committed %+v", claim.Seq, v, err, t2)
	}
	if err := s.WaitFolded(t.Context(), claim.Seq); err != nil {
		t.Errorf("WaitFolded(%d) before the commit = %v, want nil", claim.Seq, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := s.WaitFor(ctx, claim.Seq); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFor(%d) before the commit = %v, want it to wait", claim.Seq, err)
	}

	// The commit fails: the answer is taken back.
	release <- errors.New("disk full")
	if err := <-applied; err == nil {
		t.Fatal("Apply with a failing commit = nil, want its error")
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	if _, err := s.TurnAt(ctx2, proj, "t1", claim.Seq); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("TurnAt(t1, %d) after the failed commit = %v, want it to wait", claim.Seq, err)
	}
	ctx3, cancel3 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel3()
	if err := s.WaitFolded(ctx3, claim.Seq); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFolded(%d) after the failed commit = %v, want it to wait", claim.Seq, err)
	}

	// Folded and committed again: both agree.
	s.beforeCommit = nil
	mustApply(t, s, l.recs[committed:])
	v, err = s.TurnAt(t.Context(), proj, "t1", claim.Seq)
	if err != nil || v.State != "claimed" {
		t.Fatalf("TurnAt(t1, %d) after the commit = state %q, %v; want claimed", claim.Seq, v.State, err)
	}
	if w, err := s.Turn(proj, "t1"); err != nil || !cmp.Equal(v, w) {
		t.Errorf("TurnAt(t1) = %+v, Turn(t1) = %+v, %v; want them equal", v, w, err)
	}
}

// The views TurnAt answers from stay published after their batch commits,
// with those of the batch before: across batches of every size, each Turn's
// answer is the Turn as the file holds it, whether it comes from the last
// batch, the one before, or the file.
func TestTurnAtAgreesWithTheFileAcrossBatches(t *testing.T) {
	l := newEvents()
	l.register("w", "worker", 4)
	l.register("r", "lead", 1)
	turns := []string{"t1", "t2", "t3", "t4"}
	for _, id := range turns {
		l.dispatch(id, "w", "r", "code")
	}
	s, _ := openStore(t)
	mustApply(t, s, l.recs)
	applied := uint64(len(l.recs))
	l.claim("t1", "w", "c1")
	l.claim("t2", "w", "c2")
	l.record("t1", "w", "c1", 1, "note", `{"n":1}`)
	l.finish("t1", "w", "c1", "succeeded", `{"done":true}`, 2)
	l.turnEvent(kernel.EvTurnStopRequested, "t3", agent("r"), &kernel.TurnStopRequested{})
	l.record("t2", "w", "c2", 1, "note", `{"n":2}`)
	l.finish("t2", "w", "c2", "failed", "", 1)
	for _, size := range []int{1, 3, 1, 2} {
		batch := l.recs[applied : int(applied)+size]
		mustApply(t, s, batch)
		applied += uint64(size)
		for _, id := range turns {
			got, err := s.TurnAt(t.Context(), proj, id, batch[len(batch)-1].Seq)
			if err != nil {
				t.Fatalf("TurnAt(%s) after %d events = %v", id, applied, err)
			}
			want, err := s.Turn(proj, id)
			if err != nil {
				t.Fatalf("Turn(%s) = %v", id, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("after %d events, TurnAt(%s) differs from the file (-file +TurnAt):\n%s", applied, id, diff)
			}
		}
	}
	if applied != uint64(len(l.recs)) {
		t.Fatalf("applied %d of %d events", applied, len(l.recs))
	}
}

// splitKey gives back the parts of a key, zero bytes included: the Turn
// views take their project from their key.
func TestSplitKey(t *testing.T) {
	for _, parts := range [][]string{{"p1", "t1"}, {"", "t"}, {"a\x00b", "turn\x00id"}, {"\x00", "x\x00\x00y"}} {
		if got := splitKey(key(parts...)); !cmp.Equal(got, parts) {
			t.Errorf("splitKey(key(%q)) = %q", parts, got)
		}
	}
}

// An answer that shows nothing of the projections, or the engine's Turn
// (Answer with a Turn), waits only for the projector to come within
// AnswerLag of its event; the view it shows is ViewOf the Turn given.
func TestAnswersWaitForTheProjectorOnlyPastTheLag(t *testing.T) {
	l := newEvents()
	l.register("w", "worker", 1)
	l.register("r", "lead", 1)
	d := l.dispatch("t1", "w", "r", "code")
	s, _ := openStore(t)
	mustApply(t, s, l.recs)
	folded := l.seq
	gone, cancel := context.WithCancel(t.Context())
	cancel() // a wait that would block answers context.Canceled at once

	if err := s.WaitNear(gone, folded+AnswerLag); err != nil {
		t.Errorf("WaitNear(%d) with ledger_seq %d folded = %v, want nil", folded+AnswerLag, folded, err)
	}
	if err := s.WaitNear(gone, folded+AnswerLag+1); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitNear(%d) with ledger_seq %d folded = %v, want it to wait", folded+AnswerLag+1, folded, err)
	}

	turn := kernel.EvolveTurn(nil, d)
	v, err := s.Answer(gone, proj, "t1", folded+AnswerLag, turn)
	if err != nil || !cmp.Equal(v, ViewOf(proj, turn)) {
		t.Errorf("Answer with the engine's Turn = %+v, %v; want its view", v, err)
	}
	if _, err := s.Answer(gone, proj, "t1", folded+AnswerLag+1, turn); !errors.Is(err, context.Canceled) {
		t.Errorf("Answer with the engine's Turn past the lag = %v, want it to wait", err)
	}
	if _, err := s.Answer(gone, proj, "t1", folded+1, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Answer without a Turn of a ledger_seq not folded = %v, want it to wait for the fold", err)
	}
	read, err := s.Answer(gone, proj, "t1", folded, nil)
	if err != nil || !cmp.Equal(read, ViewOf(proj, turn)) {
		t.Errorf("Answer without a Turn = %+v, %v; want the projections' view, %+v", read, err, ViewOf(proj, turn))
	}
}
