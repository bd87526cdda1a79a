package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turnledger/turnledger/internal/cliflag"
	"github.com/turnledger/turnledger/serve"
)

// runServe runs `turnledger serve`: the coordination API on an embedded NATS
// server (or --nats-url), until ctx ends.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := serve.DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address of the API (loopback by default)")
	fs.StringVar(&cfg.DataDir, "data", cfg.DataDir, "data directory: projections, admin token, embedded NATS store")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "use this NATS server or cluster (comma-separated URLs) instead of the embedded one")
	fs.IntVar(&cfg.Ledger.Replicas, "replicas", cfg.Ledger.Replicas, "replicas of the ledger stream when serve creates it (3 on a 3-node cluster; more than 1 needs --nats-url); an existing stream is used as it is")
	addNATSFlags(fs, &cfg.NATSAuth)
	fs.DurationVar(&cfg.Kernel.ClaimTTL, "claim-ttl", cfg.Kernel.ClaimTTL, "lease of a claim; renew extends it by as much")
	fs.DurationVar(&cfg.Kernel.CredentialTTL, "credential-ttl", cfg.Kernel.CredentialTTL, "lifetime of an agent credential")
	fs.DurationVar(&cfg.ReapInterval, "reap-interval", cfg.ReapInterval, "how often what is due is done: expired claims released, Turns past their claim_by, deadline or input_by finished (0 turns the reaper off)")
	fs.StringVar(&cfg.PublicURL, "public-url", "", "the URL people reach the API at: the base of input_url and of the MCP resource metadata (default: as the request reached serve)")
	fs.Func("mcp-allowed-origin", "a browser origin (https://app.example) besides serve's own that may call the MCP endpoint; repeat for more", func(v string) error { cfg.MCPOrigins = append(cfg.MCPOrigins, v); return nil })
	fs.BoolVar(&cfg.MetricsOpen, "metrics-public", false, "serve /metrics to any client (by default only to loopback clients)")
	fs.IntVar(&cfg.Kernel.MaxDepth, "max-depth", cfg.Kernel.MaxDepth, "deepest child Turn")
	fs.DurationVar(&cfg.Retention.RetainFinished, "retain-finished", 0, "retention: archive events older than this to <data>/archive and purge them from the stream, and retire Turn trees finished longer ago than this (and than the 24h idempotency memory) from the projections (0: keep everything; see docs/retention.md)")
	fs.DurationVar(&cfg.Retention.Interval, "retention-interval", serve.DefaultRetentionInterval, "time between retention runs (with --retain-finished)")
	fs.StringVar(&cfg.Retention.ArchiveDir, "archive-dir", "", "the archive directory (default <data>/archive), or nats://<bucket>: a NATS object store bucket on the ledger's server, replicated as the stream")
	fs.Float64Var(&cfg.Retention.CompactFreeShare, "compact-free-share", cfg.Retention.CompactFreeShare, "at start, compact projections.db when at least this share of its pages is free (after retention retired much of it); 0: never")
	fs.Func("projection-sync", "when the projection file is fsynced: close (at shutdown; a crash of the machine makes serve rebuild it from the ledger; the default) or commit (every commit)", projectionSyncFlag(&cfg.ProjectionSync))
	fs.Func("sync", "embedded NATS durability (not with --nats-url, whose server keeps its own): always (fsync each append: survives power loss; the default) or interval (fsync every 2m: survives a process crash)", syncFlag(&cfg.Sync))
	var logOpts cliflag.LogOptions
	logOpts.Register(fs)
	limitFlags(fs, &cfg.Limits)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "Usage: turnledger serve [flags]")
		fmt.Fprintln(w, "\nServes the agent work coordination API. The admin bearer token is")
		fmt.Fprintln(w, "TURNLEDGER_ADMIN_TOKEN, or else the one kept in <data>/admin-token (made on first start).")
		fmt.Fprintln(w, "Every route, with who may call it, its body and its response: docs/api.md.")
		fmt.Fprintln(w, natsEnvHelp)
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
	if help, err := cliflag.Parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: serve takes no arguments, got %q", errUsage, strings.Join(fs.Args(), " "))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if err := validateBackend(cfg.NATSURL, cfg.Ledger.Replicas, given["sync"]); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	logger, err := logOpts.Logger(stderr)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	cfg.RequestLog = true
	if err := validateLimits(cfg.Limits); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cfg.Limits.SetMemoryLimit()
	cfg.AdminToken = os.Getenv("TURNLEDGER_ADMIN_TOKEN")
	cliflag.WarnIfNotLoopback(logger, cfg.Addr)
	natsAuthFromEnv(&cfg.NATSAuth, os.Getenv)
	if err := cfg.NATSAuth.Validate(cfg.NATSURL); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return serve.Run(ctx, cfg, stdout)
}
