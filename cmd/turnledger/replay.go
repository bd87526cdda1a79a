package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/turnledger/turnledger/internal/cliflag"
	"github.com/turnledger/turnledger/internal/cpuprof"
	"github.com/turnledger/turnledger/serve"
)

// runReplay runs `turnledger replay`: it rebuilds every projection from
// ledger_seq 1 into a new file, showing progress, and swaps it in for the
// live one. serve must not be running on the same data directory (the
// embedded NATS store and the projection file are locked while it runs).
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data", "./data", "data directory of the turnledger serve whose projections to rebuild")
	natsURL := fs.String("nats-url", "", "the NATS server serve uses, when it is not the embedded one")
	archiveDir := fs.String("archive-dir", "", "the archive of the events below the retention horizon (default <data>/archive, read when it exists)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the replay to this file, for go tool pprof")
	cfg := serve.DefaultConfig()
	var auth serve.NATSAuth
	addNATSFlags(fs, &auth)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "Usage: turnledger replay [flags]")
		fmt.Fprintln(w, "\nRebuilds every projection from ledger_seq 1 into a new file and swaps it in.")
		fmt.Fprintln(w, "Stop turnledger serve on the same data directory first.")
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
	if help, err := cliflag.Parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: replay takes no arguments", errUsage)
	}
	natsAuthFromEnv(&auth, os.Getenv)
	if err := auth.Validate(*natsURL); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cfg.DataDir, cfg.NATSURL, cfg.NATSAuth = *dataDir, *natsURL, auth
	cfg.Retention.ArchiveDir = *archiveDir
	if *cpuProfile != "" {
		stop, err := cpuprof.Start(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	return serve.Replay(ctx, cfg, stdout)
}
