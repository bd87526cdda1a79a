// Package bench measures turnledger as users run it: whole Turn lifecycles
// over the coordination API, feed pages, replay and start-up at scale, and
// serve's protections against overload, each against the limit measured in
// the same run (the raw guarded append rate of the same NATS server).
// `turnledger bench` parses its flags into a Config and calls Run.
//
// The lifecycle load and the pages of the feed scenario go through the
// public Go client (package client), as users' programs do; each lifecycle
// worker has a client of its own on a keep-alive connection of its own
// (conn.go), or with Config.NetHTTP one shared net/http Transport. Without
// Config.URL the service is started in-process with package serve, as
// `turnledger serve` runs it; the feed, replay and start scenarios run
// `turnledger serve` and `turnledger replay` as child processes of the
// binary (Config.Binary).
//
// The overload scenario (overload.go) keeps raw net/http and raw TCP where
// the client cannot express its traffic: an open loop that counts 503s
// without waiting for anything, floods of wrong tokens from another
// address, bodies trickled a byte at a time, more connections than the
// cap, and feed pages measured in bytes.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/cpuprof"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

// Help describes the scenarios and where the bench runs them, for
// `turnledger bench --help`.
const Help = `Measures turnledger as users run it, and in the same run the limit it is
measured against: the durable guarded append rate of the same NATS server
(JetStream publishes with the per-project expectation, each made durable as
serve's --sync promises), from one writer in sequence and from --agents
writers of one project sharing fsyncs (the group commit; its events per fsync
are printed). Commands/s is reported as a share of the faster of the two.

Scenarios (--scenario):
  lifecycle  --agents workers and --requesters requesters over --projects
             projects drive whole Turns (dispatch, claim, --records records
             (1), finish with its final record)
             over HTTP for --duration, each worker on a keep-alive
             connection of its own (--net-http: through net/http's Client):
             closed loop (each worker waits for its answer), or open loop at
             --rate Turns/s. Prints Turns/s, commands/s, their ratio to the
             append rate, p50/p95/p99 per command kind, projection lag, RSS
             and CPU.
  feed       feed page of 100 p50/p99 at the end of a ledger of --events.
  replay     events/s and peak RSS of 'turnledger replay' at --events.
  start      time from process start to /readyz 200, and RSS when ready, on a
             data directory holding --events.
  overload   each protection of serve against overload and abuse, on an
             in-process serve with the protections off ("off", as before
             them) and one with serve's defaults ("on"): an open loop of
             dispatches at --factor times the capacity measured first with
             --agents dispatchers in a closed loop (accepted and shed,
             latency, recovery); readers of a Turn feed
             of --events events of 200 KiB (default 100) with limit=500
             (page sizes, RSS); clients that trickle a body (cut by the read
             timeout); more connections than the cap; a flood of wrong tokens
             beside a real agent (its p50/p99, the 429s). The eight timed
             phases share --duration. The read timeout and connection cap are
             scaled to the run (1 s, 256) on a third serve.
  retention  on a ledger of --events made with retention on (in --data),
             one retention run keeping the last 10 % of the events (its
             clock moved so), under an open loop of lifecycles at --rate
             (20 Turns/s by default): the sizes of the stream, the
             projections (and compacted) and the archive before and after,
             the run's time, and command p50/p99 for --duration before the
             run and during it.
  readscale  whether feed reads scale with serve instances on one NATS
             server: on a ledger of --events (made as the feed scenario
             makes it, in --data), the bench runs the ledger's NATS server
             on a loopback port and --instances 'turnledger serve
             --nats-url' child processes on it, each with projections of its
             own; --readers readers read feed pages of 100 from random
             cursors of the last tenth from the first 1, 2, …, --instances
             of them, --duration each, --rounds times. Prints pages/s,
             p50/p99, the CPU each serve used and the bench's own (readers
             and NATS server), pages per serve core-second, and the ratios
             to one instance; checks that every instance answers the same
             pages. --gomaxprocs sets each serve's GOMAXPROCS and --pin binds
             serve i to core i mod cores (taskset), and the bench to the
             cores left when there are more cores than instances, so that
             instances can be compared at equal CPU each.

Without --url, bench starts serve in-process on a temporary data directory
(embedded NATS, file storage, as 'turnledger serve' runs). With --url it
drives a running serve (the admin token from --admin-token or
TURNLEDGER_ADMIN_TOKEN); the append rate is then measured only with
--nats-url. The feed, replay and start scenarios make their ledger in
--data (a new temporary directory by default) and run 'turnledger serve' and
'turnledger replay' as child processes of this binary.

`

