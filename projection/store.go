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
// Turn under every such agent (its root's target and requester too).
const SchemaVersion = 2

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

// DefaultConfig returns the defaults: presence window 60s, open timeout 5s,
// retry interval 1s, fsync on, pages of at most DefaultMaxPageBytes.
func DefaultConfig() Config {
	return Config{
		PresenceWindow: 60 * time.Second,
		OpenTimeout:    5 * time.Second,
		RetryInterval:  time.Second,
		Now:            time.Now,
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

	mu          sync.Mutex
	checkpoint  uint64
	changed     chan struct{} // closed and replaced on every checkpoint advance
	closed      bool
	readFailure string // why a read found the file damaged (heal.go)

	// folded is the ledger_seq folded, committed or not (>= checkpoint);
	// overlay holds the views of the Turns the last folded batch wrote, by
	// Turn key, and before those of the batch before it; foldedCh is closed
	// and replaced when folded advances (overlay.go).
	folded   uint64
	overlay  map[string]TurnView
	before   map[string]TurnView
	foldedCh chan struct{}

	beforeCommit func() error // tests: runs between publishFolded and the commit
}

// Open opens (creating when missing) the projection file at path. A file
// whose lock another process still holds after cfg.OpenTimeout is an error
// wrapping ErrInUse.
func Open(path string, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: cfg.OpenTimeout, NoSync: cfg.NoSync || cfg.Boot != ""})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (its lock was not free within %v)", ErrInUse, path, cfg.OpenTimeout)
	} else if err != nil {
		return nil, fmt.Errorf("projection: open %s: %w", path, err)
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
	return &Store{db: db, cfg: cfg, checkpoint: cp, changed: make(chan struct{}), folded: cp, foldedCh: make(chan struct{})}, nil
}

// Close closes the file and wakes every WaitFor with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.changed)
	close(s.foldedCh)
	s.mu.Unlock()
	s.notes.close()
	if s.cfg.Boot != "" {
		if err := s.markSynced(); err != nil {
			s.db.Close()
			return err
		}
	}
	return s.db.Close()
}

// Checkpoint returns the ledger_seq of the last applied event (0 when none).
func (s *Store) Checkpoint() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkpoint
}

// WaitFor returns once the checkpoint is at least seq, or with ctx's error,
// or ErrClosed when the store closes first. It waits on a notification from
// Apply, not by polling.
func (s *Store) WaitFor(ctx context.Context, seq uint64) error {
	return s.waitUntil(ctx, seq, func() (uint64, chan struct{}) { return s.checkpoint, s.changed })
}

// waitUntil returns once the mark that at returns (under s.mu, with the
// channel closed when it advances) is at least seq, or with ctx's error, or
// ErrClosed when the store closes first.
func (s *Store) waitUntil(ctx context.Context, seq uint64, at func() (uint64, chan struct{})) error {
	for {
		s.mu.Lock()
		mark, ch := at()
		closed := s.closed
		s.mu.Unlock()
		if mark >= seq {
			return nil
		}
		if closed {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Apply folds a batch of events into every read model in one bbolt
// transaction that also writes the checkpoint. Events at or below the
// checkpoint are skipped; the rest must come in strictly increasing
// ledger_seq order. A gap is allowed (see the package doc). On error nothing
// of the batch is applied.
func (s *Store) Apply(batch []kernel.Recorded) error { return s.apply(batch, nil) }

// apply is Apply with the batch's feed items encoded beforehand (items[i]
// for batch[i]; nil, or a nil item, when not: the fold encodes it). A panic
// inside (a damaged page) is caught and marks the store damaged.
func (s *Store) apply(batch []kernel.Recorded, items [][]byte) (err error) {
	defer s.caught(&err)
	if len(batch) == 0 {
		return nil
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	var last uint64
	var folded map[string]*turnRecord
	err = s.db.Update(func(tx *bolt.Tx) error {
		f := newFolder(tx, &s.recent)
		folded = f.turnCache
		cp := getU64(f.tx.Bucket(bktMeta).Get(keyCheckpoint))
		prev := cp
		for i, r := range batch {
			if items != nil {
				f.item = items[i]
			}
			if r.Seq <= prev {
				if prev == cp {
					continue // already applied
				}
				return fmt.Errorf("projection: ledger_seq %d after %d: batch out of order", r.Seq, prev)
			}
			if err := f.fold(r); err != nil {
				return fmt.Errorf("projection: apply ledger_seq %d (%s): %w", r.Seq, r.Event.Type, err)
			}
			prev = r.Seq
		}
		if prev == cp {
			return nil
		}
		if err := f.flush(); err != nil {
			return err
		}
		last = prev
		if err := f.tx.Bucket(bktMeta).Put(keyCheckpoint, putU64(prev)); err != nil {
			return err
		}
		s.publishFolded(prev, f.views) // answers may show the batch's Turns now (overlay.go)
		if s.beforeCommit != nil {
			return s.beforeCommit()
		}
		return nil
	})
	if err != nil {
		s.mu.Lock()
		s.overlay, s.before, s.folded = nil, nil, s.checkpoint
		s.mu.Unlock()
		return err // the Turn records taken from s.recent are dropped with the batch
	}
	s.recent.committed(folded)
	if last == 0 {
		return nil
	}
	s.mu.Lock()
	if last > s.checkpoint && !s.closed {
		s.checkpoint = last
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
	s.notes.raise(s, batch)
	return nil
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
