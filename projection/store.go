package projection

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/turnledger/turnledger/kernel"
)

// ErrNotFound is returned by the queries of one thing (a Turn, an agent) when
// it is not in the projections.
var ErrNotFound = errors.New("projection: not found")

// ErrClosed is returned by WaitFor and Apply once the store is closed.
var ErrClosed = errors.New("projection: store closed")

// ErrSchema is returned by Open for a projection file written with another
// bucket layout. Rebuild it from the ledger.
var ErrSchema = errors.New("projection: incompatible projection file")

// SchemaVersion is the bucket layout this build writes and reads (bucket
// "meta", key "schema"). Change it with any change of a bucket, key or value
// format. Layout 2 stores each Turn as the kernel's own state (kernel.Turn,
// folded by kernel.EvolveTurn) with the agents who may read it, and indexes a
// Turn under every such agent (its root's target and requester too). Layout
// 3 adds the Turn's schedule to its state and view.
const SchemaVersion = 3

// MaxLimit is the largest page the queries return; callers validate limit
// (1..MaxLimit) and the queries clamp it to that range as well.
const MaxLimit = 500

// Config configures a Store.
type Config struct {
	// PresenceWindow: an agent last seen less than this long ago is online.
	PresenceWindow time.Duration
	// OpenTimeout bounds the wait for the file lock of another process.
	OpenTimeout time.Duration
	// NoSync skips the fsync of each Apply. Only for a rebuild, which syncs
	// once at the end, and for benchmarks.
	NoSync bool
	// Boot, when set, is the machine's boot id (BootID), and trades the
	// fsync of every commit for a rebuild after a crash of the machine:
	// commits are not synced, and the file names the boot it is written
	// under until Close syncs it (durability.go). Empty: every commit is
	// synced.
	Boot string
	// RetryInterval is how long a Projector waits before following the
	// source again after an error.
	RetryInterval time.Duration
	// Now is the clock of a Projector's diagnostics.
	Now func() time.Time
	// CommitInterval is the longest a transaction of the projector stays
	// open while events keep coming (Store.Fold): its events are read once
	// it commits, or sooner when a read waits for one of them (commands
	// are answered without it: Store.Answer). The projector commits
	// sooner when the ledger has nothing more on its way. 0 commits every
	// batch.
	CommitInterval time.Duration
	// MaxPageBytes bounds the stored size of the items of one page of a
	// feed, a Turn's context or the Turn list: a page stops before the item
	// that would take it past this many bytes, with has_more (it always
	// holds at least one item, so that every item can be read). Without it,
	// limit=500 with large events or inputs would make a page of hundreds of
	// megabytes, held in memory once per reader.
	MaxPageBytes int
}

// DefaultMaxPageBytes is the default of Config.MaxPageBytes: 4 MiB.
const DefaultMaxPageBytes = 4 << 20

// DefaultCommitInterval is the default of Config.CommitInterval.
const DefaultCommitInterval = 100 * time.Millisecond

// DefaultConfig returns the defaults: presence window 60s, open timeout 5s,
// retry interval 1s, fsync on, commit interval DefaultCommitInterval, pages
// of at most DefaultMaxPageBytes.
func DefaultConfig() Config {
	return Config{
		PresenceWindow: kernel.PresenceWindow,
		OpenTimeout:    5 * time.Second,
		RetryInterval:  time.Second,
		Now:            time.Now,
		CommitInterval: DefaultCommitInterval,
		MaxPageBytes:   DefaultMaxPageBytes,
	}
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	if c.PresenceWindow <= 0 {
		errs = append(errs, errors.New("projection: presence window must be positive"))
	}
	if c.OpenTimeout < 0 {
		errs = append(errs, errors.New("projection: open timeout must not be negative"))
	}
	if c.RetryInterval <= 0 {
		errs = append(errs, errors.New("projection: retry interval must be positive"))
	}
	if c.Now == nil {
		errs = append(errs, errors.New("projection: clock (Now) is required"))
	}
	if c.CommitInterval < 0 || c.CommitInterval > time.Second {
		errs = append(errs, fmt.Errorf("projection: commit interval %v must be 0 to 1s", c.CommitInterval))
	}
	if c.MaxPageBytes <= 0 {
		errs = append(errs, errors.New("projection: max page bytes must be positive"))
	}
	return errors.Join(errs...)
}