// Config is what to measure: `turnledger bench`'s flags.
type Config struct {
	Scenario   string // lifecycle, feed, replay, start, overload, retention or readscale
	URL        string // drive a running serve instead of starting one (lifecycle)
	AdminToken string // the admin bearer of URL
	NATSURL    string // with URL: that serve's NATS server, to measure the append rate on
	Agents     int
	Requesters int
	Projects   int
	// Records is how many records a worker appends to a Turn before its
	// finish (which writes the final record with the outcome): 1 by
	// default; 0 makes the lifecycle three commands.
	Records      int
	Duration     time.Duration
	Rate         float64
	Events       int
	Factor       float64 // overload: the open loop's multiple of the measured capacity
	Data         string
	JSON         bool
	NetHTTP      bool        // lifecycle: the workers send through one net/http Transport, not a connection each
	Sync         ledger.Sync // durability of the in-process serve's embedded NATS (serve's --sync)
	ProjSync     string      // the in-process serve's --projection-sync
	CPUProfile   string      // a pprof CPU profile of the whole run, server and load generator
	MutexProfile string      // a pprof profile of the time spent waiting for locks
	MemProfile   string      // a pprof profile of the allocations of the run
	// Command is the command line printed first in the report.
	Command string
	// Binary is the turnledger binary the feed, replay and start scenarios
	// run as child processes (default: this process's executable).
	Binary string

	// readscale (readscale.go)
	Instances  int  // serve instances on one NATS server, 1 … Instances
	Readers    int  // feed readers in a closed loop
	Rounds     int  // times each instance count is measured, alternating
	GOMAXPROCS int  // each serve's GOMAXPROCS (0: Go's default)
	Pin        bool // bind serve i to core i mod cores with taskset
}

// DefaultConfig is `turnledger bench`'s defaults: a closed-loop lifecycle
// run of 10 s, 64 workers and 4 requesters in one project.
func DefaultConfig() Config {
	return Config{Scenario: "lifecycle", Agents: 64, Requesters: 4, Projects: 1, Records: 1, Duration: 10 * time.Second, Events: 1_000_000, Factor: 3,
		Instances: 2, Readers: 16, Rounds: 2}
}

