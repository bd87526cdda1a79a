package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

// benchConfig is `turnledger bench`'s flags.
type benchConfig struct {
	Scenario     string
	URL          string
	AdminToken   string
	NATSURL      string
	Agents       int
	Requesters   int
	Projects     int
	Duration     time.Duration
	Rate         float64
	Events       int
	Factor       float64 // overload: the open loop's multiple of the measured capacity
	Data         string
	JSON         bool
	NetHTTP      bool        // lifecycle: the workers send through net/http's Client, not a conn each
	Sync         ledger.Sync // durability of the in-process serve's embedded NATS (--sync)
	ProjSync     string      // the in-process serve's --projection-sync
	CPUProfile   string      // a pprof CPU profile of the whole run, server and load generator
	MutexProfile string      // a pprof profile of the time spent waiting for locks
	MemProfile   string      // a pprof profile of the allocations of the run
}

const benchUsage = `Usage: turnledger bench [flags]

Measures turnledger as users run it, and in the same run the limit it is
measured against: the raw guarded append rate of the same NATS server (one
JetStream publish with the per-project expectation, in sequence).

Scenarios (--scenario):
  lifecycle  --agents workers and --requesters requesters over --projects
             projects drive whole Turns (dispatch, claim, one record, finish)
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

Without --url, bench starts serve in-process on a temporary data directory
(embedded NATS, file storage, as 'turnledger serve' runs). With --url it
drives a running serve (the admin token from --admin-token or
TURNLEDGER_ADMIN_TOKEN); the append rate is then measured only with
--nats-url. The feed, replay and start scenarios make their ledger in
--data (a new temporary directory by default) and run 'turnledger serve' and
'turnledger replay' as child processes of this binary.

Flags:`

