package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turnledger/turnledger/bench"
)

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
	cfg := bench.DefaultConfig()
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
	fs.Float64Var(&cfg.Factor, "factor", cfg.Factor, "overload: the open loop's rate as a multiple of the capacity measured in the same run")
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
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if cfg.URL != "" && cfg.AdminToken == "" {
		cfg.AdminToken = os.Getenv("TURNLEDGER_ADMIN_TOKEN")
	}
	cfg.Command = "turnledger bench " + strings.Join(args, " ")
	return bench.Run(ctx, cfg, stdout, stderr)
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