// Run runs the scenario of cfg and prints its report to stdout (progress
// and the first error to stderr).
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.CPUProfile != "" {
		stop, err := cpuprof.Start(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.MutexProfile != "" {
		f, err := os.Create(cfg.MutexProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		prev := runtime.SetMutexProfileFraction(1)
		defer func() {
			pprof.Lookup("mutex").WriteTo(f, 0)
			runtime.SetMutexProfileFraction(prev)
		}()
	}
	if cfg.MemProfile != "" {
		f, err := os.Create(cfg.MemProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		defer pprof.Lookup("allocs").WriteTo(f, 0)
	}
	b := &bench{cfg: cfg, stderr: stderr, progress: isTerminal(stderr)}
	var res *Result
	var err error
	switch cfg.Scenario {
	case "lifecycle":
		res, err = b.lifecycle(ctx)
	case "overload":
		res, err = b.overload(ctx)
	case "retention":
		res, err = b.retention(ctx)
	case "readscale":
		res, err = b.readScale(ctx)
	default:
		res, err = b.atScale(ctx)
	}
	if err != nil {
		return err
	}
	res.Command = cfg.Command
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res.print(stdout)
	return nil
}

// Validate reports every problem of c, joined.
func (c Config) Validate() error {
	var errs []error
	switch c.Scenario {
	case "lifecycle", "feed", "replay", "start", "overload", "retention", "readscale":
	default:
		errs = append(errs, fmt.Errorf("--scenario must be lifecycle, feed, replay, start, overload, retention or readscale, not %q", c.Scenario))
	}
	if c.Scenario == "readscale" && (c.Instances < 1 || c.Instances > 64 || c.Readers < c.Instances || c.Rounds < 1 || c.GOMAXPROCS < 0) {
		errs = append(errs, errors.New("readscale: --instances must be 1 to 64, --readers at least --instances, --rounds at least 1, --gomaxprocs not negative"))
	}
	if c.Factor <= 0 {
		errs = append(errs, errors.New("--factor must be positive"))
	}
	if c.Agents < 1 || c.Requesters < 1 || c.Projects < 1 {
		errs = append(errs, errors.New("--agents, --requesters and --projects must be at least 1"))
	}
	if c.Projects > c.Agents {
		errs = append(errs, errors.New("--projects must not exceed --agents (every project needs a worker)"))
	}
	if c.Duration <= 0 || c.Rate < 0 || c.Events < 1 {
		errs = append(errs, errors.New("--duration and --events must be positive, --rate not negative"))
	}
	if c.Records < 0 || c.Records > 100 {
		errs = append(errs, fmt.Errorf("--records must be 0 to 100, not %d", c.Records))
	}
	if c.Scenario == "overload" && (c.Duration < 800*time.Millisecond || c.Events < 2) {
		errs = append(errs, errors.New("overload: --duration must be at least 800ms (eight phases) and --events at least 2"))
	}
	if c.URL != "" && c.Scenario != "lifecycle" {
		errs = append(errs, errors.New("--url goes with --scenario lifecycle only (the other scenarios make their own ledger)"))
	}
	return errors.Join(errs...)
}

// Result is what a run measured; Run prints it as text or as JSON.
type Result struct {
	Command  string `json:"command"`
	Scenario string `json:"scenario"`
	// The limit, measured in the same run: durable appends to one project
	// from one writer in sequence, and from GroupWriters at once sharing
	// fsyncs (EventsPerFsync of them per fsync under --sync always).
	AppendsPerSec      float64 `json:"appends_per_second,omitempty"`
	AppendP50          float64 `json:"append_p50_ms,omitempty"`
	GroupAppendsPerSec float64 `json:"group_appends_per_second,omitempty"`
	GroupAppendP50     float64 `json:"group_append_p50_ms,omitempty"`
	GroupWriters       int     `json:"group_writers,omitempty"`
	EventsPerFsync     float64 `json:"events_per_fsync,omitempty"`
	// lifecycle
	Agents int `json:"agents,omitempty"`
	// RecordsPerTurn is Config.Records of a lifecycle run: the records a
	// worker appended to each Turn before its finish.
	RecordsPerTurn int                     `json:"records_per_turn"`
	Projects       int                     `json:"projects,omitempty"`
	Client         string                  `json:"client,omitempty"` // how the workers send: "conn" (one connection each) or "net/http"
	Seconds        float64                 `json:"seconds,omitempty"`
	Turns          int64                   `json:"turns,omitempty"`
	TurnsPerSec    float64                 `json:"turns_per_second,omitempty"`
	CmdsPerSec     float64                 `json:"commands_per_second,omitempty"`
	CmdRatio       float64                 `json:"commands_to_appends_ratio,omitempty"`
	Errors         int64                   `json:"errors"`
	Commands       map[string]LatencyStats `json:"commands,omitempty"`
	MaxLag         uint64                  `json:"max_projection_lag,omitempty"`
	CPUCores       float64                 `json:"cpu_cores,omitempty"`
	ProcessRSSMB   float64                 `json:"rss_mib,omitempty"`
	// feed, replay, start
	Events       int     `json:"events,omitempty"`
	FeedP50      float64 `json:"feed_page_p50_ms,omitempty"`
	FeedP99      float64 `json:"feed_page_p99_ms,omitempty"`
	FeedRawP50   float64 `json:"feed_page_raw_p50_ms,omitempty"` // the same pages read as bytes, not decoded by the client: serve's part
	FeedRawP99   float64 `json:"feed_page_raw_p99_ms,omitempty"`
	ReplayPerSec float64 `json:"replay_events_per_second,omitempty"`
	ReadySeconds float64 `json:"ready_seconds,omitempty"`
	// LoadedSeconds: from process start to the first answered request of
	// the bench project (its write model loaded; 503 until then), and the
	// RSS then.
	LoadedSeconds float64 `json:"loaded_seconds,omitempty"`
	LoadedRSSMB   float64 `json:"loaded_rss_mib,omitempty"`
	// LoadedAnonMB is the anonymous part of LoadedRSSMB (heap, stacks);
	// the rest is pages of mapped files (bbolt's mmap of projections.db),
	// which the kernel can drop and read again.
	LoadedAnonMB  float64 `json:"loaded_rss_anon_mib,omitempty"`
	PeakRSSMB     float64 `json:"peak_rss_mib,omitempty"`
	ProjectionsMB float64 `json:"projections_mib,omitempty"`
	LedgerMB      float64 `json:"ledger_mib,omitempty"`
	// overload (overload.go)
	Overload *OverloadResult `json:"overload,omitempty"`
	// retention (retention.go)
	Retention *RetentionResult `json:"retention,omitempty"`
	// readscale (readscale.go)
	ReadScale *ReadScaleResult `json:"read_scale,omitempty"`
}

// limit is the rate commands/s is reported against: the faster of the
// two append phases (from many writers under --sync always, where they
// share fsyncs; in sequence under --sync interval, where the writers only
// contend for the project's lock).
func (r *Result) limit() float64 { return max(r.AppendsPerSec, r.GroupAppendsPerSec) }

// setLimit records the limit measured.
func (r *Result) setLimit(l appendLimit) {
	r.AppendsPerSec, r.AppendP50 = l.SeqPerSec, l.SeqP50
	r.GroupAppendsPerSec, r.GroupAppendP50, r.GroupWriters, r.EventsPerFsync = l.GroupPerSec, l.GroupP50, l.Writers, l.PerFsync
}

// LatencyStats are the latencies of one command kind, in milliseconds.
type LatencyStats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
}

func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "%s\n", r.Command)
	if r.AppendsPerSec > 0 {
		fmt.Fprintf(w, "limit: durable guarded append in sequence %.0f/s (p50 %.3f ms), same server, same run\n", r.AppendsPerSec, r.AppendP50)
	}
	if r.GroupAppendsPerSec > 0 {
		fmt.Fprintf(w, "limit: durable guarded appends from %d writers of one project %.0f/s (p50 %.3f ms", r.GroupWriters, r.GroupAppendsPerSec, r.GroupAppendP50)
		if r.EventsPerFsync > 0 {
			fmt.Fprintf(w, ", %.1f events per fsync", r.EventsPerFsync)
		}
		fmt.Fprintf(w, "), same server, same run\n")
	}
	switch r.Scenario {
	case "lifecycle":
		if r.RecordsPerTurn != 1 {
			fmt.Fprintf(w, "lifecycle of %d commands (dispatch, claim, %d records, finish)\n", r.RecordsPerTurn+3, r.RecordsPerTurn)
		}
		fmt.Fprintf(w, "%d agents over %d project(s), client %s, %.1f s: %d Turns, %.0f Turns/s, %.0f commands/s", r.Agents, r.Projects, r.Client, r.Seconds, r.Turns, r.TurnsPerSec, r.CmdsPerSec)
		if r.CmdRatio > 0 {
			which := "group"
			if r.AppendsPerSec > r.GroupAppendsPerSec {
				which = "sequential"
			}
			fmt.Fprintf(w, " = %.1f %% of the %s append rate", 100*r.CmdRatio, which)
		}
		fmt.Fprintf(w, ", %d errors\n", r.Errors)
		kinds := make([]string, 0, len(r.Commands))
		for k := range r.Commands {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			s := r.Commands[k]
			fmt.Fprintf(w, "  %-9s n=%-7d p50 %6.2f ms  p95 %6.2f ms  p99 %6.2f ms\n", k, s.N, s.P50, s.P95, s.P99)
		}
		fmt.Fprintf(w, "projection lag at most %d events; process RSS %.0f MiB, CPU %.2f cores (server and load generator)\n", r.MaxLag, r.ProcessRSSMB, r.CPUCores)
	case "feed":
		fmt.Fprintf(w, "%d events: feed page of 100 p50 %.2f ms, p99 %.2f ms (read as bytes, not decoded: p50 %.2f ms, p99 %.2f ms); serve peak RSS %.0f MiB\n", r.Events, r.FeedP50, r.FeedP99, r.FeedRawP50, r.FeedRawP99, r.PeakRSSMB)
	case "replay":
		fmt.Fprintf(w, "%d events: replay %.0f events/s, peak RSS %.0f MiB\n", r.Events, r.ReplayPerSec, r.PeakRSSMB)
	case "overload":
		r.Overload.print(w)
	case "retention":
		r.Retention.print(w, r.Events)
	case "readscale":
		r.ReadScale.print(w, r.Events)
	case "start":
		fmt.Fprintf(w, "%d events: ready in %.2f s, RSS when ready %.0f MiB; first request answered (write model loaded) in %.2f s, RSS then %.0f MiB (%.0f MiB anonymous, the rest mapped files)\n",
			r.Events, r.ReadySeconds, r.PeakRSSMB, r.LoadedSeconds, r.LoadedRSSMB, r.LoadedAnonMB)
	}
	if r.LedgerMB > 0 {
		fmt.Fprintf(w, "files: ledger %.0f MiB, projections %.0f MiB\n", r.LedgerMB, r.ProjectionsMB)
	}
}

