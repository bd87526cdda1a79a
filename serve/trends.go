package serve

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// Trends: the last hour of the instance for the console's overview
// (GET /admin/v1/trends), kept in memory from what /metrics counts.
//
// The Turn metrics (turnledger_turns_dispatched_total,
// turnledger_turns_finished_total{outcome}, the claim wait and run time
// histograms) are counted by a tap on the projector's source: every
// instance folds every event of the ledger once, whichever instance wrote
// it, so each instance counts the whole service's Turns. The levels
// (queued, waiting for input, projection lag) are gauges read at scrape
// time. A trendRing gathers the registry every trendSampleEvery and on each
// read of the route, and adds what the counters and histograms moved since
// its last gathering to the minute of the clock: 60 minutes and the
// current one, a fixed array, so the memory never grows.

const (
	trendMinutes     = 60
	trendSampleEvery = 10 * time.Second
	// tapMaxOpen bounds the Turns the tap remembers the dispatch and claim
	// times of (for the claim wait and run time): past it, Turns
	// dispatched are counted but not timed.
	tapMaxOpen = 100_000
	// tapMaxAge: events older than this when folded (a projection caught
	// up from far behind, a rebuild) are not counted, so that a restart
	// does not show the ledger's history as the last minute's work.
	tapMaxAge = 2 * time.Minute
)

// durationBuckets are the buckets of the claim wait and run time
// histograms, in seconds: 10 ms to an hour.
var durationBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// turnMetrics are the Turn metrics the tap counts.
type turnMetrics struct {
	dispatched prometheus.Counter
	finished   *prometheus.CounterVec
	claimWait  prometheus.Histogram
	run        prometheus.Histogram
}

func newTurnMetrics(reg *prometheus.Registry) turnMetrics {
	tm := turnMetrics{
		dispatched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnledger_turns_dispatched_total", Help: "Turns dispatched, as this instance's projector folded them (recent events only).",
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnledger_turns_finished_total", Help: "Turns finished, by outcome, as this instance's projector folded them (recent events only).",
		}, []string{"outcome"}),
		claimWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "turnledger_turn_claim_wait_seconds", Help: "From a Turn's dispatch to its first claim.", Buckets: durationBuckets,
		}),
		run: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "turnledger_turn_run_seconds", Help: "From a Turn's last claim to its finish.", Buckets: durationBuckets,
		}),
	}
	for _, o := range kernel.AllOutcomes {
		tm.finished.WithLabelValues(o) // every outcome present from the start
	}
	reg.MustRegister(tm.dispatched, tm.finished, tm.claimWait, tm.run)
	return tm
}

// turnTap counts the Turn events a projector folds into turnMetrics.
type turnTap struct {
	m   turnMetrics
	now func() time.Time

	mu   sync.Mutex
	last uint64               // the highest ledger_seq counted: a batch followed again is not counted twice
	open map[string]*openTurn // Turns dispatched and not finished, by project and id
}

type openTurn struct {
	dispatched, claimed time.Time
}

func newTurnTap(m turnMetrics, now func() time.Time) *turnTap {
	return &turnTap{m: m, now: now, open: map[string]*openTurn{}}
}

// source wraps the projector's source so that the tap sees every batch.
func (tp *turnTap) source(src projection.Source) projection.Source {
	return tappedSource{src, tp}
}

type tappedSource struct {
	projection.Source
	tap *turnTap
}

func (s tappedSource) Follow(ctx context.Context, after uint64, fn func([]kernel.Recorded) error) error {
	return s.Source.Follow(ctx, after, func(batch []kernel.Recorded) error {
		s.tap.observe(batch)
		return fn(batch)
	})
}

