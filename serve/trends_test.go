package serve

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/kernel"
)

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestTrendsFromWhatMetricsCount: the Turn events a projector folds move
// /metrics' counters and histograms, and the ring shows them minute by
// minute: dispatched, finished by outcome (as the kernel's state machine
// ends them: a finish, a stop, a dead claim), claim wait and run time
// percentiles, commands shed and throttled. An event folded again is not
// counted twice; old events (a catch-up) are not counted at all.
func TestTrendsFromWhatMetricsCount(t *testing.T) {
	clk := &testClock{now: time.Date(2026, 11, 27, 10, 0, 5, 0, time.UTC)}
	m := newMetrics()
	tap := newTurnTap(m.turns, clk.Now)
	ring := newTrendRing(m.reg, clk.Now)
	seq := uint64(0)
	ev := func(id string, at time.Time, data any) kernel.Recorded {
		seq++
		return kernel.Recorded{Seq: seq, Event: kernel.Event{ProjectID: "p", Aggregate: kernel.AggTurn, ID: id, At: at, Data: data}}
	}
	t0 := clk.Now()
	old := ev("old", t0.Add(-time.Hour), &kernel.TurnDispatched{})
	first := []kernel.Recorded{
		old,
		ev("a", t0, &kernel.TurnDispatched{}), ev("b", t0, &kernel.TurnDispatched{}), ev("c", t0, &kernel.TurnDispatched{}),
		ev("a", t0.Add(800*time.Millisecond), &kernel.TurnClaimed{ClaimID: "c1"}),
		ev("b", t0.Add(800*time.Millisecond), &kernel.TurnClaimed{ClaimID: "c2"}),
		ev("a", t0.Add(2*time.Second), &kernel.TurnFinished{ClaimID: "c1", Outcome: "succeeded"}),
		ev("c", t0.Add(2*time.Second), &kernel.TurnStopped{}),
	}
	tap.observe(first)
	tap.observe(first) // followed again after a failure: nothing more
	m.ObserveRequest("dispatchTurn", http.MethodPost, 503, time.Millisecond)
	m.ObserveRequest("dispatchTurn", http.MethodPost, 429, time.Millisecond)
	m.ObserveRequest("getTurn", http.MethodGet, 503, time.Millisecond) // a read, not a command

	clk.add(time.Minute)
	t1 := clk.Now()
	tap.observe([]kernel.Recorded{ev("b", t1, &kernel.TurnClaimExpired{ClaimID: "c2", Dead: true})})

	got := ring.Trends(context.Background())
	if len(got.Points) != trendMinutes || got.MinuteS != 60 {
		t.Fatalf("%d points of %d s, want %d of 60", len(got.Points), got.MinuteS, trendMinutes)
	}
	// Only the last minute was sampled (the ring gathered once, now): it
	// holds everything counted so far.
	f := func(v float64) *float64 { return &v }
	outcomes := func(kv ...any) map[string]float64 {
		out := map[string]float64{}
		for _, o := range kernel.AllOutcomes {
			out[o] = 0
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1].(float64)
		}
		return out
	}
	want := httpapi.TrendPoint{
		At: t1.Truncate(time.Minute), Sampled: true, Dispatched: 3, Finished: outcomes("succeeded", 1.0, "stopped", 1.0, "dead", 1.0),
		// Two waits of 0.8 s in the bucket (0.5, 1]: p50 at its middle.
		ClaimWaitP50S: f(0.75), ClaimWaitP95S: f(0.975),
		// Runs of 1.2 s (a, claimed at 0.8 s, finished at 2 s) and 59.2 s (b,
		// claimed at 0.8 s, dead a minute after the dispatch).
		RunP50S: f(2.5), RunP95S: f(57),
		Shed: 1, Throttled: 1,
	}
	if diff := cmp.Diff(want, got.Points[trendMinutes-1]); diff != "" {
		t.Errorf("the current minute (-want +got):\n%s", diff)
	}
	if p := got.Points[trendMinutes-2]; p.Sampled || p.Dispatched != 0 || p.Queued != nil {
		t.Errorf("a minute never sampled = %+v, want unsampled and empty", p)
	}

	// The next minute holds only what came after.
	clk.add(time.Minute)
	tap.observe([]kernel.Recorded{ev("d", clk.Now(), &kernel.TurnDispatched{})})
	got = ring.Trends(context.Background())
	last, before := got.Points[trendMinutes-1], got.Points[trendMinutes-2]
	if last.Dispatched != 1 || last.Finished["succeeded"] != 0 || last.ClaimWaitP50S != nil || last.Shed != 0 {
		t.Errorf("the next minute = %+v, want one dispatch and nothing else", last)
	}
	if before.Dispatched != 3 || before.At != t1.Truncate(time.Minute) {
		t.Errorf("the minute before = %+v, want the first minute's 3 dispatches", before)
	}
}

// TestQuantile: histogram_quantile over one minute's buckets.
func TestQuantile(t *testing.T) {
	counts := make([]float64, len(durationBuckets)+1)
	if q := quantile(.5, counts); q != nil {
		t.Errorf("quantile of no observation = %v, want nil", *q)
	}
	counts[0] = 10 // ten in [0, 0.01]
	if q := quantile(.5, counts); q == nil || *q != 0.005 {
		t.Errorf("p50 of ten in the first bucket = %v, want 0.005", q)
	}
	counts[len(counts)-1] = 90 // ninety past the last bound
	if q := quantile(.95, counts); q == nil || *q != durationBuckets[len(durationBuckets)-1] {
		t.Errorf("p95 in the +Inf bucket = %v, want the last bound", q)
	}
}