type bench struct {
	cfg      Config
	stderr   io.Writer
	progress bool
	// tune changes the in-process serve's configuration in start, and
	// onStart sees the service it started (retention.go).
	tune    func(*serve.Config)
	onStart func(*serve.Service)
}

// target is a serve to drive: its URL, admin token and NATS connection
// (nil when unknown).
type target struct {
	url, admin string
	nc         *nats.Conn
	emb        *ledger.Embedded // the in-process serve's embedded server; nil otherwise
	close      func() error
}

// adminClient is a client of t with the admin bearer, on hc.
func (t *target) adminClient(hc *http.Client) (*client.Client, error) {
	return client.New(t.url, client.WithAdminToken(t.admin), client.WithHTTPClient(hc), client.WithUserAgent("turnledger-bench"))
}

// start starts serve in-process on dir (a new temporary directory when
// empty), or connects to --url.
func (b *bench) start(ctx context.Context, dir string) (*target, error) {
	return b.startWith(ctx, dir, b.tune)
}

// startWith is start with the in-process serve's configuration changed by
// tune (when not nil).
func (b *bench) startWith(ctx context.Context, dir string, tune func(*serve.Config)) (*target, error) {
	if b.cfg.URL != "" {
		t := &target{url: strings.TrimRight(b.cfg.URL, "/"), admin: b.cfg.AdminToken, close: func() error { return nil }}
		if b.cfg.NATSURL != "" {
			nc, err := nats.Connect(b.cfg.NATSURL)
			if err != nil {
				return nil, fmt.Errorf("connect to --nats-url: %w", err)
			}
			t.nc, t.close = nc, func() error { nc.Close(); return nil }
		}
		return t, nil
	}
	cleanup := func() {}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "turnledger-bench-")
		if err != nil {
			return nil, err
		}
		dir, cleanup = tmp, func() { os.RemoveAll(tmp) }
	}
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", dir
	cfg.AdminToken = "tladm_bench"
	if b.cfg.Sync != "" {
		cfg.Sync = b.cfg.Sync
	}
	if b.cfg.ProjSync != "" {
		cfg.ProjectionSync = b.cfg.ProjSync
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if tune != nil {
		tune(&cfg)
	}
	s, err := serve.Start(ctx, cfg)
	if err != nil {
		cleanup()
		return nil, err
	}
	if b.onStart != nil {
		b.onStart(s)
	}
	return &target{url: s.URL(), admin: cfg.AdminToken, nc: s.NATS(), emb: s.Embedded(), close: func() error {
		err := s.Close()
		cleanup()
		return err
	}}, nil
}

