package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/kernel"
)

// failingLedger fails the next Append as Unavailable, as a full disk
// would, and otherwise passes through.
type failingLedger struct {
	engine.Ledger
	mu   sync.Mutex
	fail bool
}

func (l *failingLedger) Append(ctx context.Context, project string, expectLast uint64, e kernel.Event) (uint64, error) {
	l.mu.Lock()
	fail := l.fail
	l.fail = false
	l.mu.Unlock()
	if fail {
		return 0, fmt.Errorf("test: disk full: %w", kernel.Errorf(kernel.Unavailable, "disk full"))
	}
	return l.Ledger.Append(ctx, project, expectLast, e)
}

func keyed(key, body string) kernel.Common {
	c := admin
	c.Idem = &kernel.Idempotency{Ref: kernel.HashSecret(key), Request: kernel.HashSecret(body)}
	return c
}

// TestFailedCommandIsNotRemembered: an outage is never replayed; the retry
// with the same key is decided afresh, and only then remembered.
func TestFailedCommandIsNotRemembered(t *testing.T) {
	engines, l := newEngines(t, 1)
	register(t, engines[0], "worker", 1)
	fl := &failingLedger{Ledger: l, fail: true}
	e, err := engine.New(fl, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	hb := kernel.Heartbeat{Common: keyed("k", "{}"), AgentID: "worker"}
	if _, err := e.Execute(t.Context(), "p1", hb); kernel.ErrorKind(err) != kernel.Unavailable {
		t.Fatalf("Execute on a failing ledger = %v, want Unavailable", err)
	}
	before, _ := l.LastSeq(t.Context(), "p1")
	seq, err := e.Execute(t.Context(), "p1", hb)
	if err != nil || seq != before+1 {
		t.Fatalf("retry after the outage = %d, %v; want it applied at %d", seq, err, before+1)
	}
	again, err := e.Execute(t.Context(), "p1", hb)
	if err != nil || again != seq {
		t.Errorf("second retry = %d, %v; want the first answer %d", again, err, seq)
	}
	if last, _ := l.LastSeq(t.Context(), "p1"); last != seq {
		t.Errorf("ledger ends at %d, want %d: a retry appended", last, seq)
	}
	other := kernel.Heartbeat{Common: keyed("k", `{"x":1}`), AgentID: "worker"}
	if _, err := e.Execute(t.Context(), "p1", other); kernel.ErrorKind(err) != kernel.Validation {
		t.Errorf("same key, other body = %v, want a ValidationError", err)
	}
}

// TestConcurrentRetriesAcrossEnginesAppendOnce: the same keyed command sent
// at once through two engines (two instances) appends one event.
func TestConcurrentRetriesAcrossEnginesAppendOnce(t *testing.T) {
	engines, l := newEngines(t, 2)
	register(t, engines[0], "worker", 1)
	before, _ := l.LastSeq(t.Context(), "p1")
	var wg sync.WaitGroup
	seqs := make([]uint64, 8)
	for i := range seqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq, err := engines[i%2].Execute(context.Background(), "p1", kernel.Heartbeat{Common: keyed("once", "{}"), AgentID: "worker"})
			if err != nil {
				t.Error(err)
			}
			seqs[i] = seq
		}()
	}
	wg.Wait()
	for i, s := range seqs {
		if s != before+1 {
			t.Errorf("request %d answered ledger_seq %d, want %d", i, s, before+1)
		}
	}
	if last, _ := l.LastSeq(t.Context(), "p1"); last != before+1 {
		t.Errorf("ledger ends at %d, want %d: one event", last, before+1)
	}
}

// alwaysStale is a ledger on which every append loses the race.
type alwaysStale struct{ engine.Ledger }

func (alwaysStale) Append(context.Context, string, uint64, kernel.Event) (uint64, error) {
	return 0, kernel.ErrStale
}

// TestLostRacesEndUnavailable: a command whose every attempt loses the race
// to other writers answers Unavailable (503 with Retry-After: nothing was
// appended, a retry is safe), never an internal error.
func TestLostRacesEndUnavailable(t *testing.T) {
	engines, l := newEngines(t, 1)
	register(t, engines[0], "worker", 1)
	cfg := engine.DefaultConfig()
	cfg.MaxAttempts = 3
	e, err := engine.New(alwaysStale{l}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Execute(t.Context(), "p1", kernel.Heartbeat{Common: keyed("k", "{}"), AgentID: "worker"})
	if kernel.ErrorKind(err) != kernel.Unavailable {
		t.Errorf("Execute when every append loses the race = %v, want Unavailable", err)
	}
}

// losesTo is a ledger whose next appends lose the race to another engine,
// which appends first (a registration) each time: a race the catch-up read
// explains.
type losesTo struct {
	engine.Ledger
	other func()
	n     *int
}

func (l losesTo) Append(ctx context.Context, project string, expectLast uint64, e kernel.Event) (uint64, error) {
	if *l.n > 0 {
		*l.n--
		l.other()
		return 0, kernel.ErrStale
	}
	return l.Ledger.Append(ctx, project, expectLast, e)
}

// TestLostRacesToProgressAreRetriedForContendFor: races lost to another
// writer that keeps appending are retried beyond MaxAttempts while
// ContendFor lasts, and the command is appended once a race is won; with no
// time to contend, the first lost race is answered Unavailable.
func TestLostRacesToProgressAreRetriedForContendFor(t *testing.T) {
	engines, l := newEngines(t, 1)
	register(t, engines[0], "worker", 1)
	other := 0
	otherWrites := func() { other++; register(t, engines[0], fmt.Sprintf("other-%d", other), 1) }

	cfg := engine.DefaultConfig()
	cfg.MaxAttempts = 2
	losses := 6
	e, err := engine.New(losesTo{l, otherWrites, &losses}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Execute(t.Context(), "p1", kernel.SetAgentAdmission{Common: admin, AgentID: "worker", Drain: true,
		Agent: &kernel.AgentRef{ProjectID: "p1", AgentID: "worker"}, RequestedBy: kernel.AgentRef{ProjectID: "p1", AgentID: "worker"}}); err != nil {
		t.Fatalf("a command that lost 6 races to a writer making progress (MaxAttempts 2) = %v, want it appended", err)
	}
	if other != 6 || losses != 0 {
		t.Errorf("the other writer appended %d times (%d losses left), want 6 and 0", other, losses)
	}

	cfg.ContendFor = 0
	losses = 1
	e, err = engine.New(losesTo{l, otherWrites, &losses}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Execute(t.Context(), "p1", kernel.SetAgentAdmission{Common: admin, AgentID: "worker", Drain: false,
		Agent: &kernel.AgentRef{ProjectID: "p1", AgentID: "worker"}, RequestedBy: kernel.AgentRef{ProjectID: "p1", AgentID: "worker"}})
	if kernel.ErrorKind(err) != kernel.Unavailable {
		t.Errorf("a lost race with no time to contend = %v, want Unavailable", err)
	}
}
