package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
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
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: turnledger replay [flags]")
		fmt.Fprintln(stderr, "\nRebuilds every projection from ledger_seq 1 into a new file and swaps it in.")
		fmt.Fprintln(stderr, "Stop turnledger serve on the same data directory first.")
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
		return fmt.Errorf("%w: replay takes no arguments", errUsage)
	}
	return replay(ctx, *dataDir, *natsURL, ledger.DefaultConfig(), stdout)
}

func replay(ctx context.Context, dataDir, natsURL string, lcfg ledger.Config, out io.Writer) error {
	live := filepath.Join(dataDir, "projections.db")
	// Make sure no serve holds the live file, by asking its lock: the file
	// itself is never opened as a database here, so a damaged one cannot
	// crash the tool that repairs it.
	if locked, err := projection.Locked(live); err != nil {
		return err
	} else if locked {
		return fmt.Errorf("%s is in use (is turnledger serve running on %s? stop it first)", live, dataDir)
	}
	damaged := projection.Check(live)
	if damaged != nil && !errors.Is(damaged, projection.ErrDamaged) {
		return damaged
	}
	emb, nc, l, err := openLedger(ctx, dataDir, natsURL, lcfg, ledger.SyncAlways)
	if err != nil {
		return err
	}
	defer func() {
		nc.Close()
		if emb != nil {
			emb.Close()
		}
	}()
	next := live + ".rebuild"
	if err := os.Remove(next); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	start := time.Now()
	var lastShown time.Time
	progress := func(applied, head uint64) {
		if time.Since(lastShown) < 500*time.Millisecond && applied < head {
			return
		}
		lastShown = time.Now()
		pct := 100.0
		if head > 0 {
			pct = 100 * float64(applied) / float64(head)
		}
		fmt.Fprintf(out, "replayed %d/%d events (%.1f%%)\n", applied, head, pct)
	}
	if err := projection.Rebuild(ctx, next, l, progress); err != nil {
		return err
	}
	if damaged != nil {
		// Keep the damaged file for a post-mortem instead of overwriting it.
		aside, err := projection.MoveAside(live, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "the old projection file was damaged (%v); moved it to %s\n", damaged, aside)
	}
	if err := projection.Install(next, live); err != nil {
		return fmt.Errorf("swap in the rebuilt projections: %w", err)
	}
	fmt.Fprintf(out, "rebuilt %s in %s\n", live, time.Since(start).Round(time.Millisecond))
	return nil
}
