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

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/kernel"
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
	var auth natsAuth
	addNATSFlags(fs, &auth)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "Usage: turnledger replay [flags]")
		fmt.Fprintln(w, "\nRebuilds every projection from ledger_seq 1 into a new file and swaps it in.")
		fmt.Fprintln(w, "Stop turnledger serve on the same data directory first.")
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: replay takes no arguments", errUsage)
	}
	auth.fromEnv(os.Getenv)
	if err := auth.validate(*natsURL); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return replay(ctx, *dataDir, *natsURL, auth, ledger.DefaultConfig(), stdout)
}

func replay(ctx context.Context, dataDir, natsURL string, auth natsAuth, lcfg ledger.Config, out io.Writer) error {
	live := filepath.Join(dataDir, "projections.db")
	// Replay rebuilds from an existing ledger; it never makes a data
	// directory. Embedded, the directory must hold the ledger (nats/) or the
	// projections of one.
	if _, err := os.Stat(dataDir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the data directory %s does not exist, so it holds no ledger: give the --data of the turnledger serve whose projections to rebuild", dataDir)
	}
	if natsURL == "" && !exists(filepath.Join(dataDir, "nats")) && !exists(live) {
		return fmt.Errorf("%s holds no turnledger ledger (neither nats/ nor projections.db): give the --data of the turnledger serve whose projections to rebuild", dataDir)
	}
	// Make sure no serve holds the live file, by asking its lock: the file
	// itself is never opened as a database here, so a damaged one cannot
	// crash the tool that repairs it.
	if err := checkProjectionsFree(dataDir); err != nil {
		return err
	}
	damaged := projection.Check(live)
	if errors.Is(damaged, projection.ErrInUse) {
		return projectionsInUse(dataDir)
	} else if damaged != nil && !errors.Is(damaged, projection.ErrDamaged) {
		return damaged
	}
	emb, nc, l, err := openLedger(ctx, dataDir, natsURL, auth, lcfg, ledger.SyncAlways)
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
	bar := newReplayProgress(out, time.Now)
	progress := bar.update
	models := &writeModels{Reader: l, projects: map[string]*kernel.Project{}}
	err = projection.Rebuild(ctx, next, models, progress)
	bar.done()
	if err != nil {
		return err
	}
	if err := models.save(next); err != nil {
		return err
	}
	if damaged != nil {
		// Keep the damaged file for a post-mortem instead of overwriting it.
		aside, err := projection.MoveAside(live, time.Now())
		if errors.Is(err, projection.ErrInUse) {
			return projectionsInUse(dataDir)
		} else if err != nil {
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

// writeModels is the ledger as Rebuild reads it, folding every project's
// write model from the same events on the way (the decoding is shared, the
// fold is a few per cent of it), so that the rebuilt file holds their
// snapshots and the next serve need not fold the whole history again.
type writeModels struct {
	projection.Reader
	projects map[string]*kernel.Project
}

func (w *writeModels) ReadAll(ctx context.Context, after uint64, fn func([]kernel.Recorded, uint64) error) (uint64, error) {
	return w.Reader.ReadAll(ctx, after, func(batch []kernel.Recorded, head uint64) error {
		for _, r := range batch {
			if r.Seq > head {
				break
			}
			p := w.projects[r.Event.ProjectID]
			if p == nil {
				p = engine.NewProject(r.Event.ProjectID)
				w.projects[r.Event.ProjectID] = p
			}
			kernel.Evolve(p, r)
		}
		return fn(batch, head)
	})
}

// save writes the snapshots into the rebuilt file at path.
func (w *writeModels) save(path string) error {
	st, err := projection.Open(path, projection.DefaultConfig())
	if err != nil {
		return err
	}
	for id, p := range w.projects {
		data, err := engine.EncodeSnapshot(p)
		if err == nil {
			err = st.SaveSnapshot(id, p.Seq, data)
		}
		if err != nil {
			st.Close()
			return fmt.Errorf("snapshot of project %s: %w", id, err)
		}
	}
	return st.Close()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