// runBench runs `turnledger bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := benchConfig{Scenario: "lifecycle", Agents: 64, Requesters: 4, Projects: 1, Duration: 10 * time.Second, Events: 1_000_000}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Scenario, "scenario", cfg.Scenario, "lifecycle, feed, replay, start or overload")
	fs.StringVar(&cfg.URL, "url", "", "drive a running serve at this URL instead of starting one")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "admin bearer of --url (default TURNLEDGER_ADMIN_TOKEN)")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "with --url: the NATS server of that serve, to measure the append rate on")
	fs.IntVar(&cfg.Agents, "agents", cfg.Agents, "workers, each an agent of capacity 1")
	fs.IntVar(&cfg.Requesters, "requesters", cfg.Requesters, "requesters per project that dispatch the Turns")
	fs.IntVar(&cfg.Projects, "projects", cfg.Projects, "projects the agents are spread over (1 is the hardest case: one project's appends are serialised)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the lifecycle load runs")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: Turns started per second (0: closed loop)")
	fs.IntVar(&cfg.Events, "events", cfg.Events, "feed, replay, start: events in the ledger; overload: events of 200 KiB in the feed its readers read (default 100)")
	fs.Float64Var(&cfg.Factor, "factor", 3, "overload: the open loop's rate as a multiple of the capacity measured in the same run")
	fs.StringVar(&cfg.Data, "data", "", "feed, replay, start: data directory to make the ledger in (default: a temporary one); an existing one with at least --events is reused")
	fs.BoolVar(&cfg.JSON, "json", false, "print the result as JSON")
	fs.BoolVar(&cfg.NetHTTP, "net-http", false, "lifecycle: workers send their commands through net/http's Client (the load generator before round 4 of the Speed section) instead of a keep-alive connection each")
	fs.Func("sync", "lifecycle without --url: the in-process serve's --sync, always (the default, as serve) or interval", syncFlag(&cfg.Sync))
	fs.Func("projection-sync", "lifecycle without --url: the in-process serve's --projection-sync, close (the default, as serve) or commit", projectionSyncFlag(&cfg.ProjSync))
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the run (server and load generator) to this file, for go tool pprof")
	fs.StringVar(&cfg.MutexProfile, "mutexprofile", "", "write a profile of lock contention during the run to this file, for go tool pprof")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write a profile of the allocations of the run (server and load generator) to this file, for go tool pprof -sample_index=alloc_space")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: bench takes no arguments, got %q", errUsage, strings.Join(fs.Args(), " "))
	}
	if cfg.Scenario == "overload" && !flagSet(fs, "events") {
		cfg.Events = 100
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if cfg.URL != "" && cfg.AdminToken == "" {
		cfg.AdminToken = os.Getenv("TURNLEDGER_ADMIN_TOKEN")
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
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
	var res *benchResult
	var err error
	switch cfg.Scenario {
	case "lifecycle":
		res, err = b.lifecycle(ctx)
	case "overload":
		res, err = b.overload(ctx)
	default:
		res, err = b.atScale(ctx)
	}
	if err != nil {
		return err
	}
	res.Command = "turnledger bench " + strings.Join(args, " ")
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res.print(stdout)
	return nil
}

func (c benchConfig) validate() error {
	var errs []error
	switch c.Scenario {
	case "lifecycle", "feed", "replay", "start", "overload":
	default:
		errs = append(errs, fmt.Errorf("--scenario must be lifecycle, feed, replay, start or overload, not %q", c.Scenario))
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
	if c.Scenario == "overload" && (c.Duration < 800*time.Millisecond || c.Events < 2) {
		errs = append(errs, errors.New("overload: --duration must be at least 800ms (eight phases) and --events at least 2"))
	}
	if c.URL != "" && c.Scenario != "lifecycle" {
		errs = append(errs, errors.New("--url goes with --scenario lifecycle only (the other scenarios make their own ledger)"))
	}
	return errors.Join(errs...)
}

// benchResult is what bench prints, in text or as JSON.
type benchResult struct {
	Command  string `json:"command"`
	Scenario string `json:"scenario"`
	// The limit, measured in the same run.
	AppendsPerSec float64 `json:"appends_per_second,omitempty"`
	AppendP50     float64 `json:"append_p50_ms,omitempty"`
	// lifecycle
	Agents       int                     `json:"agents,omitempty"`
	Projects     int                     `json:"projects,omitempty"`
	Client       string                  `json:"client,omitempty"` // how the workers send: "conn" (one connection each) or "net/http"
	Seconds      float64                 `json:"seconds,omitempty"`
	Turns        int64                   `json:"turns,omitempty"`
	TurnsPerSec  float64                 `json:"turns_per_second,omitempty"`
	CmdsPerSec   float64                 `json:"commands_per_second,omitempty"`
	CmdRatio     float64                 `json:"commands_to_appends_ratio,omitempty"`
	Errors       int64                   `json:"errors"`
	Commands     map[string]latencyStats `json:"commands,omitempty"`
	MaxLag       uint64                  `json:"max_projection_lag,omitempty"`
	CPUCores     float64                 `json:"cpu_cores,omitempty"`
	ProcessRSSMB float64                 `json:"rss_mib,omitempty"`
	// feed, replay, start
	Events       int     `json:"events,omitempty"`
	FeedP50      float64 `json:"feed_page_p50_ms,omitempty"`
	FeedP99      float64 `json:"feed_page_p99_ms,omitempty"`
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
	// overload (bench_overload.go)
	Overload *overloadResult `json:"overload,omitempty"`
}

type latencyStats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
}

func (r *benchResult) print(w io.Writer) {
	fmt.Fprintf(w, "%s\n", r.Command)
	if r.AppendsPerSec > 0 {
		fmt.Fprintf(w, "limit: guarded append %.0f/s (p50 %.3f ms), same server, same run\n", r.AppendsPerSec, r.AppendP50)
	}
	switch r.Scenario {
	case "lifecycle":
		fmt.Fprintf(w, "%d agents over %d project(s), client %s, %.1f s: %d Turns, %.0f Turns/s, %.0f commands/s", r.Agents, r.Projects, r.Client, r.Seconds, r.Turns, r.TurnsPerSec, r.CmdsPerSec)
		if r.CmdRatio > 0 {
			fmt.Fprintf(w, " = %.1f %% of the append rate", 100*r.CmdRatio)
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
		fmt.Fprintf(w, "%d events: feed page of 100 p50 %.2f ms, p99 %.2f ms; serve peak RSS %.0f MiB\n", r.Events, r.FeedP50, r.FeedP99, r.PeakRSSMB)
	case "replay":
		fmt.Fprintf(w, "%d events: replay %.0f events/s, peak RSS %.0f MiB\n", r.Events, r.ReplayPerSec, r.PeakRSSMB)
	case "overload":
		r.Overload.print(w)
	case "start":
		fmt.Fprintf(w, "%d events: ready in %.2f s, RSS when ready %.0f MiB; first request answered (write model loaded) in %.2f s, RSS then %.0f MiB (%.0f MiB anonymous, the rest mapped files)\n",
			r.Events, r.ReadySeconds, r.PeakRSSMB, r.LoadedSeconds, r.LoadedRSSMB, r.LoadedAnonMB)
	}
	if r.LedgerMB > 0 {
		fmt.Fprintf(w, "files: ledger %.0f MiB, projections %.0f MiB\n", r.LedgerMB, r.ProjectionsMB)
	}
}

type bench struct {
	cfg      benchConfig
	stderr   io.Writer
	progress bool
}

// target is a serve to drive: its URL, admin token and NATS connection
// (nil when unknown).
type target struct {
	url, admin string
	nc         *nats.Conn
	close      func() error
}

// start starts serve in-process on dir (a new temporary directory when
// empty), or connects to --url.
func (b *bench) start(ctx context.Context, dir string) (*target, error) {
	return b.startWith(ctx, dir, nil)
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
	return &target{url: s.URL(), admin: cfg.AdminToken, nc: s.NATS(), close: func() error {
		err := s.Close()
		cleanup()
		return err
	}}, nil
}

// appendRate measures the raw guarded append on the target's NATS server: one
// event at a time, in sequence, with the per-project expectation, on a stream
// of its own (file storage) that is deleted afterwards.
func (b *bench) appendRate(ctx context.Context, nc *nats.Conn, d time.Duration) (perSec, p50ms float64, err error) {
	cfg := ledger.DefaultConfig()
	cfg.Stream, cfg.Prefix = fmt.Sprintf("TLBENCH%d", rand.Uint32()), "tlbench"
	l, err := ledger.Open(ctx, nc, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if js, err := jetstream.New(nc); err == nil {
			js.DeleteStream(context.Background(), cfg.Stream)
		}
	}()
	ev := kernel.Event{Type: kernel.EvTurnRecordAppended, V: 1, ProjectID: "bench", Aggregate: kernel.AggTurn, ID: "t1",
		At: time.Now().UTC(), Actor: kernel.Actor{Kind: "admin"}, Data: &kernel.TurnRecordAppended{ClaimID: "c", TurnSeq: 1, Role: "note", Payload: json.RawMessage(`{}`)}}
	var last uint64
	var lat []time.Duration
	start := time.Now()
	for time.Since(start) < d {
		t0 := time.Now()
		seq, err := l.Append(ctx, "bench", last, ev)
		if err != nil {
			return 0, 0, fmt.Errorf("append: %w", err)
		}
		lat = append(lat, time.Since(t0))
		last = seq
	}
	el := time.Since(start)
	return float64(len(lat)) / el.Seconds(), quantile(lat, 0.5), nil
}

func quantile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[int(q*float64(len(d)-1))]) / float64(time.Millisecond)
}