// observe counts a batch. Whether an event ends a Turn, and with which
// outcome, is the kernel's Turn state machine's answer (EvolveTurn on a
// stand-in Turn), not a second reading of the event types.
func (tp *turnTap) observe(batch []kernel.Recorded) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	now := tp.now()
	for _, r := range batch {
		if r.Seq <= tp.last {
			continue
		}
		tp.last = r.Seq
		e := r.Event
		if e.Aggregate != kernel.AggTurn || now.Sub(e.At) > tapMaxAge {
			continue
		}
		k := e.ProjectID + "\x00" + e.ID
		switch e.Data.(type) {
		case *kernel.TurnDispatched:
			tp.m.dispatched.Inc()
			if len(tp.open) < tapMaxOpen {
				tp.open[k] = &openTurn{dispatched: e.At}
			}
			continue
		case *kernel.TurnClaimed:
			if o := tp.open[k]; o != nil {
				if o.claimed.IsZero() {
					tp.m.claimWait.Observe(e.At.Sub(o.dispatched).Seconds())
				}
				o.claimed = e.At
			}
			continue
		}
		t := kernel.EvolveTurn(&kernel.Turn{ID: e.ID, State: kernel.StateClaimed}, r)
		if t == nil || t.State != kernel.StateFinished {
			continue
		}
		tp.m.finished.WithLabelValues(t.Outcome).Inc()
		if o := tp.open[k]; o != nil && !o.claimed.IsZero() {
			tp.m.run.Observe(e.At.Sub(o.claimed).Seconds())
		}
		delete(tp.open, k)
	}
}

// trendRing keeps the minutes of the last hour from gatherings of the
// registry.
type trendRing struct {
	gather prometheus.Gatherer
	now    func() time.Time

	sampling sync.Mutex // one gathering at a time, so that they apply in the order they read
	mu       sync.Mutex
	prev     trendTotals // the cumulative values of the last gathering
	minutes  [trendMinutes + 1]trendMinute
}

// trendTotals are the cumulative values read from one gathering.
type trendTotals struct {
	dispatched, shed, throttled float64
	finished                    map[string]float64
	wait, run                   []float64 // cumulative bucket counts, +Inf last
	queued, awaiting, lag       *float64
}

// trendMinute is one minute of the ring: what moved in it, and the last
// levels read in it.
type trendMinute struct {
	at                          int64 // Unix minute; 0: nothing sampled
	dispatched, shed, throttled float64
	finished                    map[string]float64
	wait, run                   []float64 // bucket counts (not cumulative), +Inf last
	queued, awaiting, lag       *float64
}

func newTrendRing(g prometheus.Gatherer, now func() time.Time) *trendRing {
	return &trendRing{gather: g, now: now}
}

