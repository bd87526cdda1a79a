package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turnledger/turnledger/bench"
	"github.com/turnledger/turnledger/internal/cliflag"
)

// runBench runs `turnledger bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := bench.DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Scenario, "scenario", cfg.Scenario, "lifecycle, feed, replay, start, overload, retention or readscale")
	fs.StringVar(&cfg.URL, "url", "", "drive a running serve at this URL instead of starting one")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "admin bearer of --url (default TURNLEDGER_ADMIN_TOKEN)")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "with --url: the NATS server of that serve, to measure the append rate on")
	fs.IntVar(&cfg.Agents, "agents", cfg.Agents, "workers, each an agent of capacity 1")
	fs.IntVar(&cfg.Requesters, "requesters", cfg.Requesters, "requesters per project that dispatch the Turns")
	fs.IntVar(&cfg.Records, "records", cfg.Records, "lifecycle: records a worker appends to each Turn before its finish (which writes the final record); 0 makes the lifecycle dispatch, claim, finish")
	fs.IntVar(&cfg.Projects, "projects", cfg.Projects, "projects the agents are spread over (1 is the hardest case: one project's appends are serialised)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the lifecycle load runs")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: Turns started per second (0: closed loop)")
	fs.IntVar(&cfg.Events, "events", cfg.Events, "feed, replay, start, readscale: events in the ledger; overload: events of 200 KiB in the feed its readers read (default 100)")
	fs.Float64Var(&cfg.Factor, "factor", cfg.Factor, "overload: the open loop's rate as a multiple of the capacity measured in the same run")
	fs.StringVar(&cfg.Data, "data", "", "feed, replay, start, readscale: data directory to make the ledger in (default: a temporary one); an existing one with at least --events is reused")
	fs.IntVar(&cfg.Instances, "instances", cfg.Instances, "readscale: serve instances on the one NATS server (phases with 1 … this many)")
	fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "readscale: feed readers in a closed loop, spread over the instances of a phase")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "readscale: how many times each instance count is measured (--duration each), alternating")
	fs.IntVar(&cfg.GOMAXPROCS, "gomaxprocs", 0, "readscale: each serve's GOMAXPROCS (0: Go's default, every core it may run on)")
	fs.BoolVar(&cfg.Pin, "pin", false, "readscale: bind serve instance i to core i mod cores (taskset), and the bench (readers, NATS server) to the cores left, if any")
	fs.BoolVar(&cfg.JSON, "json", false, "print the result as JSON")
	fs.BoolVar(&cfg.NetHTTP, "net-http", false, "lifecycle: workers send their commands through net/http's Client (the load generator before round 4 of the Speed section) instead of a keep-alive connection each")
	fs.Func("sync", "lifecycle without --url: the in-process serve's --sync, always (the default, as serve) or interval", syncFlag(&cfg.Sync))
	fs.Func("projection-sync", "lifecycle without --url: the in-process serve's --projection-sync, close (the default, as serve) or commit", projectionSyncFlag(&cfg.ProjSync))
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the run (server and load generator) to this file, for go tool pprof")
	fs.StringVar(&cfg.MutexProfile, "mutexprofile", "", "write a profile of lock contention during the run to this file, for go tool pprof")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write a profile of the allocations of the run (server and load generator) to this file, for go tool pprof -sample_index=alloc_space")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: turnledger bench [flags]\n\n"+bench.Help+"Flags:\n")
		fs.PrintDefaults()
	}
	if help, err := cliflag.Parse(fs, args, stdout); help || err != nil {
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