// api is a small HTTP driver of the coordination API.
type api struct {
	base string
	hc   *http.Client
}

type statusErr struct {
	status int
	body   string
}

func (e *statusErr) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

func (a *api) post(ctx context.Context, headers map[string]string, path string, body any, out any) error {
	return a.do(ctx, "POST", headers, path, body, out)
}

func (a *api) do(ctx context.Context, method string, headers map[string]string, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return readAnswer(resp.StatusCode, data, out)
}

// readAnswer reads an answer of the API: a 200's body decoded into out (when
// not nil), any other status a *statusErr with the body.
func readAnswer(status int, body []byte, out any) error {
	if status != http.StatusOK {
		return &statusErr{status, strings.TrimSpace(string(body))}
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

// poster returns a poster for one worker: a conn of its own to an http://
// URL, else (--net-http, or https) a itself.
func (b *bench) poster(a *api) poster {
	if b.cfg.NetHTTP {
		return a
	}
	if c := newConn(a.base); c != nil {
		return c
	}
	return a
}

func closePoster(p poster) {
	if c, ok := p.(*conn); ok {
		c.close()
	}
}

func newAPI(base string, conns int) *api {
	return &api{base: base, hc: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: conns + 16}}}
}

// fleet is the agents of a lifecycle run: requesters and workers with their
// credentials, spread over the projects.
type fleet struct {
	requesters [][]map[string]string // by project
	workers    []worker
	run        string // a per-run prefix of dispatch keys
}