// Store is the bbolt file of every read model and its checkpoint.
type Store struct {
	notes  notifier    // the watches of long polls and event streams (notify.go)
	recent recentTurns // Turn records of recent batches, decoded (turncache.go)

	db  *bolt.DB
	cfg Config

	mu             sync.Mutex
	checkpoint     uint64
	checkpointGate gate // wakes the waiters of the checkpoint (WaitFor)
	closed         bool
	readFailure    string // why a read found the file damaged (heal.go)

	// folded is the ledger_seq folded, committed or not (>= checkpoint);
	// overlay holds the views of the Turns the open transaction changed, by
	// Turn key, and before those of the last transaction committed;
	// foldedGate wakes the waiters of folded (overlay.go).
	folded     uint64
	overlay    map[string]TurnView
	before     map[string]TurnView
	foldedGate gate

	// wmu serialises the writes of the fold: open is the transaction the
	// projector folds into until its commit (nil when none).
	wmu  sync.Mutex
	open *openTx
	// aborted: a commit made for a read or by the interval's timer failed
	// and rolled back what the projector had folded (takeAborted).
	aborted bool

	beforeCommit func() error // tests: runs between publishFolded and the commit

	// unread: nothing reads the store while it is folded (a rebuild's new
	// file): the fold publishes no views of Turns for answers (overlay.go)
	// and keeps no events for watches (notify.go).
	unread bool
}

// openTx is a write transaction of the fold, open across batches until its
// commit (Store.Fold).
type openTx struct {
	tx     *bolt.Tx
	f      *folder
	cp     uint64            // the checkpoint when it began
	last   uint64            // the last ledger_seq folded into it
	events []kernel.Recorded // folded into it, for the watches raised at its commit
	began  time.Time
	timer  *time.Timer // commits it once the interval has passed (CaughtUp); nil when none
}

func (o *openTx) stopTimer() {
	if o.timer != nil {
		o.timer.Stop()
	}
}

// Open opens (creating when missing) the projection file at path. A file
// whose lock another process still holds after cfg.OpenTimeout is an error
// wrapping ErrInUse. bbolt panics on some damage it meets while the file is
// opened (a key of no bytes, say); Check finds such damage first, and for
// what it may miss the panic is caught and answered as an error wrapping
// ErrDamaged, which OpenHealing heals.
func Open(path string, cfg Config) (_ *Store, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var db *bolt.DB
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				db.Close()
			}
			err = fmt.Errorf("%w: %s: bbolt panicked opening it: %v", ErrDamaged, path, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: cfg.OpenTimeout, NoSync: cfg.NoSync || cfg.Boot != ""})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (its lock was not free within %v)", ErrInUse, path, cfg.OpenTimeout)
	} else if err != nil {
		return nil, fmt.Errorf("projection: open %s: %w", path, err)
	}
	if err := removePageSum(path); err != nil {
		db.Close()
		return nil, err
	}
	if err := markUnsynced(db, cfg.Boot); err != nil {
		db.Close()
		return nil, fmt.Errorf("projection: open %s: %w", path, err)
	}
	var cp uint64
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bktMeta)
		switch v := meta.Get(keySchema); {
		case v == nil:
			if err := meta.Put(keySchema, putU64(SchemaVersion)); err != nil {
				return err
			}
		case getU64(v) != SchemaVersion:
			return fmt.Errorf("%w: the file has layout %d, this build reads layout %d; stop serve and run `turnledger replay` to rebuild it from the ledger", ErrSchema, getU64(v), SchemaVersion)
		}
		cp = getU64(meta.Get(keyCheckpoint))
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("projection: open %s: %w", path, err)
	}
	return &Store{db: db, cfg: cfg, checkpoint: cp, folded: cp}, nil
}

// Close closes the file and wakes every WaitFor with ErrClosed.
func (s *Store) Close() error {
	s.wmu.Lock()
	// Events folded and not committed are committed: they are the ledger's.
	// Should that fail, the next open folds them again from the checkpoint.
	_ = s.commitLocked()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wmu.Unlock()
		return nil
	}
	s.closed = true
	s.checkpointGate.closeAll()
	s.foldedGate.closeAll()
	s.mu.Unlock()
	s.wmu.Unlock()
	s.notes.close()
	if s.cfg.Boot != "" {
		if err := s.markSynced(); err != nil {
			s.db.Close()
			return err
		}
	}
	path := s.db.Path()
	if err := s.db.Close(); err != nil {
		return err
	}
	if s.ReadFailure() != "" {
		return nil // a damaged file is not vouched for
	}
	if err := writePageSum(path); err != nil {
		return fmt.Errorf("projection: close: sum the pages: %w", err)
	}
	return nil
}

// Checkpoint returns the ledger_seq of the last applied event (0 when none).
func (s *Store) Checkpoint() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkpoint
}

// WaitFor returns once the checkpoint is at least seq, or with ctx's error,
// or ErrClosed when the store closes first. It is woken by the commit that
// reaches seq, not by polling.
func (s *Store) WaitFor(ctx context.Context, seq uint64) error {
	return s.waitUntil(ctx, seq, &s.checkpoint, &s.checkpointGate, s.commitFor)
}

