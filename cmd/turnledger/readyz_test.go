package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/internal/testclock"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
	"github.com/turnledger/turnledger/serve"
)

// gate holds a projector back: the batches it follows wait while the gate
// is shut.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newGate(open bool) *gate {
	g := &gate{open: make(chan struct{})}
	if open {
		close(g.open)
	}
	return g
}

func (g *gate) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		if !open {
			g.open = make(chan struct{})
		}
	default:
		if open {
			close(g.open)
		}
	}
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// source wraps src: each batch waits at the gate before it is applied.
func (g *gate) source(src projection.Source) projection.Source { return gatedSource{src, g} }

type gatedSource struct {
	projection.Source
	g *gate
}

func (s gatedSource) Follow(ctx context.Context, after uint64, fn func([]kernel.Recorded) error) error {
	return s.Source.Follow(ctx, after, func(batch []kernel.Recorded) error {
		if len(batch) == 0 {
			return fn(batch) // caught up: nothing to hold
		}
		if err := s.g.wait(ctx); err != nil {
			return err
		}
		return fn(batch)
	})
}

// testClock is the wall clock moved on by what the test adds.
// startTestService runs one serve in the test process on dir (the embedded
// NATS server unless tune sets NATSURL), with the cluster tests' admin
// token and its log in out, and closes it at the end of the test.
func startTestService(t *testing.T, dir string, out *syncBuffer, tune func(*serve.Config)) *serve.Service {
	t.Helper()
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir, cfg.AdminToken, cfg.ReapInterval = "127.0.0.1:0", dir, clusterAdminToken, 0
	cfg.Logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if tune != nil {
		tune(&cfg)
	}
	s, err := serve.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("startService = %v\n%s", err, out.String())
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestReadyzIsNotReadyWhileTheProjectionsHeal: serve finds its projection
// file truncated, moves it aside and rebuilds it; while the rebuild is held
// back (the projector's batches wait at a gate), /readyz answers 503 with
// "rebuilding": true, and once it reaches the ledger's head, 200.
func TestReadyzIsNotReadyWhileTheProjectionsHeal(t *testing.T) {
	dir := t.TempDir()
	var log syncBuffer
	s := startTestService(t, dir, &log, nil)
	admin := client{t: t, base: s.URL(), headers: map[string]string{"Authorization": "Bearer " + clusterAdminToken}}
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	agentClient(t, admin, "p1", "worker", 1)
	for i := range 20 {
		req.call("POST", "/v3r1/projects/p1/turns:dispatch", dispatchBody("p1", fmt.Sprint(i)), 200)
	}
	caughtUp(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	truncateHalf(t, filepath.Join(dir, "projections.db"))

	g := newGate(false)
	s = startTestService(t, dir, &log, func(cfg *serve.Config) { cfg.ProjectorSource = g.source })
	if !strings.Contains(log.String(), "the projection file is damaged") {
		t.Errorf("serve did not log the damaged file at WARN:\n%s", log.String())
	}
	code, r := readyz(t, s)
	if code != http.StatusServiceUnavailable || r.Status != "not_ready" || !r.Projections.Rebuilding || r.Projections.AppliedSeq != 0 || r.Projections.Lag == 0 {
		t.Errorf("/readyz while the rebuild is held = %d %+v, want 503 not_ready with rebuilding true and the whole ledger to fold", code, r)
	}
	g.set(true)
	checkfor.Until(t, 10*time.Second, "/readyz to answer 200 after the rebuild", func() bool {
		code, _ := readyz(t, s)
		return code == http.StatusOK
	})
	if _, r := readyz(t, s); r.Projections.Rebuilding || r.Projections.Lag != 0 {
		t.Errorf("/readyz after the rebuild = %+v, want rebuilding false, no lag", r.Projections)
	}
	req.base = s.URL()
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	json.Unmarshal(req.call("GET", "/v3r1/projects/p1/projection/turns?limit=100", nil, 200), &page)
	if len(page.Items) != 20 {
		t.Errorf("after the rebuild the projections list %d Turns, want 20", len(page.Items))
	}
}

// TestReadyzIsNotReadyWhileTheProjectionsLag runs two serve instances on
// one NATS server; A's projector is held back (a gate) while the ledger
// moves through B. With a bound of 3 events, A's /readyz answers 503 once it
// is more than 3 behind; with the default bound but a clock the test moves,
// it answers 503 once A has stood still behind the ledger for longer than
// the stall bound; and 200 again once A catches up.
func TestReadyzIsNotReadyWhileTheProjectionsLag(t *testing.T) {
	srv := natstest.Start(t)
	var log syncBuffer
	clock := &testclock.Offset{}
	g := newGate(true)
	const maxEvents, maxStall = 3, 15 * time.Second
	a := startTestService(t, t.TempDir(), &log, func(cfg *serve.Config) {
		cfg.NATSURL = srv.ClientURL()
		cfg.ProjectorSource = g.source
		cfg.Kernel.Now = clock.Now
		cfg.Lag = serve.LagBounds{Events: maxEvents, Stall: maxStall}
	})
	b := startTestService(t, t.TempDir(), &log, func(cfg *serve.Config) { cfg.NATSURL = srv.ClientURL() })
	admin := client{t: t, base: b.URL(), headers: map[string]string{"Authorization": "Bearer " + clusterAdminToken}}
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch")
	agentClient(t, admin, "p1", "worker", 1)
	caughtUp(t, a, b)
	if code, r := readyz(t, a); code != http.StatusOK || !r.Lag.WithinBound {
		t.Fatalf("/readyz of A caught up = %d %+v", code, r.Lag)
	}

	g.set(false)
	dispatches := 0
	dispatch := func() {
		dispatches++
		req.call("POST", "/v3r1/projects/p1/turns:dispatch", dispatchBody("p1", fmt.Sprint(dispatches)), 200)
	}
	// One event behind, and advancing a moment ago: within the bounds.
	dispatch()
	if code, r := readyz(t, a); code != http.StatusOK || r.Lag.Events != 1 || !r.Lag.WithinBound {
		t.Errorf("/readyz of A one event behind = %d %+v, want 200 within bounds", code, r.Lag)
	}
	// Standing still behind a moving ledger for longer than the stall bound.
	clock.Advance(maxStall + time.Second)
	code, r := readyz(t, a)
	if code != http.StatusServiceUnavailable || r.Status != "not_ready" || r.Lag.WithinBound || r.Lag.MaxStalled != maxStall.String() {
		t.Errorf("/readyz of A stalled for %v = %d %+v, want 503, not within bounds", maxStall+time.Second, code, r.Lag)
	}
	if d, err := time.ParseDuration(r.Lag.StalledFor); err != nil || d <= maxStall {
		t.Errorf("/readyz of A: stalled_for %q, want more than %v", r.Lag.StalledFor, maxStall)
	}
	// B, whose projector runs, is ready all along.
	if code, r := readyz(t, b); code != http.StatusOK {
		t.Errorf("/readyz of B = %d %+v, want 200", code, r.Lag)
	}

	// Caught up, then more than maxEvents behind: 503 without any stall.
	g.set(true)
	caughtUp(t, a)
	if code, r := readyz(t, a); code != http.StatusOK || r.Lag.Events != 0 {
		t.Errorf("/readyz of A caught up again = %d %+v, want 200", code, r.Lag)
	}
	g.set(false)
	for range maxEvents + 1 {
		dispatch()
	}
	code, r = readyz(t, a)
	if code != http.StatusServiceUnavailable || r.Lag.Events != maxEvents+1 || r.Lag.MaxEvents != maxEvents || r.Lag.WithinBound {
		t.Errorf("/readyz of A %d events behind = %d %+v, want 503", maxEvents+1, code, r.Lag)
	}
	if d, err := time.ParseDuration(r.Lag.StalledFor); err != nil || d > maxStall {
		t.Errorf("/readyz of A: stalled_for %q, want within %v (the events alone are past their bound)", r.Lag.StalledFor, maxStall)
	}
	g.set(true)
	caughtUp(t, a)
	if code, r := readyz(t, a); code != http.StatusOK || !r.Lag.WithinBound {
		t.Errorf("/readyz of A caught up at last = %d %+v, want 200", code, r.Lag)
	}
}