// appendLimit is the limit a run is measured against, on the target's NATS
// server in the same run: guarded appends to one project of a stream of
// the bench's own, each made durable as serve's sync mode promises (on the
// in-process serve, a ledger opened as serve opens its own: under --sync
// always each append waits for the group commit's fsync).
type appendLimit struct {
	// One writer in sequence: an fsync per append under --sync always.
	SeqPerSec, SeqP50 float64
	// writers appending to one project, each under a shared lock as the
	// engine does, and waiting for durability after releasing it: what the
	// server makes durable when commands share fsyncs.
	GroupPerSec, GroupP50 float64
	Writers               int
	PerFsync              float64 // appends per fsync in the group phase (0: the server syncs by itself)
}

// appendRate measures the appendLimit, d for each phase.
func (b *bench) appendRate(ctx context.Context, t *target, writers int, d time.Duration) (appendLimit, error) {
	var lim appendLimit
	cfg := ledger.DefaultConfig()
	cfg.Stream, cfg.Prefix = fmt.Sprintf("TLBENCH%d", rand.Uint32()), "tlbench"
	var l *ledger.Store
	var err error
	if t.emb != nil {
		var nc *nats.Conn
		if nc, l, err = t.emb.Open(ctx, cfg); err == nil {
			defer nc.Close()
		}
	} else {
		l, err = ledger.Open(ctx, t.nc, cfg)
	}
	if err != nil {
		return lim, err
	}
	defer func() {
		if js, err := jetstream.New(t.nc); err == nil {
			js.DeleteStream(context.Background(), cfg.Stream)
		}
	}()
	ev := kernel.Event{Type: kernel.EvTurnRecordAppended, V: 1, ProjectID: "bench", Aggregate: kernel.AggTurn, ID: "t1",
		At: time.Now().UTC(), Actor: kernel.Actor{Kind: "admin"}, Data: &kernel.TurnRecordAppended{ClaimID: "c", TurnSeq: 1, Role: "note", Payload: json.RawMessage(`{}`)}}
	var mu sync.Mutex
	var last uint64
	appendOne := func() error {
		mu.Lock()
		seq, err := l.Append(ctx, "bench", last, ev)
		if err == nil {
			last = seq
		}
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("append: %w", err)
		}
		return l.Durable(ctx, seq)
	}
	phase := func(n int) (perSec, p50 float64, err error) {
		lats := make([][]time.Duration, n)
		errs := make([]error, n)
		start := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < d {
					t0 := time.Now()
					if errs[i] = appendOne(); errs[i] != nil {
						return
					}
					lats[i] = append(lats[i], time.Since(t0))
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		var all []time.Duration
		for i := range n {
			if errs[i] != nil {
				return 0, 0, errs[i]
			}
			all = append(all, lats[i]...)
		}
		return float64(len(all)) / el.Seconds(), quantile(all, 0.5), nil
	}
	if lim.SeqPerSec, lim.SeqP50, err = phase(1); err != nil {
		return lim, err
	}
	lim.Writers = writers
	f0, s0 := l.Fsyncs(), last
	if lim.GroupPerSec, lim.GroupP50, err = phase(writers); err != nil {
		return lim, err
	}
	if f := l.Fsyncs() - f0; f > 0 {
		lim.PerFsync = float64(last-s0) / float64(f)
	}
	return lim, nil
}

