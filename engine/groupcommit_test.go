package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// startEmbedded starts an embedded server with file storage and no
// listener, committing in groups when groupCommit; it stops when the test
// ends.
func startEmbedded(t *testing.T, groupCommit bool) *ledger.Embedded {
	t.Helper()
	cfg := ledger.DefaultEmbeddedConfig(t.TempDir())
	cfg.GroupCommit = groupCommit
	emb, err := ledger.StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Close() })
	return emb
}

// newGroupEngines starts n engines on one embedded server with file storage
// that commits in groups (serve's --sync always), each over a Store of its
// own opened with Embedded.Open.
func newGroupEngines(t *testing.T, n int) ([]*engine.Engine, []*ledger.Store) {
	t.Helper()
	srv := startEmbedded(t, true)
	var engines []*engine.Engine
	var stores []*ledger.Store
	for range n {
		_, l, err := srv.Open(context.Background(), ledger.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		kcfg := engine.DefaultConfig()
		kcfg.MaxAttempts = 1000
		e, err := engine.New(l, kcfg)
		if err != nil {
			t.Fatal(err)
		}
		engines, stores = append(engines, e), append(stores, l)
	}
	return engines, stores
}

// TestGroupCommitAnswersEveryCommandOfOneProject: two engines on one stream
// run the commands of one project at once, many of them sharing an fsync.
// Each command is answered only once the state it was decided on is durable
// (its own events, and a refusal's grounds); every claim is won once across
// both engines (a lost race is decided again on the caught-up state),
// capacity holds, and a refused finish among them is answered with its
// refusal while the commands beside it succeed.
func TestGroupCommitAnswersEveryCommandOfOneProject(t *testing.T) {
	engines, stores := newGroupEngines(t, 2)
	ctx := context.Background()
	register(t, engines[0], "req", 1)
	const turns, capacity, claimers = 40, 25, 16
	register(t, engines[1], "worker", capacity)

	// durableAt checks that an answer at ledger_seq seq from engine i came
	// after that seq was durable.
	durableAt := func(what string, i int, seq uint64) {
		if d := stores[i].DurableSeq(); d < seq {
			t.Errorf("%s on engine %d answered at ledger_seq %d before it was durable (durable up to %d)", what, i, seq, d)
		}
	}

	var wg sync.WaitGroup
	for k := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := k % 2
			res, err := dispatch(engines[i], fmt.Sprintf("k%d", k))
			if err != nil {
				t.Errorf("dispatch %d: %v", k, err)
				return
			}
			durableAt("dispatch", i, res.Seq)
		}()
	}
	wg.Wait()

	var mu sync.Mutex
	won := map[string]int{}
	var refused, finished int
	for c := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := c % 2
			e := engines[i]
			for {
				res, seq, err := e.Claim(ctx, "p1", admin, "worker", nil)
				if err != nil {
					t.Errorf("claimer %d: %v", c, err)
					return
				}
				durableAt("claim", i, seq)
				if res == nil {
					return // nothing left, or capacity used up: as of a durable state
				}
				mu.Lock()
				won[res.TurnID]++
				mu.Unlock()
				// A finish with a wrong token is refused; the claim stays.
				bad := res.Token
				bad.Token = "tlc_wrong"
				if _, err := e.Fenced(ctx, "p1", kernel.Finish{Common: admin, TurnID: res.TurnID, Claim: bad, Outcome: "succeeded", FinalPayload: json.RawMessage(`{}`), FinalRecordRole: "result"}); kernel.ErrorKind(err) != kernel.Fencing {
					t.Errorf("finish of %s with a wrong token = %v, want %s", res.TurnID, err, kernel.Fencing)
				} else {
					mu.Lock()
					refused++
					mu.Unlock()
				}
				// Every other claim is finished, freeing capacity for another.
				if c%2 == 0 {
					r, err := e.Fenced(ctx, "p1", kernel.Finish{Common: admin, TurnID: res.TurnID, Claim: res.Token, Outcome: "succeeded", FinalPayload: json.RawMessage(`{}`), FinalRecordRole: "result"})
					if err != nil {
						t.Errorf("finish of %s: %v", res.TurnID, err)
						return
					}
					durableAt("finish", i, r.Seq)
					mu.Lock()
					finished++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()

	for id, n := range won {
		if n != 1 {
			t.Errorf("turn %s was claimed %d times", id, n)
		}
	}
	if live := len(won) - finished; live != capacity && len(won) != turns {
		t.Errorf("claimed %d turns, finished %d: %d live, want the capacity %d (or every turn claimed)", len(won), finished, live, capacity)
	}
	if refused != len(won) {
		t.Errorf("%d finishes with a wrong token refused, want one per claim (%d)", refused, len(won))
	}

	// The ledger agrees: one claim event per claimed Turn, none finished by
	// a wrong token.
	claims, finishes := map[string]int{}, 0
	if _, err := stores[0].ReadProject(ctx, "p1", 0, func(r kernel.Recorded) error {
		switch r.Event.Type {
		case kernel.EvTurnClaimed:
			claims[r.Event.ID]++
		case kernel.EvTurnFinished:
			finishes++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(claims) != len(won) || finishes != finished {
		t.Errorf("ledger has claims of %d turns and %d finishes, want %d and %d", len(claims), finishes, len(won), finished)
	}
}

// failingDurable fails Durable as Unavailable while fail is set, as a
// failing fsync would, and otherwise passes through.
type failingDurable struct {
	engine.Ledger
	mu   sync.Mutex
	fail bool
}

func (l *failingDurable) Durable(ctx context.Context, seq uint64) error {
	l.mu.Lock()
	fail := l.fail
	l.mu.Unlock()
	if fail {
		return fmt.Errorf("test: fsync failed: %w", kernel.Errorf(kernel.Unavailable, "fsync failed"))
	}
	return l.Ledger.Durable(ctx, seq)
}

// TestCommandsOfAFailedFsyncAnswerUnavailable: when the fsync that would
// make them durable fails, every command waiting for it (a success and a
// refusal alike) is answered Unavailable, since its event or its grounds
// may not survive a power loss; a retry with the same Idempotency-Key then
// answers the original change, appending nothing more.
func TestCommandsOfAFailedFsyncAnswerUnavailable(t *testing.T) {
	engines, stores := newGroupEngines(t, 1)
	register(t, engines[0], "worker", 1)
	fl := &failingDurable{Ledger: stores[0], fail: true}
	e, err := engine.New(fl, engine.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	before, _ := stores[0].LastSeq(ctx, "p1")
	hb := kernel.Heartbeat{Common: keyed("k", "{}"), AgentID: "worker"}
	if _, err := e.Execute(ctx, "p1", hb); kernel.ErrorKind(err) != kernel.Unavailable {
		t.Fatalf("Execute whose fsync fails = %v, want Unavailable", err)
	}
	// A refusal decided on that state waits for the same fsync.
	if _, err := e.Execute(ctx, "p1", kernel.Heartbeat{Common: admin, AgentID: "nobody"}); kernel.ErrorKind(err) != kernel.Unavailable {
		t.Fatalf("a refusal resting on an event not durable = %v, want Unavailable", err)
	}
	fl.mu.Lock()
	fl.fail = false
	fl.mu.Unlock()
	seq, err := e.Execute(ctx, "p1", hb)
	if err != nil || seq != before+1 {
		t.Fatalf("retry after the failed fsync = %d, %v; want the original change at %d", seq, err, before+1)
	}
	if last, _ := stores[0].LastSeq(ctx, "p1"); last != before+1 {
		t.Errorf("ledger ends at %d, want %d: one event", last, before+1)
	}
	if d := stores[0].DurableSeq(); d < seq {
		t.Errorf("DurableSeq = %d after the retry was answered at %d", d, seq)
	}
	if _, err := e.Execute(ctx, "p1", kernel.Heartbeat{Common: admin, AgentID: "nobody"}); kernel.ErrorKind(err) != kernel.NotFound {
		t.Errorf("the refusal once durable = %v, want %s", err, kernel.NotFound)
	}
}
