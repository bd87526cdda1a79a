package serve

import (
	"context"
	"errors"
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

// Replay rebuilds every projection of cfg.DataDir from ledger_seq 1 (the
// ledger of cfg.NATSURL, or the embedded server's in the data directory)
// into a new file, showing its progress on out, and swaps it in for the
// live one, keeping a damaged one aside. No service may be running on the
// same data directory: Replay refuses while one holds its projection file.
func Replay(parent context.Context, cfg Config, out io.Writer) (err error) {
	dataDir, natsURL := cfg.DataDir, cfg.NATSURL
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
	// The live file is checked (read whole: on a cold page cache seconds of
	// reading) while the rebuild runs and hides it.
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	check := checkLive(live, cancel)
	defer func() { <-check.done }() // no goroutine outlives Replay
	defer func() {
		if err != nil && ctx.Err() != nil && parent.Err() == nil {
			// The check stopped the rebuild: its refusal is the answer.
			_, err = check.result(dataDir)
		}
	}()
	emb, nc, l, err := openLedger(ctx, dataDir, natsURL, cfg.NATSAuth, cfg.Ledger, ledger.SyncAlways)
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
	// Below the retention horizon the events are in the archive.
	var src projection.Reader = l
	archiveDir := cfg.Retention.ArchiveDir
	if archiveDir == "" {
		archiveDir = filepath.Join(dataDir, "archive")
	}
	a, err := openArchive(ctx, nc, archiveDir, false, 0)
	if err != nil {
		return err
	}
	if a != nil {
		src = ledger.WithArchive(l, a)
	}
	models := &writeModels{Reader: src, projects: map[string]*kernel.Project{}}
	err = projection.Rebuild(ctx, next, models, progress)
	bar.done()
	if err != nil {
		return err
	}
	damaged, refused := check.result(dataDir)
	if refused != nil {
		os.Remove(next)
		return refused
	}
	carry := ""
	if damaged == nil && exists(live) {
		carry = live // its retention horizon and retired Turns (projection.CarryRetirement)
	}
	if err := models.save(next, carry); err != nil {
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

// liveCheck is projection.Check of the live projection file, run beside
// the rebuild.
type liveCheck struct {
	done chan struct{}
	err  error
}

// checkLive checks the file at path on a goroutine of its own. It calls
// stop when the check cannot tell whether the file is damaged (it is
// unreadable, or a serve took it meanwhile): the rebuild is of no use then.
func checkLive(path string, stop func()) *liveCheck {
	c := &liveCheck{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = projection.Check(path)
		if c.err != nil && !errors.Is(c.err, projection.ErrDamaged) {
			stop()
		}
	}()
	return c
}

// result waits for the check: damaged is the damage it found (nil: none or
// no file), refused an error that ends the replay.
func (c *liveCheck) result(dataDir string) (damaged, refused error) {
	<-c.done
	switch {
	case c.err == nil, errors.Is(c.err, projection.ErrDamaged):
		return c.err, nil
	case errors.Is(c.err, projection.ErrInUse):
		return nil, projectionsInUse(dataDir)
	default:
		return nil, c.err
	}
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

// save writes the snapshots into the rebuilt file at path, and the
// retirement of the live file carry (none when "").
func (w *writeModels) save(path, carry string) error {
	st, err := projection.Open(path, projection.DefaultConfig())
	if err != nil {
		return err
	}
	if carry != "" {
		if err := st.CarryRetirement(carry); err != nil {
			st.Close()
			return err
		}
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