type worker struct {
	project, id string
	headers     map[string]string
}

func agentRefOf(project, id string) map[string]string {
	return map[string]string{"project_id": project, "agent_id": id}
}

// register registers an agent with the admin bearer admin, issues it a
// credential and returns its authentication headers.
func register(ctx context.Context, a *api, admin, project, id string, capacity int, grants ...string) (map[string]string, error) {
	adm := map[string]string{"Authorization": "Bearer " + admin}
	err := a.post(ctx, adm, "/v3r1/projects/"+project+"/agents:register", map[string]any{
		"spec": map[string]any{"agent_id": id, "role": "bench", "description": "turnledger bench", "enabled": true, "accepts_work": capacity > 0,
			"capacity": capacity, "capabilities": []string{}, "grants": append([]string{}, grants...), "public_metadata": map[string]any{}},
		"provenance": map[string]any{"kind": "manual", "external_ref": "turnledger bench", "payload_hash": nil}}, nil)
	if err != nil {
		return nil, fmt.Errorf("register %s/%s: %w", project, id, err)
	}
	var issued struct {
		Token string `json:"token"`
	}
	if err := a.post(ctx, adm, "/v3r1/projects/"+project+"/agents/"+id+"/credentials:issue", nil, &issued); err != nil {
		return nil, fmt.Errorf("issue a credential to %s/%s: %w", project, id, err)
	}
	return map[string]string{"X-Svc-Project-Id": project, "X-Svc-Agent-Id": id, "Authorization": "Bearer " + issued.Token}, nil
}

// setUp registers the agents and issues their credentials.
func (b *bench) setUp(ctx context.Context, a *api, admin string) (*fleet, error) {
	register := func(project, id string, capacity int, grants ...string) (map[string]string, error) {
		return register(ctx, a, admin, project, id, capacity, grants...)
	}
	f := &fleet{run: fmt.Sprintf("%x", rand.Uint64())}
	for p := range b.cfg.Projects {
		project := fmt.Sprintf("bench%d", p)
		var reqs []map[string]string
		for r := range b.cfg.Requesters {
			h, err := register(project, fmt.Sprintf("req%d", r), 0, "turns:dispatch")
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, h)
		}
		f.requesters = append(f.requesters, reqs)
	}
	for i := range b.cfg.Agents {
		// Workers are new in every run: against a serve that ran a bench
		// before (--url), a worker of the last run may still hold a claim
		// its run ended in the middle of, and a worker of capacity 1 would
		// find no room until it expired.
		project, id := fmt.Sprintf("bench%d", i%b.cfg.Projects), fmt.Sprintf("w%d-%s", i, f.run)
		h, err := register(project, id, 1)
		if err != nil {
			return nil, err
		}
		f.workers = append(f.workers, worker{project: project, id: id, headers: h})
	}
	return f, nil
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