// run samples every trendSampleEvery until ctx ends.
func (tr *trendRing) run(ctx context.Context) {
	t := time.NewTicker(trendSampleEvery)
	defer t.Stop()
	for {
		tr.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample gathers the registry and adds what moved since the last
// gathering to the current minute.
func (tr *trendRing) sample() {
	tr.sampling.Lock()
	defer tr.sampling.Unlock()
	fams, _ := tr.gather.Gather() // a failing collector leaves its metrics out; the others are read
	cur := readTotals(fams)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	minute := tr.now().Unix() / 60
	m := &tr.minutes[minute%int64(len(tr.minutes))]
	if m.at != minute {
		*m = trendMinute{at: minute, finished: map[string]float64{}}
	}
	m.dispatched += cur.dispatched - tr.prev.dispatched
	m.shed += cur.shed - tr.prev.shed
	m.throttled += cur.throttled - tr.prev.throttled
	for o, n := range cur.finished {
		m.finished[o] += n - tr.prev.finished[o]
	}
	m.wait = addBucketDeltas(m.wait, cur.wait, tr.prev.wait)
	m.run = addBucketDeltas(m.run, cur.run, tr.prev.run)
	m.queued, m.awaiting, m.lag = cur.queued, cur.awaiting, cur.lag
	tr.prev = cur
}

// addBucketDeltas adds the counts of each bucket between two cumulative
// readings to into.
func addBucketDeltas(into, cur, prev []float64) []float64 {
	if into == nil {
		into = make([]float64, len(cur))
	}
	for i := range cur {
		p := 0.0
		if i < len(prev) {
			p = prev[i]
		}
		lower, plower := 0.0, 0.0
		if i > 0 {
			lower = cur[i-1]
			if i-1 < len(prev) {
				plower = prev[i-1]
			}
		}
		if i < len(into) {
			into[i] += (cur[i] - lower) - (p - plower)
		}
	}
	return into
}

// readTotals reads the metrics the trends are made of from a gathering.
func readTotals(fams []*dto.MetricFamily) trendTotals {
	t := trendTotals{finished: map[string]float64{}}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			switch f.GetName() {
			case "turnledger_turns_dispatched_total":
				t.dispatched += mt.GetCounter().GetValue()
			case "turnledger_turns_finished_total":
				t.finished[label(mt, "outcome")] += mt.GetCounter().GetValue()
			case "turnledger_commands_total":
				switch label(mt, "result") {
				case strconv.Itoa(503):
					t.shed += mt.GetCounter().GetValue()
				case strconv.Itoa(429):
					t.throttled += mt.GetCounter().GetValue()
				}
			case "turnledger_turn_claim_wait_seconds":
				t.wait = cumulative(mt.GetHistogram())
			case "turnledger_turn_run_seconds":
				t.run = cumulative(mt.GetHistogram())
			case "turnledger_turns_queued":
				t.queued = ptrTo(mt.GetGauge().GetValue())
			case "turnledger_turns_awaiting_input":
				t.awaiting = ptrTo(mt.GetGauge().GetValue())
			case "turnledger_projection_lag_events":
				t.lag = ptrTo(mt.GetGauge().GetValue())
			}
		}
	}
	return t
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func ptrTo(v float64) *float64 { return &v }

// cumulative is a histogram's cumulative bucket counts, its total count
// last (the +Inf bucket).
func cumulative(h *dto.Histogram) []float64 {
	out := make([]float64, 0, len(h.GetBucket())+1)
	for _, b := range h.GetBucket() {
		out = append(out, float64(b.GetCumulativeCount()))
	}
	return append(out, float64(h.GetSampleCount()))
}

// quantile is histogram_quantile over one minute's bucket counts (the
// upper bounds are durationBuckets, then +Inf): linear within the bucket
// the rank falls in, the largest finite bound for the +Inf bucket. nil
// when the minute has no observation.
func quantile(q float64, counts []float64) *float64 {
	total := 0.0
	for _, c := range counts {
		total += c
	}
	if total <= 0 {
		return nil
	}
	rank, seen := q*total, 0.0
	for i, c := range counts {
		if seen+c >= rank && c > 0 {
			if i >= len(durationBuckets) {
				return ptrTo(durationBuckets[len(durationBuckets)-1])
			}
			lower := 0.0
			if i > 0 {
				lower = durationBuckets[i-1]
			}
			v := lower + (durationBuckets[i]-lower)*(rank-seen)/c
			return ptrTo(math.Round(v*1e6) / 1e6)
		}
		seen += c
	}
	return ptrTo(durationBuckets[len(durationBuckets)-1])
}

// Trends samples once more and answers the last 60 minutes, the current
// one last.
func (tr *trendRing) Trends(context.Context) httpapi.Trends {
	tr.sample()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	now := tr.now().UTC()
	cur := now.Unix() / 60
	out := httpapi.Trends{Now: now, MinuteS: 60, Points: make([]httpapi.TrendPoint, 0, trendMinutes)}
	for minute := cur - trendMinutes + 1; minute <= cur; minute++ {
		p := httpapi.TrendPoint{At: time.Unix(minute*60, 0).UTC(), Finished: map[string]float64{}}
		for _, o := range kernel.AllOutcomes {
			p.Finished[o] = 0
		}
		if m := &tr.minutes[minute%int64(len(tr.minutes))]; m.at == minute {
			p.Sampled = true
			p.Dispatched, p.Shed, p.Throttled = m.dispatched, m.shed, m.throttled
			for o, n := range m.finished {
				p.Finished[o] += n
			}
			p.Queued, p.AwaitingInput, p.ProjectionLagEvents = m.queued, m.awaiting, m.lag
			p.ClaimWaitP50S, p.ClaimWaitP95S = quantile(.5, m.wait), quantile(.95, m.wait)
			p.RunP50S, p.RunP95S = quantile(.5, m.run), quantile(.95, m.run)
		}
		out.Points = append(out.Points, p)
	}
	return out
}
