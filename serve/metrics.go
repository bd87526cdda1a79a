package serve

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// metrics is the one Prometheus registry of `serve` and what reports into
// it. Metric names follow Prometheus conventions: the turnledger_ prefix,
// base units, counters ending in _total, labels with few values (no ids).
//
//	turnledger_commands_total{command,result}        commands (POST/PUT routes) by operationId and result ("ok" or the status);
//	                                                 shed at the instance's bound: command httpapi.OperationShed
//	turnledger_command_duration_seconds{command}     command latency (a long-poll claim includes its wait)
//	turnledger_reads_total{read,result}              reads (GET routes), event streams included
//	turnledger_append_duration_seconds               ledger appends (JetStream publish with the expectation)
//	turnledger_projection_lag_events                 ledger head − projection checkpoint
//	turnledger_claims_live                           Turns claimed now (claim not expired)
//	turnledger_claims_expired_unreleased             claims past expires_at the reaper has not released yet
//	turnledger_claim_long_polls_waiting              long-poll claims waiting now
//	turnledger_sse_subscribers                       event streams open now
//	turnledger_turns_dispatched_total                Turns dispatched (trends.go: counted as folded)
//	turnledger_turns_finished_total{outcome}         Turns finished, by outcome
//	turnledger_turn_claim_wait_seconds               dispatch to first claim
//	turnledger_turn_run_seconds                      last claim to finish
//	turnledger_turns_queued                          Turns queued now (projects loaded here)
//	turnledger_turns_awaiting_input                  Turns suspended waiting for input now
//
// plus the Go runtime and process collectors.
type metrics struct {
	reg      *prometheus.Registry
	commands *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	reads    *prometheus.CounterVec
	appends  prometheus.Histogram
	turns    turnMetrics // counted by the projector's tap (trends.go)
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnledger_commands_total", Help: "Commands (POST and PUT routes) by operationId and result: ok, or the HTTP status.",
		}, []string{"command", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "turnledger_command_duration_seconds", Help: "Command latency by operationId; a long-poll claim includes its wait.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"command"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnledger_reads_total", Help: "Reads (GET routes, event streams included) by operationId and result.",
		}, []string{"read", "result"}),
		appends: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "turnledger_append_duration_seconds", Help: "Latency of one ledger append (a JetStream publish with the per-project expectation), lost races included.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
	}
	m.reg.MustRegister(m.commands, m.latency, m.reads, m.appends,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.turns = newTurnMetrics(m.reg)
	return m
}

// ObserveRequest implements httpapi.Observer.
func (m *metrics) ObserveRequest(operation, method string, status int, d time.Duration) {
	result := "ok"
	if status >= 300 {
		result = strconv.Itoa(status)
	}
	if method == http.MethodGet {
		m.reads.WithLabelValues(operation, result).Inc()
		return
	}
	m.commands.WithLabelValues(operation, result).Inc()
	m.latency.WithLabelValues(operation).Observe(d.Seconds())
}

// handler serves the registry.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// watch registers the gauges read from the running service at scrape time.
func (m *metrics) watch(s *Service) {
	m.reg.MustRegister(writeModelCounts{s})
	gauge := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("turnledger_projection_lag_events", "Ledger head minus the projection checkpoint.", func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		head, err := s.ledger.Head(ctx)
		cp := s.store.Checkpoint()
		if err != nil || head < cp {
			return 0
		}
		return float64(head - cp)
	})
	gauge("turnledger_claim_long_polls_waiting", "Long-poll claims waiting now.", func() float64 {
		n, _ := s.api.Waiting()
		return float64(n)
	})
	gauge("turnledger_sse_subscribers", "Event streams open now.", func() float64 {
		_, n := s.api.Waiting()
		return float64(n)
	})
	gauge("turnledger_mcp_claims_waiting", "MCP claim_turn calls waiting (wait_s) now.", func() float64 {
		n, _ := s.mcp.Waiting()
		return float64(n)
	})
	gauge("turnledger_mcp_streams_open", "MCP streams (GET and subscriptions/listen) open now.", func() float64 {
		_, n := s.mcp.Waiting()
		return float64(n)
	})
}