func quantile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[int(q*float64(len(d)-1))]) / float64(time.Millisecond)
}

// newHTTPClient is the net/http Client of requests that are not a
// lifecycle worker's: one Transport, keeping up to conns idle connections.
func newHTTPClient(conns int) *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: conns + 16}}
}

// workerHTTP returns the net/http Client of one lifecycle worker: a
// connection of its own (conn.go) to an http:// URL, else (--net-http, or
// https) the shared one. Closing what it returns closes that connection.
func (b *bench) workerHTTP(shared *http.Client, url string) (*http.Client, func()) {
	if b.cfg.NetHTTP {
		return shared, func() {}
	}
	if c := newConn(url); c != nil {
		return &http.Client{Transport: c}, c.close
	}
	return shared, func() {}
}

// fleet is the agents of a lifecycle run: requesters and workers with their
// credentials, spread over the projects.
type fleet struct {
	url        string
	requesters [][]agent // by project
	workers    []agent
	run        string // a per-run prefix of dispatch keys
	records    int    // records per Turn before its finish (Config.Records)
}

// agent is an agent of the run and the token of its credential.
type agent struct {
	project, id, token string
}

// client returns a client of the API at url authenticated as a, on hc.
func (a agent) client(url string, hc *http.Client) *client.Client {
	c, _ := client.New(url, client.WithAgent(a.project, a.id, a.token), client.WithHTTPClient(hc), client.WithUserAgent("turnledger-bench"))
	return c // the URL was accepted by the admin client already
}

func (a agent) ref() client.AgentRef { return client.AgentRef{ProjectID: a.project, AgentID: a.id} }

// headers are a's authentication headers, for the raw requests of the
// overload scenario.
func (a agent) headers() map[string]string {
	return map[string]string{"X-Svc-Project-Id": a.project, "X-Svc-Agent-Id": a.id, "Authorization": "Bearer " + a.token}
}

// register registers an agent through the admin client adm and issues it a
// credential.
func register(ctx context.Context, adm *client.Client, project, id string, capacity int, grants ...string) (agent, error) {
	_, err := adm.RegisterAgent(ctx, project, client.RegisterRequest{
		Spec: client.AgentSpec{AgentID: id, Role: "bench", Description: "turnledger bench", AcceptsWork: new(capacity > 0),
			Capacity: new(capacity), Grants: grants},
		Provenance: client.Provenance{Kind: "manual", ExternalRef: "turnledger bench"}})
	if err != nil {
		return agent{}, fmt.Errorf("register %s/%s: %w", project, id, err)
	}
	issued, err := adm.IssueCredential(ctx, project, id)
	if err != nil {
		return agent{}, fmt.Errorf("issue a credential to %s/%s: %w", project, id, err)
	}
	return agent{project: project, id: id, token: issued.Token}, nil
}

// setUp registers the agents and issues their credentials.
func (b *bench) setUp(ctx context.Context, t *target, adm *client.Client) (*fleet, error) {
	f := &fleet{url: t.url, run: fmt.Sprintf("%x", rand.Uint64()), records: b.cfg.Records}
	for p := range b.cfg.Projects {
		project := fmt.Sprintf("bench%d", p)
		var reqs []agent
		for r := range b.cfg.Requesters {
			a, err := register(ctx, adm, project, fmt.Sprintf("req%d", r), 0, "turns:dispatch")
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, a)
		}
		f.requesters = append(f.requesters, reqs)
	}
	for i := range b.cfg.Agents {
		// Workers are new in every run: against a serve that ran a bench
		// before (--url), a worker of the last run may still hold a claim
		// its run ended in the middle of, and a worker of capacity 1 would
		// find no room until it expired.
		project, id := fmt.Sprintf("bench%d", i%b.cfg.Projects), fmt.Sprintf("w%d-%s", i, f.run)
		a, err := register(ctx, adm, project, id, 1)
		if err != nil {
			return nil, err
		}
		f.workers = append(f.workers, a)
	}
	return f, nil
}