// turn drives one Turn of w from dispatch to finish; n makes its key unique.
func (f *fleet) turn(ctx context.Context, a poster, rec *recorder, w worker, req map[string]string, n int64) error {
	reqID := req["X-Svc-Agent-Id"]
	key := fmt.Sprintf("%s-%s-%d", f.run, w.id, n)
	if err := rec.timed("dispatch", func() error {
		return a.post(ctx, req, "/v3r1/projects/"+w.project+"/turns:dispatch", map[string]any{
			"requested_by": agentRefOf(w.project, reqID), "target_agent": agentRefOf(w.project, w.id),
			"input": map[string]any{"n": n}, "turn_kind": "bench", "dispatch_key": key,
			"authority": map[string]any{"mode": "root_request", "request_id": key}, "meta": nil, "trace": nil}, nil)
	}); err != nil {
		return err
	}
	var c struct {
		Claim json.RawMessage `json:"claim"`
		Turn  struct {
			TurnID string `json:"turn_id"`
		} `json:"turn"`
	}
	if err := rec.timed("claim", func() error {
		return a.post(ctx, w.headers, "/v3r1/projects/"+w.project+"/agents/"+w.id+"/claims:claim", map[string]any{"agent": agentRefOf(w.project, w.id)}, &c)
	}); err != nil {
		return err
	}
	if c.Turn.TurnID == "" {
		err := errors.New("claim answered null right after a dispatch")
		rec.errs.Add(1)
		rec.first.CompareAndSwap(nil, err.Error())
		return err
	}
	turn := "/v3r1/projects/" + w.project + "/turns/" + c.Turn.TurnID
	if err := rec.timed("record", func() error {
		return a.post(ctx, w.headers, turn+"/semantic-records", map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{"n": n}}, nil)
	}); err != nil {
		return err
	}
	if err := rec.timed("finish", func() error {
		return a.post(ctx, w.headers, turn+":finish", map[string]any{"claim": c.Claim, "outcome": "succeeded", "final_payload": map[string]any{"n": n}, "final_record_role": "result"}, nil)
	}); err != nil {
		return err
	}
	rec.turns.Add(1)
	return nil
}

