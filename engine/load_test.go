package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// gatedLedger is the real ledger whose project reads wait for a gate: it
// holds a project's load open for as long as a test needs.
type gatedLedger struct {
	*ledger.Store
	gate chan struct{}
}

func (g gatedLedger) ReadProject(ctx context.Context, project string, after uint64, fn func(kernel.Recorded) error) (uint64, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return g.Store.ReadProject(ctx, project, after, fn)
}

// TestLoadingAnswersUnavailable: while a project's write model loads, a
// request waits at most LoadWait and is then refused Unavailable (503 with
// Retry-After) without appending anything; once the load ends the same
// request succeeds on the folded state.
func TestLoadingAnswersUnavailable(t *testing.T) {
	srv := natstest.Start(t)
	lcfg := ledger.DefaultConfig()
	lcfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(t.Context(), natstest.Connect(t, srv), lcfg)
	if err != nil {
		t.Fatal(err)
	}
	first, err := engine.New(l, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	register(t, first, "req", 1)
	register(t, first, "worker", 1)

	gate := make(chan struct{})
	cfg := engine.DefaultConfig()
	cfg.LoadWait = 20 * time.Millisecond
	e, err := engine.New(gatedLedger{l, gate}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dispatch(e, "k1")
	if kind := kernel.ErrorKind(err); kind != kernel.Unavailable {
		t.Fatalf("dispatch while loading: %v, want %s", err, kernel.Unavailable)
	}
	if n := e.Loading(); n != 1 {
		t.Errorf("Loading() = %d while the load is held, want 1", n)
	}
	if head, _ := l.LastSeq(t.Context(), "p1"); head != 2 {
		t.Errorf("the refused dispatch appended: last ledger_seq %d, want 2", head)
	}
	close(gate)
	if err := e.Preload(t.Context(), []string{"p1"}); err != nil {
		t.Fatal(err)
	}
	if n := e.Loading(); n != 0 {
		t.Errorf("Loading() = %d after the load, want 0", n)
	}
	res, err := dispatch(e, "k1")
	if err != nil || !res.Created || res.Seq != 3 {
		t.Fatalf("dispatch after loading = %+v, %v; want a new Turn at ledger_seq 3", res, err)
	}
}

// TestLoadFailureIsReported: a load that fails is reported to the request
// waiting for it, and the next request loads again.
func TestLoadFailureIsReported(t *testing.T) {
	srv := natstest.Start(t)
	lcfg := ledger.DefaultConfig()
	lcfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(t.Context(), natstest.Connect(t, srv), lcfg)
	if err != nil {
		t.Fatal(err)
	}
	first, err := engine.New(l, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	register(t, first, "req", 1)
	register(t, first, "worker", 1)
	fail := &failingOnce{Store: l, err: errors.New("read refused")}
	e, err := engine.New(fail, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dispatch(e, "k1"); !errors.Is(err, fail.err) {
		t.Fatalf("dispatch with a failing load: %v, want %v", err, fail.err)
	}
	if res, err := dispatch(e, "k1"); err != nil || !res.Created {
		t.Fatalf("dispatch after the failed load = %+v, %v", res, err)
	}
}

type failingOnce struct {
	*ledger.Store
	err    error
	failed bool
}

func (f *failingOnce) ReadProject(ctx context.Context, project string, after uint64, fn func(kernel.Recorded) error) (uint64, error) {
	if !f.failed {
		f.failed = true
		return 0, f.err
	}
	return f.Store.ReadProject(ctx, project, after, fn)
}
