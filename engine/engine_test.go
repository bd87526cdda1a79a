package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/internal/testclock"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// newEngines starts n engines, each over its own connection and ledger Store,
// on one embedded NATS server: n service instances that share only NATS.
func newEngines(t *testing.T, n int) ([]*engine.Engine, *ledger.Store) {
	t.Helper()
	return newEnginesWith(t, n, func(*engine.Config) {})
}

// newEnginesWith is newEngines with the engines' configuration changed by
// set.
func newEnginesWith(t *testing.T, n int, set func(*engine.Config)) ([]*engine.Engine, *ledger.Store) {
	t.Helper()
	srv := natstest.Start(t)
	var engines []*engine.Engine
	var first *ledger.Store
	for i := 0; i < n; i++ {
		cfg := ledger.DefaultConfig()
		cfg.Storage = ledger.MemoryStorage
		l, err := ledger.Open(context.Background(), natstest.Connect(t, srv), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = l
		}
		kcfg := engine.DefaultConfig()
		kcfg.MaxAttempts = 1000
		set(&kcfg)
		e, err := engine.New(l, kcfg)
		if err != nil {
			t.Fatal(err)
		}
		engines = append(engines, e)
	}
	return engines, first
}

var admin = kernel.Common{Caller: kernel.Caller{Admin: true}}

func register(t *testing.T, e *engine.Engine, id string, capacity int) {
	t.Helper()
	_, err := e.Execute(t.Context(), "p1", kernel.RegisterAgent{Common: admin, Spec: kernel.AgentSpec{
		AgentID: id, Role: "worker", Enabled: true, AcceptsWork: true, Capacity: capacity, PublicMetadata: json.RawMessage(`{}`),
	}, Provenance: kernel.Provenance{Kind: "test"}})
	if err != nil {
		t.Fatal(err)
	}
}

func dispatch(e *engine.Engine, key string) (engine.DispatchResult, error) {
	return e.Dispatch(context.Background(), "p1", kernel.Dispatch{Common: admin,
		RequestedBy: kernel.AgentRef{ProjectID: "p1", AgentID: "req"}, TargetAgent: kernel.AgentRef{ProjectID: "p1", AgentID: "worker"},
		Input: json.RawMessage(`{}`), TurnKind: "k", DispatchKey: key, Mode: kernel.AuthorityRoot, RequestID: key})
}

