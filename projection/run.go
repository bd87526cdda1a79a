package projection

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnledger/turnledger/kernel"
)

// Source delivers the ledger to a Projector. The ledger implements it.
type Source interface {
	// Follow calls fn with the events after ledger_seq after, in order, in
	// batches, and keeps following new events until ctx ends or fn or the
	// source fails; it returns that error. It calls fn with an empty batch
	// once it has handed over every event it holds and expects no other
	// soon: the Projector then commits what it folded (Store.Fold).
	Follow(ctx context.Context, after uint64, fn func(batch []kernel.Recorded) error) error
}

// Projector keeps a Store folded from a Source.
type Projector struct {
	store *Store
	src   Source
	retry time.Duration
	now   func() time.Time

	mu     sync.Mutex
	status Status
}

// Status is what a Projector reports for diagnostics.
type Status struct {
	Checkpoint  uint64     `json:"checkpoint"`
	Failing     bool       `json:"failing"` // the last follow failed and nothing was applied since
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// NewProjector returns a Projector that folds src into store. Its retry
// interval and clock come from the store's Config.
func NewProjector(store *Store, src Source) *Projector {
	return &Projector{store: store, src: src, retry: store.cfg.RetryInterval, now: store.cfg.Now}
}

// Run follows the source from the store's checkpoint and folds each batch
// (Store.Fold), committing when the source has caught up (an empty batch) or
// the transaction has been open for the commit interval, until ctx ends, and
// returns ctx's error. When following fails it commits what it folded,
// records the error, waits the retry interval, and follows again from the
// checkpoint.
func (p *Projector) Run(ctx context.Context) error {
	apply := func(batch []kernel.Recorded) error {
		if len(batch) == 0 {
			return p.store.CaughtUp()
		}
		if err := p.store.Fold(batch); err != nil {
			return err
		}
		p.mu.Lock()
		p.status.Failing = false
		p.mu.Unlock()
		return nil
	}
	for {
		err := p.src.Follow(ctx, p.store.Checkpoint(), apply)
		// What was folded before it stopped is committed, so that the next
		// Follow starts after it (should that fail, it starts before it).
		if cerr := p.store.Commit(); err == nil {
			err = cerr
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			err = errors.New("projection: source stopped following")
		}
		p.mu.Lock()
		p.status.Failing = true
		p.status.LastError = err.Error()
		p.status.LastErrorAt = ptr(p.now().UTC())
		p.mu.Unlock()
		t := time.NewTimer(p.retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Status returns the projector's diagnostics.
func (p *Projector) Status() Status {
	p.mu.Lock()
	st := p.status
	p.mu.Unlock()
	st.Checkpoint = p.store.Checkpoint()
	return st
}

// Reader reads the ledger for a rebuild. The ledger implements it.
type Reader interface {
	// ReadAll calls fn, in order and in batches, with every event with
	// after < ledger_seq <= head, where head is the ledger's last ledger_seq
	// when ReadAll starts, and returns head. fn gets head too, for progress.
	// If fn returns an error, ReadAll stops and returns it.
	ReadAll(ctx context.Context, after uint64, fn func(batch []kernel.Recorded, head uint64) error) (head uint64, err error)
}

// Rebuild folds the ledger from ledger_seq 1 up to its head at the time of
// the call into a new projection file at path, which must not exist. It
// calls progress (when not nil) after each batch with the checkpoint reached
// and the head. The caller swaps the file in: close the live store, Install,
// open. On error the new file is removed.
func Rebuild(ctx context.Context, path string, src Reader, progress func(applied, head uint64)) (err error) {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("projection: rebuild: %s already exists", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("projection: rebuild: %w", err)
	}
	cfg := DefaultConfig()
	cfg.NoSync = true // one sync at the end
	st, err := Open(path, cfg)
	if err != nil {
		return err
	}
	st.unread = true // nobody reads the new file until it is installed
	defer func() {
		if cerr := st.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("projection: rebuild: close: %w", cerr)
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	err = rebuildFold(ctx, st, src, progress)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("projection: rebuild: %w", err)
	}
	if err := st.db.Sync(); err != nil {
		return fmt.Errorf("projection: rebuild: sync: %w", err)
	}
	return nil
}

// Install moves a rebuilt projection file over the live one (the live store
// must be closed), with the rebuilt file's page sum (pagesum.go) or, when it
// has none, without the live one's, and syncs the directory, so the swap
// survives a crash.
func Install(rebuilt, live string) error {
	if err := os.Rename(rebuilt, live); err != nil {
		return fmt.Errorf("projection: install: %w", err)
	}
	if err := os.Rename(rebuilt+sumSuffix, live+sumSuffix); err != nil {
		if err := removePageSum(live); err != nil {
			return err
		}
	}
	dir, err := os.Open(filepath.Dir(live))
	if err != nil {
		return fmt.Errorf("projection: install: %w", err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("projection: install: sync directory: %w", err)
	}
	return nil
}

// rebuildTxEvents is how many events a rebuild folds per transaction: the
// Turns a batch changes are encoded once per transaction (folder.turnCache),
// and each commit rewrites every page it dirtied, so large transactions do
// less of both; past a few thousand events a transaction gains little and
// holds more dirty pages.
var rebuildTxEvents = 8 << 10 // a test lowers it

// rebuildFold reads the ledger up to its head and folds it into st in
// transactions of about rebuildTxEvents events. The fold of one transaction
// runs on its own goroutine while the reader decodes the next (the ledger
// decodes on every core), so reading and folding overlap. The hand-over is
// unbuffered: while a transaction is folded, the reader holds at most the
// next one, ready, and reads no further, which bounds the memory (the fold
// is the slower of the two, so a transaction waiting in a buffer as well
// would only hold 8k more decoded events in memory, not make it faster).
func rebuildFold(ctx context.Context, st *Store, src Reader, progress func(applied, head uint64)) error {
	type job struct {
		batch []kernel.Recorded
		items [][]byte
		head  uint64
	}
	jobs := make(chan job)
	done := make(chan error, 1)
	var failed atomic.Pointer[error]
	go func() {
		var err error
		for j := range jobs {
			if err != nil {
				continue // drain: the reader stops at its next batch
			}
			if err = st.apply(j.batch, j.items); err != nil {
				failed.Store(&err)
				continue
			}
			if progress != nil {
				progress(st.Checkpoint(), j.head)
			}
		}
		done <- err
	}()
	var pending []kernel.Recorded
	var head uint64
	_, err := src.ReadAll(ctx, 0, func(batch []kernel.Recorded, h uint64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e := failed.Load(); e != nil {
			return *e
		}
		head = h
		for i, r := range batch {
			if r.Seq > head {
				batch = batch[:i]
				break
			}
		}
		if pending == nil {
			pending = make([]kernel.Recorded, 0, rebuildTxEvents+len(batch))
		}
		pending = append(pending, batch...)
		if len(pending) >= rebuildTxEvents {
			jobs <- job{pending, feedItems(pending), head}
			pending = nil
		}
		return nil
	})
	if err == nil && len(pending) > 0 {
		jobs <- job{pending, feedItems(pending), head}
	}
	close(jobs)
	if ferr := <-done; ferr != nil {
		return ferr
	}
	return err
}

// feedItems encodes the feed items of a batch on every core: the fold's
// own goroutine is a rebuild's bottleneck, and encoding is work that can
// leave it. An event whose item cannot be encoded gets nil: the fold encodes
// it again and reports the error.
func feedItems(batch []kernel.Recorded) [][]byte {
	items := make([][]byte, len(batch))
	n := runtime.GOMAXPROCS(0)
	per := (len(batch) + n - 1) / n
	var wg sync.WaitGroup
	for lo := 0; lo < len(batch); lo += per {
		hi := min(lo+per, len(batch))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				r := batch[i]
				var err error
				if r.Event, err = kernel.TypedData(r.Event); err == nil {
					items[i], _ = feedItem(r)
				}
			}
		})
	}
	wg.Wait()
	return items
}
