package monitor

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func schedConfig(t *testing.T, c *clock) (*engine, Config) {
	t.Helper()
	e := newEngine(t, "tok")
	cfg := engineConfig(t, c, e, "tok",
		QueryConfig{ID: "fast", Connection: "engine", Query: EngineReady, Interval: Duration(10 * time.Second), Check: Check{Kind: CheckQueryFails}},
		QueryConfig{ID: "slow", Connection: "engine", Query: EngineProjectionLag, Interval: Duration(30 * time.Second), Check: Check{Kind: CheckQueryFails}},
		QueryConfig{ID: "paused", Connection: "engine", Query: EngineReady, Interval: Duration(time.Second), Check: Check{Kind: CheckQueryFails}, Paused: true},
	)
	return e, cfg
}

func TestSchedulerRunsDueQueries(t *testing.T) {
	c := newClock()
	_, cfg := schedConfig(t, c)
	m := open(t, cfg)
	srv := serve(t, m)
	ctx := context.Background()

	next := func() SchedulerNext {
		t.Helper()
		var n SchedulerNext
		if code := call(t, srv, "GET", "/api/scheduler/next", "", &n); code != 200 {
			t.Fatalf("GET /api/scheduler/next = %d, want 200", code)
		}
		return n
	}
	// Everything that never ran is due at once; paused queries never are.
	n := next()
	if n.QueryID == nil || *n.QueryID != "fast" || !n.DueAt.Equal(t0) || len(n.Upcoming) != 2 || n.Running {
		t.Errorf("next at start = %+v, want fast due now, 2 scheduled, scheduler not running", n)
	}
	if diff := cmp.Diff([]string{"fast", "slow"}, m.RunDue(ctx)); diff != "" {
		t.Errorf("RunDue at t0 (-want +got):\n%s", diff)
	}
	n = next()
	if *n.QueryID != "fast" || !n.DueAt.Equal(t0.Add(10*time.Second)) || *n.InSeconds != 10 {
		t.Errorf("next after the first round = %s at %v in %v, want fast at t0+10s in 10", *n.QueryID, n.DueAt, *n.InSeconds)
	}
	c.Advance(9 * time.Second)
	if got := m.RunDue(ctx); len(got) != 0 {
		t.Errorf("RunDue at t0+9s = %v, want nothing", got)
	}
	c.Advance(time.Second)
	if diff := cmp.Diff([]string{"fast"}, m.RunDue(ctx)); diff != "" {
		t.Errorf("RunDue at t0+10s (-want +got):\n%s", diff)
	}
	c.Advance(20 * time.Second)
	if diff := cmp.Diff([]string{"fast", "slow"}, m.RunDue(ctx)); diff != "" {
		t.Errorf("RunDue at t0+30s (-want +got):\n%s", diff)
	}
	runs, err := m.store.runs(t0, t0.Add(time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.QueryID+"@"+r.StartedAt.Sub(t0).String()+" "+r.Trigger)
	}
	want := []string{"fast@0s schedule", "fast@10s schedule", "fast@30s schedule", "slow@0s schedule", "slow@30s schedule"}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	// A manual run does not move the schedule; a paused query runs by hand.
	if _, err := m.RunQuery(ctx, "paused", TriggerManual); err != nil {
		t.Errorf("RunQuery(paused) = %v, want nil", err)
	}
	if n := next(); *n.QueryID != "fast" || !n.DueAt.Equal(t0.Add(40*time.Second)) {
		t.Errorf("next after a manual run = %s at %v, want fast at t0+40s", *n.QueryID, n.DueAt)
	}
}

// sleeper is a Sleep that advances the clock and stops the scheduler after
// a number of sleeps, recording them.
type sleeper struct {
	c      *clock
	mu     sync.Mutex
	left   int
	cancel context.CancelFunc
}

func (s *sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.left--
	stop := s.left < 0
	s.mu.Unlock()
	if stop {
		s.cancel()
		return context.Canceled
	}
	return s.c.Sleep(ctx, d)
}

func TestRunSchedulerSleepsUntilTheNextQuery(t *testing.T) {
	c := newClock()
	_, cfg := schedConfig(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &sleeper{c: c, left: 4, cancel: cancel}
	cfg.Sleep = s.Sleep
	m := open(t, cfg)
	if err := m.RunScheduler(ctx); err != nil {
		t.Fatalf("RunScheduler = %v, want nil when its context ends", err)
	}
	// Rounds at 0, 10, 20, 30, 40 s: the sleeps between them are 10 s each.
	if diff := cmp.Diff([]time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}, c.Sleeps()); diff != "" {
		t.Errorf("scheduler sleeps (-want +got):\n%s", diff)
	}
	counts := map[string]int{}
	runs, _ := m.store.runs(t0, t0.Add(time.Hour), "")
	for _, r := range runs {
		counts[r.QueryID]++
	}
	if diff := cmp.Diff(map[string]int{"fast": 5, "slow": 2}, counts); diff != "" {
		t.Errorf("runs per query (-want +got):\n%s", diff)
	}
}

func TestSchedulerSkipsAQueryStillRunning(t *testing.T) {
	c := newClock()
	_, cfg := schedConfig(t, c)
	m := open(t, cfg)
	m.mu.Lock()
	m.running["fast"] = true
	m.mu.Unlock()
	if diff := cmp.Diff([]string{"slow"}, m.RunDue(context.Background())); diff != "" {
		t.Errorf("RunDue with fast still running (-want +got):\n%s", diff)
	}
}

func TestRunsCutShortByShutdownAreNotRecorded(t *testing.T) {
	c := newClock()
	_, cfg := schedConfig(t, c)
	m := open(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.RunDue(ctx)
	if _, err := m.RunQuery(ctx, "fast", TriggerManual); err == nil {
		t.Errorf("RunQuery with a cancelled context = nil error, want one")
	}
	runs, _ := m.store.runs(t0.Add(-time.Hour), t0.Add(time.Hour), "")
	errs, _ := m.store.errors()
	if len(runs) != 0 || len(errs) != 0 {
		t.Errorf("after runs cut short: %d runs, %d errors recorded; want none", len(runs), len(errs))
	}
}