// TestTwoEnginesRace runs two engines on one NATS server against the same
// project at once. The per-project expectation must make them serialise:
// every Turn is claimed exactly once, capacity holds, and a dispatch key
// raced from both sides makes one Turn.
func TestTwoEnginesRace(t *testing.T) {
	engines, l := newEngines(t, 2)
	register(t, engines[0], "req", 1)
	const turns, capacity = 40, 25
	register(t, engines[1], "worker", capacity)

	// Dispatch from both engines at once, half of the keys raced by both.
	var wg sync.WaitGroup
	ids := make([][]string, 2)
	for i, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < turns; k++ {
				key := fmt.Sprintf("own-%d-%d", i, k)
				if k%2 == 0 {
					key = fmt.Sprintf("shared-%d", k)
				}
				res, err := dispatch(e, key)
				if err != nil {
					t.Errorf("engine %d dispatch %s: %v", i, key, err)
					return
				}
				ids[i] = append(ids[i], res.TurnID)
			}
		}()
	}
	wg.Wait()
	for k := 0; k < turns; k += 2 {
		if ids[0][k] != ids[1][k] {
			t.Fatalf("shared key %d made two turns: %s and %s", k, ids[0][k], ids[1][k])
		}
	}

	// Claim from both engines at once until nothing is left to claim.
	worker := kernel.Common{Caller: kernel.Caller{Admin: true}}
	claimedBy := make([]map[string]bool, 2)
	for i, e := range engines {
		claimedBy[i] = map[string]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, _, err := e.Claim(context.Background(), "p1", worker, "worker", nil)
				if err != nil {
					t.Errorf("engine %d claim: %v", i, err)
					return
				}
				if res == nil {
					return
				}
				claimedBy[i][res.TurnID] = true
			}
		}()
	}
	wg.Wait()
	total := len(claimedBy[0]) + len(claimedBy[1])
	if total != capacity {
		t.Fatalf("claimed %d turns in all, want exactly the capacity %d", total, capacity)
	}
	for id := range claimedBy[0] {
		if claimedBy[1][id] {
			t.Fatalf("turn %s was claimed by both engines", id)
		}
	}

	// The ledger agrees: one claim event per claimed Turn, and the
	// project's events are in strictly increasing ledger order.
	claims := map[string]int{}
	var last uint64
	if _, err := l.ReadProject(t.Context(), "p1", 0, func(r kernel.Recorded) error {
		if r.Seq <= last {
			t.Errorf("ledger_seq %d after %d", r.Seq, last)
		}
		last = r.Seq
		if r.Event.Type == kernel.EvTurnClaimed {
			claims[r.Event.ID]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(claims) != capacity {
		t.Errorf("ledger has claims of %d turns, want %d", len(claims), capacity)
	}
	for id, n := range claims {
		if n != 1 {
			t.Errorf("turn %s has %d claim events", id, n)
		}
	}
}

// TestEngineCatchesUpOnAuthenticate shows that a credential revoked through
// one engine is refused by another on its very next authentication.
func TestEngineCatchesUpOnAuthenticate(t *testing.T) {
	engines, _ := newEngines(t, 2)
	register(t, engines[0], "worker", 1)
	cred, err := engines[0].IssueCredential(t.Context(), "p1", admin, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engines[1].Authenticate(t.Context(), "p1", "worker", cred.Token); err != nil {
		t.Fatalf("engine 1 Authenticate = %v, want success", err)
	}
	if _, err := engines[0].Execute(t.Context(), "p1", kernel.RevokeCredential{Common: admin, AgentID: "worker", CredentialID: cred.CredentialID}); err != nil {
		t.Fatal(err)
	}
	if _, err := engines[1].Authenticate(t.Context(), "p1", "worker", cred.Token); kernel.ErrorKind(err) != kernel.Unauthorized {
		t.Fatalf("engine 1 Authenticate after revoke on engine 0 = %v, want %s", err, kernel.Unauthorized)
	}
}

// TestEngineRefusesBadProjectIDs keeps unsafe ids away from NATS subjects.
func TestEngineRefusesBadProjectIDs(t *testing.T) {
	engines, _ := newEngines(t, 1)
	for _, p := range []string{"a.b", "*", ">", "a b", ""} {
		_, err := engines[0].Execute(t.Context(), p, kernel.Heartbeat{Common: admin, AgentID: "x"})
		if kernel.ErrorKind(err) != kernel.Validation {
			t.Errorf("Execute in project %q = %v, want %s", p, err, kernel.Validation)
		}
	}
}

// TestEngineKeepsNoStateForEmptyProjects: requests that name projects with no
// events (made-up ones, in failed logins or redemptions) leave nothing behind.
func TestEngineKeepsNoStateForEmptyProjects(t *testing.T) {
	engines, _ := newEngines(t, 1)
	e := engines[0]
	register(t, e, "worker", 1)
	for i := 0; i < 50; i++ {
		if _, err := e.Authenticate(t.Context(), fmt.Sprintf("bogus%d", i), "agent", "tla_x"); kernel.ErrorKind(err) != kernel.Unauthorized {
			t.Fatalf("Authenticate in a made-up project = %v, want %s", err, kernel.Unauthorized)
		}
		if _, err := e.RedeemInvite(t.Context(), fmt.Sprintf("tlj.bogus%d.x", i)); kernel.ErrorKind(err) != kernel.Unauthorized {
			t.Fatalf("RedeemInvite in a made-up project = %v, want %s", err, kernel.Unauthorized)
		}
	}
	if got := e.Projects(); len(got) != 1 || got[0] != "p1" {
		t.Errorf("Projects() = %v, want [p1]", got)
	}
}

// BenchmarkEngineExecute measures one command through the engine — decide,
// append with the per-project expectation, evolve — without the HTTP layer
// or the wait for the projections: the cost to compare with one JetStream
// publish (ledger's BenchmarkAppend).
func BenchmarkEngineExecute(b *testing.B) {
	srv := natstest.Start(b)
	cfg := ledger.DefaultConfig()
	cfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(context.Background(), natstest.Connect(b, srv), cfg)
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.New(l, engine.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Execute(ctx, "p1", kernel.RegisterAgent{Common: admin, Spec: kernel.AgentSpec{
		AgentID: "w", Role: "worker", Enabled: true, AcceptsWork: true, Capacity: 1, PublicMetadata: json.RawMessage(`{}`),
	}, Provenance: kernel.Provenance{Kind: "bench"}}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Execute(ctx, "p1", kernel.Heartbeat{Common: admin, AgentID: "w"}); err != nil {
			b.Fatal(err)
		}
	}
}

// Turn ids sort by the engine's clock, so that the projections keep the
// Turns live at once side by side; ids drawn in one millisecond still
// differ, and the id is 32 hex digits after "turn_" as before.
func TestTurnIDsSortByTime(t *testing.T) {
	clock := &testclock.Offset{}
	engines, _ := newEnginesWith(t, 1, func(c *engine.Config) { c.Now = clock.Now })
	e := engines[0]
	register(t, e, "worker", 6)
	register(t, e, "req", 1)
	var ids []string
	for i := range 6 {
		res, err := dispatch(e, fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^turn_[0-9a-f]{32}$`).MatchString(res.TurnID) {
			t.Fatalf("Turn id %q, want turn_ and 32 hex digits", res.TurnID)
		}
		ids = append(ids, res.TurnID)
		if i%2 == 1 {
			clock.Advance(time.Millisecond)
		}
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Fatalf("two Turns got the id %s", ids[i])
		}
		if i%2 == 0 && ids[i] <= ids[i-1] {
			t.Errorf("Turn id %s, drawn a millisecond after %s, sorts before it", ids[i], ids[i-1])
		}
	}
}
