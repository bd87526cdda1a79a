package engine_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/ledger"
)

type fixedProjects []string

func (p fixedProjects) Projects() ([]string, error) { return p, nil }

// TestReaperReleasesExpiredClaimsOfProjectsNoRequestNamed: an instance that
// never served the project loads it from the lister and releases the claim
// that expired; its status counts it.
func TestReaperReleasesExpiredClaimsOfProjectsNoRequestNamed(t *testing.T) {
	srv := natstest.Start(t)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) // read and moved by this goroutine only
	newEngine := func() *engine.Engine {
		cfg := ledger.DefaultConfig()
		cfg.Storage = ledger.MemoryStorage
		l, err := ledger.Open(context.Background(), natstest.Connect(t, srv), cfg)
		if err != nil {
			t.Fatal(err)
		}
		kcfg := engine.DefaultConfig()
		kcfg.Now = func() time.Time { return now }
		e, err := engine.New(l, kcfg)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := newEngine()
	register(t, a, "req", 1)
	register(t, a, "worker", 1)
	if _, err := dispatch(a, "k1"); err != nil {
		t.Fatal(err)
	}
	if c, _, err := a.Claim(t.Context(), "p1", admin, "worker", nil); err != nil || c == nil {
		t.Fatalf("Claim = %v, %v; want a claim", c, err)
	}
	now = now.Add(2 * time.Minute)

	r := engine.NewReaper(newEngine(), fixedProjects{"p1"}, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if st := r.Status(); !st.Enabled || st.LastRunAt != nil || st.ReleasedTotal != 0 {
		t.Errorf("Status() before a run = %+v, want enabled, never run", st)
	}
	if n := r.Once(t.Context()); n != 1 {
		t.Errorf("Once() = %d, want 1 expired claim released", n)
	}
	if n := r.Once(t.Context()); n != 0 {
		t.Errorf("second Once() = %d, want 0", n)
	}
	st := r.Status()
	if st.ReleasedTotal != 1 || st.LastRunAt == nil || !st.LastRunAt.Equal(now) || st.LastError != "" {
		t.Errorf("Status() = %+v, want 1 released, last run at %s, no error", st, now)
	}
	// A disabled reaper's Run returns at once.
	engine.NewReaper(a, fixedProjects{"p1"}, 0, slog.Default()).Run(t.Context())
}