// lane is one worker of a run with its clients: its own, and one per
// requester of its project, all on the worker's net/http Client.
type lane struct {
	w    agent
	self *client.Client
	reqs []*client.Client
	reqA []agent
}

func (f *fleet) lane(i, projects int, hc *http.Client) *lane {
	w := f.workers[i]
	l := &lane{w: w, self: w.client(f.url, hc), reqA: f.requesters[i%projects]}
	for _, r := range l.reqA {
		l.reqs = append(l.reqs, r.client(f.url, hc))
	}
	return l
}

// recorder keeps the latencies of each command kind.
type recorder struct {
	mu    sync.Mutex
	lat   map[string][]time.Duration
	turns atomic.Int64
	cmds  atomic.Int64
	errs  atomic.Int64
	first atomic.Value // the first error, for the report
}

func (r *recorder) timed(kind string, fn func() error) error {
	t0 := time.Now()
	err := fn()
	d := time.Since(t0)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err // the run ended while the command was under way: not the server's error
	}
	if err != nil {
		r.errs.Add(1)
		r.first.CompareAndSwap(nil, err.Error())
		return err
	}
	r.cmds.Add(1)
	r.mu.Lock()
	r.lat[kind] = append(r.lat[kind], d)
	r.mu.Unlock()
	return nil
}

// turn drives one Turn of l's worker from dispatch to finish; n makes its
// key unique and picks the requester.
func (f *fleet) turn(ctx context.Context, l *lane, rec *recorder, n int64) error {
	w, r := l.w, int(n)%len(l.reqs)
	key := fmt.Sprintf("%s-%s-%d", f.run, w.id, n)
	if err := rec.timed("dispatch", func() error {
		_, err := l.reqs[r].DispatchTurn(ctx, w.project, client.DispatchRequest{
			RequestedBy: l.reqA[r].ref(), TargetAgent: w.ref(),
			Input: map[string]any{"n": n}, TurnKind: "bench", DispatchKey: key, Authority: client.Root(key)})
		return err
	}); err != nil {
		return err
	}
	var c *client.ClaimResult
	if err := rec.timed("claim", func() (err error) {
		c, err = l.self.ClaimTurn(ctx, w.project, w.id, 0)
		return err
	}); err != nil {
		return err
	}
	if c == nil {
		err := errors.New("claim answered null right after a dispatch")
		rec.errs.Add(1)
		rec.first.CompareAndSwap(nil, err.Error())
		return err
	}
	for i := range f.records {
		if err := rec.timed("record", func() error {
			_, err := l.self.AppendSemanticRecord(ctx, c.Claim, "note", map[string]any{"n": n, "i": i})
			return err
		}); err != nil {
			return err
		}
	}
	if err := rec.timed("finish", func() error {
		_, err := l.self.FinishTurn(ctx, c.Claim, client.FinishRequest{Outcome: "succeeded", FinalPayload: map[string]any{"n": n}, FinalRecordRole: "result"})
		return err
	}); err != nil {
		return err
	}
	rec.turns.Add(1)
	return nil
}

// drive runs lifecycles for d: closed loop (each worker in turn), or open
// loop at rate Turns/s over a pool of free workers. It stops early when
// stopAt Turns are done (0: no such bound).
func (b *bench) drive(ctx context.Context, shared *http.Client, f *fleet, rec *recorder, d time.Duration, rate float64, stopAt int64) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	if rate <= 0 {
		for i := range f.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hc, closeHC := b.workerHTTP(shared, f.url)
				defer closeHC()
				l := f.lane(i, b.cfg.Projects, hc)
				for n := int64(0); ctx.Err() == nil; n++ {
					if err := f.turn(ctx, l, rec, n); err != nil && ctx.Err() == nil {
						time.Sleep(10 * time.Millisecond) // back off after an error; it is counted
					}
					if stopAt > 0 && rec.turns.Load() >= stopAt {
						cancel()
					}
				}
			}()
		}
		wg.Wait()
		return
	}
	free := make(chan int, len(f.workers))
	lanes := make([]*lane, len(f.workers)) // lanes[i] is worker i's, used by one goroutine at a time
	for i := range f.workers {
		free <- i
		hc, closeHC := b.workerHTTP(shared, f.url)
		defer closeHC()
		lanes[i] = f.lane(i, b.cfg.Projects, hc)
	}
	tick := time.Duration(float64(time.Second) / rate)
	var n atomic.Int64
	for next := time.Now(); ctx.Err() == nil; next = next.Add(tick) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(next)):
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var i int
			select {
			case i = <-free:
			case <-ctx.Done():
				return
			}
			defer func() { free <- i }()
			f.turn(ctx, lanes[i], rec, n.Add(1))
		}()
	}
	wg.Wait()
}

