package ledger

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/turnledger/turnledger/kernel"
)

// Archived is the ledger as a whole once the stream is purged below a
// horizon: the archive's events, then the stream's. Its reads (ReadProject
// for the engine's catch-up and loads, ReadAll for a rebuild, Follow for the
// projector) start in the archive when they start below the stream's first
// ledger_seq, so that a write model without a snapshot or a projection file
// rebuilt from nothing sees every event, never only those after the horizon.
// Appends and the rest are the Store's own.
//
// A purge through Archived (PurgeBelow) waits for the reads that cross from
// the archive to the stream, so that none of them misses the events purged
// meanwhile; Follow, which runs for ever, instead checks that the stream
// takes up exactly where the archive ended, and fails (the projector then
// follows again from its checkpoint) when it does not.
type Archived struct {
	*Store
	archive *Archive

	purge sync.RWMutex // write: a purge; read: a read crossing from the archive to the stream
}

// WithArchive returns the ledger of s and its archive a.
func WithArchive(s *Store, a *Archive) *Archived {
	return &Archived{Store: s, archive: a}
}

// Archive is the archive.
func (l *Archived) Archive() *Archive { return l.archive }

// PurgeBelow is Store.PurgeBelow, once no read crosses from the archive.
func (l *Archived) PurgeBelow(ctx context.Context, horizon uint64) error {
	l.purge.Lock()
	defer l.purge.Unlock()
	if last, err := l.archive.Last(); err != nil {
		return err
	} else if horizon > last+1 {
		return fmt.Errorf("ledger: purge below ledger_seq %d: the archive ends at %d", horizon, last)
	}
	return l.Store.PurgeBelow(ctx, horizon)
}

// below reports whether a read after ledger_seq after starts in the
// archive: below the stream's first ledger_seq, or below the archive's last
// (the stream may be purged up to it, keeping only the last event of each
// subject).
func (l *Archived) below(ctx context.Context, after uint64) (bool, error) {
	last, err := l.archive.Last()
	if err != nil || after < last {
		return err == nil, err
	}
	first, err := l.FirstSeq(ctx)
	return after+1 < first, err
}

// ReadProject is Store.ReadProject over the archive and the stream.
func (l *Archived) ReadProject(ctx context.Context, project string, after uint64, fn func(kernel.Recorded) error) (uint64, error) {
	if below, err := l.below(ctx, after); err != nil || !below {
		if err != nil {
			return after, err
		}
		return l.Store.ReadProject(ctx, project, after, fn)
	}
	if err := checkProject(project); err != nil {
		return after, err
	}
	l.purge.RLock()
	defer l.purge.RUnlock()
	want := l.cfg.Prefix + "." + project + "."
	last := after
	err := l.archive.Lines(after, func(al ArchiveLine) error {
		if !strings.HasPrefix(al.Subject, want) {
			return nil
		}
		e, err := kernel.UnmarshalEvent(al.Event)
		if err != nil {
			return fmt.Errorf("%w: ledger_seq %d: %w", ErrArchiveDamaged, al.LedgerSeq, err)
		}
		if err := fn(kernel.Recorded{Seq: al.LedgerSeq, Event: e}); err != nil {
			return err
		}
		last = al.LedgerSeq
		return nil
	})
	if err != nil {
		return last, err
	}
	from, err := l.archive.Last()
	if err != nil {
		return last, err
	}
	seen, err := l.Store.ReadProject(ctx, project, max(from, after), fn)
	return max(seen, last), err
}

// ReadAll is Store.ReadAll over the archive and the stream.
func (l *Archived) ReadAll(ctx context.Context, after uint64, fn func(batch []kernel.Recorded, head uint64) error) (uint64, error) {
	if below, err := l.below(ctx, after); err != nil || !below {
		if err != nil {
			return 0, err
		}
		return l.Store.ReadAll(ctx, after, fn)
	}
	l.purge.RLock()
	defer l.purge.RUnlock()
	head, err := l.Head(ctx)
	if err != nil {
		return 0, err
	}
	last, err := l.archive.Read(ctx, after, l.cfg.BatchSize, func(b []kernel.Recorded) error { return fn(b, head) })
	if err != nil {
		return head, err
	}
	if last >= head {
		return head, nil
	}
	return l.Store.ReadAll(ctx, last, fn)
}

// Follow is Store.Follow over the archive and the stream.
func (l *Archived) Follow(ctx context.Context, after uint64, fn func(batch []kernel.Recorded) error) error {
	if below, err := l.below(ctx, after); err != nil || !below {
		if err != nil {
			return err
		}
		return l.Store.Follow(ctx, after, fn)
	}
	last, err := l.archive.Read(ctx, after, l.cfg.BatchSize, fn)
	if err != nil {
		return err
	}
	checked := false
	return l.Store.Follow(ctx, last, func(b []kernel.Recorded) error {
		if !checked && len(b) > 0 {
			if b[0].Seq != last+1 {
				return fmt.Errorf("ledger: the stream went on at ledger_seq %d after the archive's %d (purged meanwhile): follow again", b[0].Seq, last)
			}
			checked = true
		}
		return fn(b)
	})
}
