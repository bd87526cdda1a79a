package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// stagedLedger is a real Store whose appends of project p2 stop until
// release2 is closed while hold2 is set, and whose reads of project p1 fail
// (failReads) or stop until releaseRead is closed (holdReads), as armed.
type stagedLedger struct {
	*ledger.Store

	mu          sync.Mutex
	hold2       bool
	held2       chan struct{} // closed once a held append of p2 has entered
	release2    chan struct{}
	failReads   int // reads of p1 to fail, then
	holdReads   bool
	heldRead    chan struct{} // closed once a held read of p1 has entered
	releaseRead chan struct{}
}

func (l *stagedLedger) AppendAsync(ctx context.Context, project string, expectLast uint64, e kernel.Event) (uint64, <-chan struct{}, func() error, error) {
	l.mu.Lock()
	hold := project == "p2" && l.hold2
	if hold {
		l.hold2 = false
		close(l.held2)
	}
	l.mu.Unlock()
	if hold {
		<-l.release2
	}
	return l.Store.AppendAsync(ctx, project, expectLast, e)
}

func (l *stagedLedger) ReadProject(ctx context.Context, project string, after uint64, fn func(kernel.Recorded) error) (uint64, error) {
	l.mu.Lock()
	fail, hold := false, false
	if project == "p1" {
		switch {
		case l.failReads > 0:
			l.failReads--
			fail = true
		case l.holdReads:
			l.holdReads = false
			hold = true
			close(l.heldRead)
		}
	}
	l.mu.Unlock()
	if fail {
		return 0, errors.New("staged: the read fails")
	}
	if hold {
		<-l.releaseRead
	}
	return l.Store.ReadProject(ctx, project, after, fn)
}

// TestAProjectReloadingHoldsUpNoOtherProject: where the ledger pipelines,
// a command of p1 that finds p1's state emptied (a refused append, then a
// catch-up that failed) waits for p1's load without holding the engine's
// order lock, so that the commands of p2 go on while p1 loads.
func TestAProjectReloadingHoldsUpNoOtherProject(t *testing.T) {
	emb := startEmbedded(t, false)
	_, store, err := emb.Open(t.Context(), ledger.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	l := &stagedLedger{Store: store, held2: make(chan struct{}), release2: make(chan struct{}),
		heldRead: make(chan struct{}), releaseRead: make(chan struct{})}
	e, err := engine.New(l, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"p1", "p2"} {
		if err := registerIn(t.Context(), e, p, "w"); err != nil {
			t.Fatal(err)
		}
	}
	// Another writer appends behind the Store's back: p1's next append is
	// refused, and p1's state is to be folded again.
	appendBehindItsBack(t, emb, "p9")
	if err := registerIn(t.Context(), e, "p1", "a"); kernel.ErrorKind(err) != kernel.Unavailable {
		t.Fatalf("p1's command after another writer's append = %v, want %s", err, kernel.Unavailable)
	}

	// A command of p2 holds the order lock, stopped in its append; d, of
	// p1, queues for the order lock behind it, and c, of p1, waits for d.
	l.mu.Lock()
	l.hold2 = true
	l.mu.Unlock()
	errs := make(chan error, 3)
	go func() { errs <- registerIn(t.Context(), e, "p2", "x") }()
	<-l.held2
	l.mu.Lock()
	l.failReads, l.holdReads = 1, true // d's catch-up fails; the load after it stops
	l.mu.Unlock()
	go func() { errs <- registerIn(t.Context(), e, "p1", "d") }()
	time.Sleep(100 * time.Millisecond)
	go func() { errs <- registerIn(t.Context(), e, "p1", "c") }()
	time.Sleep(100 * time.Millisecond)
	close(l.release2)
	<-l.heldRead // p1 loads again, and its load is stopped

	// p2's commands go on meanwhile.
	y := make(chan error, 1)
	go func() { y <- registerIn(t.Context(), e, "p2", "y") }()
	select {
	case err := <-y:
		if err != nil {
			t.Errorf("p2's command while p1 loads = %v, want it done", err)
		}
		y = nil
	case <-time.After(5 * time.Second):
		t.Errorf("p2's command waited 5 s for p1's load, want it done meanwhile")
	}
	close(l.releaseRead)
	if y != nil {
		<-y
	}
	failed := 0
	for range 3 {
		if err := <-errs; err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d of x, d and c failed, want one (d, whose catch-up failed)", failed)
	}
}
