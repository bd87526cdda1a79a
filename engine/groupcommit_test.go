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

// newGroupEngines starts n engines on one embedded server with file storage
// that commits in groups (serve's --sync always), each over a Store of its
// own opened with Embedded.Open.
func newGroupEngines(t *testing.T, n int) ([]*engine.Engine, []*ledger.Store) {
	t.Helper()
	cfg := ledger.DefaultEmbeddedConfig(t.TempDir())
	cfg.GroupCommit = true
	srv, err := ledger.StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
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