// commitFor commits the open transaction for a read waiting for seq when
// seq is folded in it and no one else holds the fold's lock (CaughtUp left
// it open: this read is the commit's reason). Whoever holds the lock
// commits it for the read instead: a fold or CaughtUp sees the waiter
// registered before the call. Called with s.mu not held.
func (s *Store) commitFor(seq uint64) {
	if !s.wmu.TryLock() {
		return
	}
	defer s.wmu.Unlock()
	if o := s.open; o != nil && o.last >= seq {
		s.commitAside()
	}
}

// waitUntil returns once *mark (read under s.mu, with g woken when it
// advances) is at least seq, or with ctx's error, or ErrClosed when the store
// closes first. When seq is folded and not yet at the mark, folded (if not
// nil) is called once the waiter is registered.
func (s *Store) waitUntil(ctx context.Context, seq uint64, mark *uint64, g *gate, folded func(seq uint64)) error {
	for {
		s.mu.Lock()
		if *mark >= seq {
			s.mu.Unlock()
			return nil
		}
		if s.closed {
			s.mu.Unlock()
			return ErrClosed
		}
		ch := g.wait(seq)
		isFolded := s.folded >= seq
		s.mu.Unlock()
		if folded != nil && isFolded {
			folded(seq)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Apply folds a batch of events into every read model in one bbolt
// transaction that also writes the checkpoint, and commits it. Events at or
// below the checkpoint are skipped; the rest must come in strictly
// increasing ledger_seq order. A gap is allowed (see the package doc). On
// error nothing of the batch is applied.
func (s *Store) Apply(batch []kernel.Recorded) error { return s.apply(batch, nil) }

// apply is Apply with the batch's feed items encoded beforehand (items[i]
// for batch[i]; nil, or a nil item, when not: the fold encodes it).
func (s *Store) apply(batch []kernel.Recorded, items [][]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.foldLocked(batch, items); err != nil {
		return err
	}
	return s.commitLocked()
}

// Fold is Apply for the projector: it folds the batch into the open
// transaction (beginning one when none is), publishes the Turns it changed
// to TurnAt and WaitFolded, and commits only once the transaction has been
// open for Config.CommitInterval; Commit commits it sooner. A busy ledger's
// events are so committed many at a time — a commit rewrites every page the
// transaction dirtied, the same few pages for every event of a project —
// while a command's answer still waits for nothing but its event's fold.
// Reads wait for the commit (WaitFor). On error nothing folded since the
// last commit is applied.
func (s *Store) Fold(batch []kernel.Recorded) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.takeAborted(); err != nil {
		return err
	}
	if err := s.foldLocked(batch, nil); err != nil {
		return err
	}
	if o := s.open; o != nil && (s.cfg.CommitInterval <= 0 || len(o.events) >= maxOpenEvents || s.cfg.Now().Sub(o.began) >= s.cfg.CommitInterval || s.readWaiting(o.last)) {
		return s.commitLocked()
	}
	return nil
}

// Commit commits what Fold folded and did not commit yet (nothing to do when
// nothing is).
func (s *Store) Commit() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.takeAborted(); err != nil {
		return err
	}
	return s.commitLocked()
}

// CaughtUp is the projector's word that nothing more is on its way: it
// commits what Fold folded when someone waits for that commit (a read
// waiting for a ledger_seq folded, or a watch of a long poll or push feed)
// or the transaction has been open for Config.CommitInterval; otherwise it
// leaves the transaction open for the next events, and commits it once the
// interval has passed if none come first. The answers of commands wait for
// the fold alone, so a busy ledger whose clients only send commands commits
// once an interval rather than every time the projector catches up: a
// commit rewrites every page the transaction dirtied, and bbolt reads every
// page a transaction touches anew.
func (s *Store) CaughtUp() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.takeAborted(); err != nil {
		return err
	}
	o := s.open
	if o == nil {
		return nil
	}
	left := s.cfg.CommitInterval - s.cfg.Now().Sub(o.began)
	if left <= 0 || s.readWaiting(o.last) || s.notes.watching() {
		return s.commitLocked()
	}
	if o.timer == nil {
		o.timer = time.AfterFunc(left, func() { s.commitOpen(o) })
	}
	return nil
}

// commitOpen commits o if it is still the open transaction (CaughtUp's
// timer).
func (s *Store) commitOpen(o *openTx) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.open == o {
		s.commitAside()
	}
}

// commitAside is a commit the projector does not make (a read's, or the
// interval's timer): should it fail, the projector is told at its next call
// (takeAborted). Run under s.wmu.
func (s *Store) commitAside() {
	if err := s.commitLocked(); err != nil {
		s.aborted = true
	}
}

// readWaiting reports whether a read waits (WaitFor) for a ledger_seq at or
// below last.
func (s *Store) readWaiting(last uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.checkpointGate.ws
	return len(ws) > 0 && ws[0].seq <= last
}