// drive runs lifecycles for d: closed loop (each worker in turn), or open
// loop at rate Turns/s over a pool of free workers. It stops early when
// stopAt Turns are done (0: no such bound).
func (b *bench) drive(ctx context.Context, a *api, f *fleet, rec *recorder, d time.Duration, rate float64, stopAt int64) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	if rate <= 0 {
		for i, w := range f.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := i % b.cfg.Projects
				reqs := f.requesters[p]
				c := b.poster(a)
				defer closePoster(c)
				for n := int64(0); ctx.Err() == nil; n++ {
					if err := f.turn(ctx, c, rec, w, reqs[int(n)%len(reqs)], n); err != nil && ctx.Err() == nil {
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
	conns := make([]poster, len(f.workers)) // conns[i] is worker i's, used by one goroutine at a time
	for i := range f.workers {
		free <- i
		conns[i] = b.poster(a)
		defer closePoster(conns[i])
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
			w := f.workers[i]
			reqs := f.requesters[i%b.cfg.Projects]
			k := n.Add(1)
			f.turn(ctx, conns[i], rec, w, reqs[int(k)%len(reqs)], k)
		}()
	}
	wg.Wait()
}

// lagSampler samples /readyz's projection lag until stop.
func lagSampler(ctx context.Context, a *api) (max func() uint64, stop func()) {
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
			if a.do(ctx, "GET", nil, "/readyz", nil, &r) == nil && r.Projections.Lag > m.Load() {
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

func (b *bench) lifecycle(ctx context.Context) (*benchResult, error) {
	t, err := b.start(ctx, "")
	if err != nil {
		return nil, err
	}
	defer t.close()
	res := &benchResult{Scenario: "lifecycle", Agents: b.cfg.Agents, Projects: b.cfg.Projects, Commands: map[string]latencyStats{}}
	if t.nc != nil {
		b.say("measuring the guarded append rate (2 s)…")
		if res.AppendsPerSec, res.AppendP50, err = b.appendRate(ctx, t.nc, 2*time.Second); err != nil {
			return nil, err
		}
	}
	a := newAPI(t.url, b.cfg.Agents)
	res.Client = "net/http"
	if _, ok := b.poster(a).(*conn); ok {
		res.Client = "conn"
	}
	b.say("registering %d agents…", b.cfg.Agents+b.cfg.Requesters*b.cfg.Projects)
	f, err := b.setUp(ctx, a, t.admin)
	if err != nil {
		return nil, err
	}
	rec := &recorder{lat: map[string][]time.Duration{}}
	maxLag, stopLag := lagSampler(ctx, a)
	cpu0 := cpuTime()
	start := time.Now()
	stopProgress := b.showProgress(start, b.cfg.Duration, rec)
	b.drive(ctx, a, f, rec, b.cfg.Duration, b.cfg.Rate, 0)
	el := time.Since(start)
	stopProgress()
	stopLag()
	res.Seconds = el.Seconds()
	res.Turns = rec.turns.Load()
	res.TurnsPerSec = float64(res.Turns) / el.Seconds()
	res.CmdsPerSec = float64(rec.cmds.Load()) / el.Seconds()
	if res.AppendsPerSec > 0 {
		res.CmdRatio = res.CmdsPerSec / res.AppendsPerSec
	}
	res.Errors = rec.errs.Load()
	for k, l := range rec.lat {
		res.Commands[k] = latencyStats{N: len(l), P50: quantile(l, 0.5), P95: quantile(l, 0.95), P99: quantile(l, 0.99)}
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

// atScale runs the feed, replay and start scenarios on a data directory
// holding --events events.
func (b *bench) atScale(ctx context.Context) (*benchResult, error) {
	dir := b.cfg.Data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "turnledger-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	res := &benchResult{Scenario: b.cfg.Scenario, Events: b.cfg.Events}
	if err := b.fill(ctx, dir, res); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	switch b.cfg.Scenario {
	case "replay":
		start := time.Now()
		cmd := exec.CommandContext(ctx, self, "replay", "--data", dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("turnledger replay: %v\n%s", err, out)
		}
		res.ReplayPerSec = float64(b.cfg.Events) / time.Since(start).Seconds()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			res.PeakRSSMB = float64(ru.Maxrss) / 1024
		}
	case "start", "feed":
		srv, err := startChild(ctx, self, dir)
		if err != nil {
			return nil, err
		}
		defer srv.stop()
		res.ReadySeconds = srv.ready.Seconds()
		res.PeakRSSMB = float64(rssKiB(srv.cmd.Process.Pid, "VmRSS")) / 1024
		if err := srv.awaitLoaded(ctx); err != nil {
			return nil, err
		}
		res.LoadedSeconds = srv.loaded.Seconds()
		res.LoadedRSSMB = float64(rssKiB(srv.cmd.Process.Pid, "VmRSS")) / 1024
		res.LoadedAnonMB = float64(rssKiB(srv.cmd.Process.Pid, "RssAnon")) / 1024
		if b.cfg.Scenario == "feed" {
			if err := b.feedPages(ctx, srv, res); err != nil {
				return nil, err
			}
			res.PeakRSSMB = float64(rssKiB(srv.cmd.Process.Pid, "VmHWM")) / 1024
		}
	}
	res.LedgerMB = dirMiB(filepath.Join(dir, "nats"))
	res.ProjectionsMB = dirMiB(filepath.Join(dir, "projections.db"))
	return res, nil
}

// fill makes the data directory hold at least --events events, through serve
// as users make them (lifecycles over HTTP, 4 events a Turn after the set-up).
func (b *bench) fill(ctx context.Context, dir string, res *benchResult) error {
	if head := ledgerHead(dir); head >= uint64(b.cfg.Events) {
		b.say("reusing %s: %d events", dir, head)
		return nil
	}
	t, err := b.start(ctx, dir)
	if err != nil {
		return err
	}
	defer t.close()
	if res.AppendsPerSec, res.AppendP50, err = b.appendRate(ctx, t.nc, time.Second); err != nil {
		return err
	}
	a := newAPI(t.url, b.cfg.Agents)
	f, err := b.setUp(ctx, a, t.admin)
	if err != nil {
		return err
	}
	setup := 2 * (b.cfg.Agents + b.cfg.Requesters*b.cfg.Projects)
	turns := int64(max(b.cfg.Events-setup, 0)+3) / 4
	b.say("making a ledger of %d events (%d Turns) in %s…", b.cfg.Events, turns, dir)
	rec := &recorder{lat: map[string][]time.Duration{}}
	stop := b.showProgress(time.Now(), 0, rec)
	if turns > 0 {
		b.drive(ctx, a, f, rec, 24*time.Hour, 0, turns)
	}
	stop()
	if first, ok := rec.first.Load().(string); ok {
		return fmt.Errorf("making the ledger: %d errors, the first: %s", rec.errs.Load(), first)
	}
	return ctx.Err()
}

// ledgerHead is the number of events of the ledger in dir, from the
// projections' checkpoint (0 when there are none).
func ledgerHead(dir string) uint64 {
	if _, err := os.Stat(filepath.Join(dir, "projections.db")); err != nil {
		return 0
	}
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir, cfg.AdminToken, cfg.ReapInterval = "127.0.0.1:0", dir, "tladm_bench", 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := serve.Start(context.Background(), cfg)
	if err != nil {
		return 0
	}
	defer s.Close()
	h, _ := s.Ledger().Head(context.Background())
	return h
}

// child is `turnledger serve` run as a child process.
type child struct {
	cmd   *exec.Cmd
	url   string
	start time.Time
	ready time.Duration
	// loaded: until the first request of the bench project was answered
	// (serve answers 503 while the project's write model loads).
	loaded time.Duration
	admin  string
	done   chan struct{}
}

var servingLine = regexp.MustCompile(`serving on (http://\S+),`)

func startChild(ctx context.Context, self, dir string) (*child, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, self, "serve", "--data", dir, "--addr", "127.0.0.1:0", "--reap-interval", "0")
	cmd.Env = append(os.Environ(), "TURNLEDGER_ADMIN_TOKEN=tladm_bench")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, start: start, admin: "tladm_bench", done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		defer close(c.done)
		go func() { cmd.Wait(); pw.Close() }()
		buf := make([]byte, 4096)
		var out []byte
		for {
			n, err := pr.Read(buf)
			out = append(out, buf[:n]...)
			if m := servingLine.FindSubmatch(out); m != nil {
				found <- string(m[1])
				io.Copy(io.Discard, pr)
				return
			}
			if err != nil {
				close(found)
				return
			}
		}
	}()
	var ok bool
	select {
	case c.url, ok = <-found:
	case <-time.After(5 * time.Minute):
	}
	if !ok {
		cmd.Process.Kill()
		return nil, errors.New("serve did not start")
	}
	a := newAPI(c.url, 1)
	for {
		if a.do(ctx, "GET", nil, "/readyz", nil, nil) == nil {
			break
		}
		if ctx.Err() != nil || time.Since(start) > 10*time.Minute {
			c.stop()
			return nil, errors.New("serve did not become ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.ready = time.Since(start)
	return c, nil
}

// awaitLoaded asks for a feed page of the bench project until it is
// answered (not 503) and sets c.loaded.
func (c *child) awaitLoaded(ctx context.Context) error {
	a := newAPI(c.url, 1)
	adm := map[string]string{"Authorization": "Bearer " + c.admin}
	for {
		err := a.do(ctx, "GET", adm, "/v3r1/projects/bench0/projection/feed?limit=1", nil, nil)
		var se *statusErr
		if err == nil {
			c.loaded = time.Since(c.start)
			return nil
		}
		if !errors.As(err, &se) || se.status != http.StatusServiceUnavailable || ctx.Err() != nil || time.Since(c.start) > 10*time.Minute {
			return fmt.Errorf("the first request of the bench project: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *child) stop() {
	c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
	}
}

// feedPages reads project feed pages of 100 at random cursors of the ledger's
// end part (the last tenth), as a reader following a long ledger does.
func (b *bench) feedPages(ctx context.Context, c *child, res *benchResult) error {
	a := newAPI(c.url, 1)
	adm := map[string]string{"Authorization": "Bearer " + c.admin}
	n := min(b.cfg.Events, 1_000_000)
	var lat []time.Duration
	for i := range 2000 {
		after := uint64(n - n/10 + rand.IntN(max(n/10, 1)))
		if i < 100 { // warm up
			after = uint64(rand.IntN(n))
		}
		t0 := time.Now()
		if err := a.do(ctx, "GET", adm, fmt.Sprintf("/v3r1/projects/bench0/projection/feed?after_ledger_seq=%d&limit=100", after), nil, nil); err != nil {
			return fmt.Errorf("feed page: %w", err)
		}
		if i >= 100 {
			lat = append(lat, time.Since(t0))
		}
	}
	res.FeedP50, res.FeedP99 = quantile(lat, 0.5), quantile(lat, 0.99)
	return nil
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

func dirMiB(path string) float64 {
	var n int64
	filepath.Walk(path, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return float64(n) / (1 << 20)
}
