package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// runServe runs `turnledger serve`: the coordination API on an embedded NATS
// server (or --nats-url), until ctx ends.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := defaultServiceConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address of the API (loopback by default)")
	fs.StringVar(&cfg.DataDir, "data", cfg.DataDir, "data directory: projections, admin token, embedded NATS store")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "use this NATS server or cluster instead of the embedded one")
	fs.DurationVar(&cfg.Kernel.ClaimTTL, "claim-ttl", cfg.Kernel.ClaimTTL, "lease of a claim; renew extends it by as much")
	fs.DurationVar(&cfg.Kernel.CredentialTTL, "credential-ttl", cfg.Kernel.CredentialTTL, "lifetime of an agent credential")
	fs.DurationVar(&cfg.ReapInterval, "reap-interval", cfg.ReapInterval, "how often expired claims are released (0 turns the reaper off)")
	fs.IntVar(&cfg.Kernel.MaxDepth, "max-depth", cfg.Kernel.MaxDepth, "deepest child Turn")
	fs.Func("sync", "embedded NATS durability: always (fsync each append: survives power loss; the default) or interval (fsync every 2m: survives a process crash)", syncFlag(&cfg.Sync))
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: turnledger serve [flags]")
		fmt.Fprintln(stderr, "\nServes the agent work coordination API. The admin bearer token is")
		fmt.Fprintln(stderr, "TURNLEDGER_ADMIN_TOKEN, or else the one kept in <data>/admin-token (made on first start).")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: serve takes no arguments, got %q", errUsage, strings.Join(fs.Args(), " "))
	}
	cfg.AdminToken = os.Getenv("TURNLEDGER_ADMIN_TOKEN")
	s, err := startService(ctx, cfg)
	if err != nil {
		return err
	}
	backend := "embedded NATS (JetStream under " + cfg.DataDir + "/nats)"
	if cfg.NATSURL != "" {
		backend = "NATS at " + redactURL(cfg.NATSURL)
	}
	fmt.Fprintf(stdout, "turnledger serving on %s, ledger on %s, projections in %s/projections.db\n", s.URL(), backend, cfg.DataDir)
	if s.tokenPath != "" {
		fmt.Fprintf(stdout, "admin bearer token: in %s (set TURNLEDGER_ADMIN_TOKEN to choose your own)\n", s.tokenPath)
	} else {
		fmt.Fprintln(stdout, "admin bearer token: from TURNLEDGER_ADMIN_TOKEN")
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "shutting down")
	return s.Close()
}