// errAborted is returned to the projector by its next Fold, Commit or
// CaughtUp after a commit it did not make (a read's, or the interval's)
// failed and rolled back events it had folded: it follows again from the
// checkpoint, so that they are folded again rather than skipped.
var errAborted = errors.New("projection: a commit failed and rolled back folded events; following again from the checkpoint")

// takeAborted returns errAborted once after a rollback of folded events
// that the projector has not been told of. Run under s.wmu.
func (s *Store) takeAborted() error {
	if s.aborted {
		s.aborted = false
		return errAborted
	}
	return nil
}

// maxOpenEvents bounds the events one transaction of Fold holds, and so the
// memory of its dirty pages, should the clock stand still.
const maxOpenEvents = 4096

// foldLocked folds batch into the open transaction, beginning one when none
// is, and publishes the views of the Turns it changed (overlay.go). A panic
// inside (a damaged page) is caught and marks the store damaged. On error the
// open transaction is rolled back. Run under s.wmu.
func (s *Store) foldLocked(batch []kernel.Recorded, items [][]byte) (err error) {
	if len(batch) == 0 {
		return nil
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	defer func() {
		if err != nil {
			s.abortLocked()
		}
	}()
	defer s.caught(&err)
	o := s.open
	if o == nil {
		tx, err := s.db.Begin(true)
		if err != nil {
			return fmt.Errorf("projection: begin: %w", err)
		}
		o = &openTx{tx: tx, f: newFolder(tx, &s.recent), began: s.cfg.Now()}
		o.cp = getU64(tx.Bucket(bktMeta).Get(keyCheckpoint))
		o.last = o.cp
		s.open = o
	}
	f, prev := o.f, o.last
	defer func() { f.item = nil }()
	for i, r := range batch {
		if items != nil {
			f.item = items[i]
		}
		if r.Seq <= prev {
			if prev == o.cp {
				continue // already applied
			}
			return fmt.Errorf("projection: ledger_seq %d after %d: batch out of order", r.Seq, prev)
		}
		if err := f.fold(r); err != nil {
			return fmt.Errorf("projection: apply ledger_seq %d (%s): %w", r.Seq, r.Event.Type, err)
		}
		prev = r.Seq
		if !s.unread {
			o.events = append(o.events, r)
		}
	}
	if prev == o.last {
		return nil
	}
	o.last = prev
	if s.unread {
		f.changed = f.changed[:0]
		return nil
	}
	s.publishFolded(prev, f.views()) // answers may show the batch's Turns now (overlay.go)
	return nil
}

// commitLocked writes the open transaction's Turn records and checkpoint and
// commits it. On error it is rolled back and its answers are taken back.
// Run under s.wmu.
func (s *Store) commitLocked() (err error) {
	o := s.open
	if o == nil {
		return nil
	}
	defer func() {
		if err != nil {
			s.abortLocked()
		}
	}()
	defer s.caught(&err)
	if o.last == o.cp {
		s.open = nil
		return o.tx.Rollback()
	}
	if err := o.f.flush(); err != nil {
		return err
	}
	if err := o.tx.Bucket(bktMeta).Put(keyCheckpoint, putU64(o.last)); err != nil {
		return err
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(); err != nil {
			return err
		}
	}
	s.open = nil
	o.stopTimer()
	if err := o.tx.Commit(); err != nil { // rolled back by bbolt
		return err
	}
	s.recent.committed(o.f.turnCache)
	s.mu.Lock()
	if o.last > s.checkpoint && !s.closed {
		s.checkpoint = o.last
		s.checkpointGate.advance(o.last)
	}
	s.before, s.overlay = s.overlay, nil
	s.mu.Unlock()
	s.notes.raise(s, o.events)
	return nil
}

// abortLocked rolls the open transaction back, if one is, and takes back
// the answers its folds published: they wait for the same events to be
// folded again from the checkpoint. The Turn records it took from s.recent
// are dropped with it. Run under s.wmu.
func (s *Store) abortLocked() {
	if o := s.open; o != nil {
		s.open = nil
		o.stopTimer()
		_ = o.tx.Rollback()
	}
	s.mu.Lock()
	s.overlay, s.before, s.folded = nil, nil, s.checkpoint
	s.mu.Unlock()
}

// Dump returns every bucket, checkpoint included, as bucket → key → value
// (raw bytes as strings). It is for tests and the replay tool to compare two
// stores.
func (s *Store) Dump() (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	err := s.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if string(name) == string(bktSnapshots) {
				return nil // the engine's, not a projection
			}
			m := map[string]string{}
			err := b.ForEach(func(k, v []byte) error {
				m[string(k)] = string(v)
				return nil
			})
			out[string(name)] = m
			return err
		})
	})
	return out, err
}