// lagSampler samples /readyz's projection lag until stop.
func lagSampler(ctx context.Context, adm *client.Client) (max func() uint64, stop func()) {
	var m atomic.Uint64
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			var r struct {
				Projections struct {
					Lag uint64 `json:"lag"`
				} `json:"projections"`
			}
			if raw, err := adm.Readyz(ctx); err == nil && json.Unmarshal(raw, &r) == nil && r.Projections.Lag > m.Load() {
				m.Store(r.Projections.Lag)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return m.Load, func() { cancel(); <-done }
}

func (b *bench) lifecycle(ctx context.Context) (*Result, error) {
	t, err := b.start(ctx, "")
	if err != nil {
		return nil, err
	}
	defer t.close()
	res := &Result{Scenario: "lifecycle", Agents: b.cfg.Agents, Projects: b.cfg.Projects, RecordsPerTurn: b.cfg.Records, Commands: map[string]LatencyStats{}}
	if t.nc != nil {
		b.say("measuring the durable append rate, in sequence and from %d writers (2 × 1.5 s)…", b.cfg.Agents)
		lim, err := b.appendRate(ctx, t, b.cfg.Agents, 1500*time.Millisecond)
		if err != nil {
			return nil, err
		}
		res.setLimit(lim)
	}
	shared := newHTTPClient(b.cfg.Agents)
	defer shared.CloseIdleConnections()
	adm, err := t.adminClient(shared)
	if err != nil {
		return nil, err
	}
	res.Client = "net/http"
	if hc, closeHC := b.workerHTTP(shared, t.url); hc != shared {
		res.Client = "conn"
		closeHC()
	}
	b.say("registering %d agents…", b.cfg.Agents+b.cfg.Requesters*b.cfg.Projects)
	f, err := b.setUp(ctx, t, adm)
	if err != nil {
		return nil, err
	}
	rec := &recorder{lat: map[string][]time.Duration{}}
	maxLag, stopLag := lagSampler(ctx, adm)
	cpu0 := cpuTime()
	start := time.Now()
	stopProgress := b.showProgress(start, b.cfg.Duration, rec)
	b.drive(ctx, shared, f, rec, b.cfg.Duration, b.cfg.Rate, 0)
	el := time.Since(start)
	stopProgress()
	stopLag()
	res.Seconds = el.Seconds()
	res.Turns = rec.turns.Load()
	res.TurnsPerSec = float64(res.Turns) / el.Seconds()
	res.CmdsPerSec = float64(rec.cmds.Load()) / el.Seconds()
	if l := res.limit(); l > 0 {
		res.CmdRatio = res.CmdsPerSec / l
	}
	res.Errors = rec.errs.Load()
	for k, l := range rec.lat {
		res.Commands[k] = LatencyStats{N: len(l), P50: quantile(l, 0.5), P95: quantile(l, 0.95), P99: quantile(l, 0.99)}
	}
	res.MaxLag = maxLag()
	res.CPUCores = (cpuTime() - cpu0).Seconds() / el.Seconds()
	res.ProcessRSSMB = float64(rssKiB(os.Getpid(), "VmRSS")) / 1024
	if first, ok := rec.first.Load().(string); ok {
		fmt.Fprintf(b.stderr, "first error: %s\n", first)
	}
	return res, nil
}

// showProgress prints a progress line every second on a terminal.
func (b *bench) showProgress(start time.Time, d time.Duration, rec *recorder) (stop func()) {
	if !b.progress {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(b.stderr, "\r\033[K")
				return
			case <-t.C:
			}
			el := time.Since(start)
			fmt.Fprintf(b.stderr, "\r\033[K%5.1f / %.0f s  %d Turns  %.0f Turns/s  %d errors", el.Seconds(), d.Seconds(), rec.turns.Load(), float64(rec.turns.Load())/el.Seconds(), rec.errs.Load())
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (b *bench) say(format string, args ...any) {
	if !b.cfg.JSON || b.progress {
		fmt.Fprintf(b.stderr, format+"\n", args...)
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssKiB reads a field (VmRSS, VmHWM) of /proc/<pid>/status, in KiB; 0 where
// there is no /proc.
func rssKiB(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var n int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
			return n
		}
	}
	return 0
}