// writeModelCounts are the gauges counted in the engine's write model of
// every loaded project, in one pass under each project's lock per scrape:
// claims live and expired but not released, Turns queued and suspended
// waiting for input.
type writeModelCounts struct{ s *Service }

var (
	descClaimsLive    = prometheus.NewDesc("turnledger_claims_live", "Turns claimed now, their claim not expired.", nil, nil)
	descClaimsExpired = prometheus.NewDesc("turnledger_claims_expired_unreleased", "Claims past expires_at that are not released yet.", nil, nil)
	descTurnsQueued   = prometheus.NewDesc("turnledger_turns_queued", "Turns queued now, in the projects loaded on this instance.", nil, nil)
	descTurnsAwaiting = prometheus.NewDesc("turnledger_turns_awaiting_input", "Turns suspended waiting for input now, in the projects loaded on this instance.", nil, nil)
)

func (c writeModelCounts) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descClaimsLive, descClaimsExpired, descTurnsQueued, descTurnsAwaiting} {
		ch <- d
	}
}

func (c writeModelCounts) Collect(ch chan<- prometheus.Metric) {
	var live, expired, queued, awaiting int
	now := c.s.cfg.Kernel.Now()
	for _, p := range c.s.engine.Projects() {
		c.s.engine.ViewFolded(context.Background(), p, func(p *kernel.Project) error {
			l, x := p.ClaimCounts(now)
			q, w := p.OpenCounts()
			live, expired, queued, awaiting = live+l, expired+x, queued+q, awaiting+w
			return nil
		})
	}
	for _, m := range []struct {
		d *prometheus.Desc
		n int
	}{{descClaimsLive, live}, {descClaimsExpired, expired}, {descTurnsQueued, queued}, {descTurnsAwaiting, awaiting}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.GaugeValue, float64(m.n))
	}
}

// timedLedger times the appends of the engine's ledger.
type timedLedger struct {
	engine.Ledger
	h prometheus.Histogram
}

func (l timedLedger) Append(ctx context.Context, project string, expectLast uint64, e kernel.Event) (uint64, error) {
	start := time.Now()
	seq, err := l.Ledger.Append(ctx, project, expectLast, e)
	l.h.Observe(time.Since(start).Seconds())
	return seq, err
}

// The ledger and its timing both keep the engine's pipelined appends: a
// signature that drifted would turn them off without a word.
var (
	_ engine.Pipeliner = (*ledger.Store)(nil)
	_ engine.Pipeliner = timedLedger{}
)

// Pipelined reports whether the ledger sends appends without waiting for
// their answers (engine/pipeline.go).
func (l timedLedger) Pipelined() bool {
	p, ok := l.Ledger.(engine.Pipeliner)
	return ok && p.Pipelined()
}

// AppendAsync times a pipelined append from its send to its answer, as
// read by the first call of result. The engine calls it only when
// Pipelined, so the ledger is a Pipeliner.
func (l timedLedger) AppendAsync(ctx context.Context, project string, expectLast uint64, e kernel.Event) (uint64, <-chan struct{}, func() error, error) {
	p, ok := l.Ledger.(engine.Pipeliner)
	if !ok {
		return 0, nil, nil, errors.New("serve: a pipelined append on a ledger that does not pipeline")
	}
	start := time.Now()
	seq, answered, result, err := p.AppendAsync(ctx, project, expectLast, e)
	if err != nil {
		l.h.Observe(time.Since(start).Seconds())
		return 0, nil, nil, err
	}
	var once sync.Once
	return seq, answered, func() error {
		once.Do(func() { l.h.Observe(time.Since(start).Seconds()) })
		return result()
	}, nil
}

// The metrics observe the API.
var _ httpapi.Observer = (*metrics)(nil)
