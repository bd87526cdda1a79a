package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/turnledger/turnledger/kernel"
)

// Retention keeps the ledger's stream and the projections bounded: on a
// timer, it archives the events older than the retention window, saves the
// write models' snapshots past them, purges the stream below the archived
// horizon, and has the projections drop their feeds below it and retire the
// Turn trees that finished long enough ago. Every step is safe to repeat and
// to interrupt (docs/retention.md):
//
//  1. archive: the events after the archive's last, up to the projections'
//     checkpoint (never what they have not folded), until the first event at
//     or after now - Retain. A crash leaves whole segments only; the next run
//     goes on after the last one.
//  2. snapshots: every project is loaded, and its snapshot saved when the
//     last one lies below the horizon, so that a load need not read the
//     archive (it could: the ledger's reads start in the archive below the
//     horizon). With a window of a day, a busy project's snapshot is saved
//     about once a day, not at every run.
//  3. purge: the stream below horizon = the archive's last + 1. A crash
//     between 1 and 3 purges next time what was archived; nothing is
//     archived twice (segments only ever extend the archive).
//  4. projections: their horizon moves up to it and their feeds lose what
//     lies below; the Turn trees finished before now - max(Retain, the
//     idempotency memory) with every event below the horizon are retired. A
//     crash between 3 and 4 leaves the projections holding more than the
//     stream for a while, which the next run removes.
type Retention struct {
	engine *Engine
	ledger RetentionLedger
	proj   RetentionProjections
	cfg    RetentionConfig
	logger *slog.Logger

	run sync.Mutex // one run at a time

	mu     sync.Mutex
	status RetentionStatus
}

// RetentionLedger is the ledger as retention archives and purges it.
type RetentionLedger interface {
	// Archive writes to the archive the events after those it holds, up to
	// until, stopping before the first one keep says to keep in the stream
	// only; it returns the archive's last ledger_seq.
	Archive(ctx context.Context, until uint64, keep func(kernel.Recorded) bool) (uint64, error)
	// PurgeBelow removes the events below horizon from the stream (they are
	// archived).
	PurgeBelow(ctx context.Context, horizon uint64) error
	// FirstSeq is the stream's first ledger_seq.
	FirstSeq(ctx context.Context) (uint64, error)
	// ArchiveBytes is the size of the archive.
	ArchiveBytes() (int64, error)
}

// RetentionProjections is the read side as retention trims it.
type RetentionProjections interface {
	ProjectLister
	// Checkpoint is the last ledger_seq the projections committed.
	Checkpoint() uint64
	// Retire moves the projections' horizon up to horizon (not past their
	// checkpoint + 1), drops the feeds below it, and retires the Turn trees
	// wholly finished before finishedBefore whose events are all below it.
	Retire(ctx context.Context, horizon uint64, finishedBefore, now time.Time) (Retired, error)
}

// Retired is what a Retire of the projections did.
type Retired struct {
	Horizon  uint64 // the projections' horizon after it
	FeedKeys int    // feed entries removed
	Turns    int    // Turns retired
}

// RetentionConfig configures a Retention.
type RetentionConfig struct {
	// Retain is how long events stay in the stream and finished Turn trees
	// in the projections (at least the idempotency memory, 24h, for the
	// trees). 0 turns retention off.
	Retain time.Duration
	// Interval is the time between runs.
	Interval time.Duration
}

// RetentionStatus is what retention reports to /readyz and /metrics.
type RetentionStatus struct {
	Enabled        bool   `json:"enabled"`
	RetainFinished string `json:"retain_finished,omitempty"`
	Interval       string `json:"interval,omitempty"`
	// HorizonLedgerSeq is the first ledger_seq the feeds and the stream
	// hold (1, or 0 before a run: everything).
	HorizonLedgerSeq uint64 `json:"horizon_ledger_seq"`
	// StreamFirstLedgerSeq is the stream's first ledger_seq (the horizon,
	// unless the stream denies purges).
	StreamFirstLedgerSeq uint64     `json:"stream_first_ledger_seq"`
	ArchivedLedgerSeq    uint64     `json:"archived_ledger_seq"`
	ArchiveBytes         int64      `json:"archive_bytes"`
	LastRunAt            *time.Time `json:"last_run_at"`
	LastRunSeconds       float64    `json:"last_run_seconds"`
	TurnsRetiredTotal    int        `json:"turns_retired_total"`
	FeedKeysRemovedTotal int        `json:"feed_keys_removed_total"`
	LastError            string     `json:"last_error,omitempty"`
}

// NewRetention returns the retention of e's ledger and projections (a
// Retain of 0: disabled, Run returns at once).
func NewRetention(e *Engine, l RetentionLedger, p RetentionProjections, cfg RetentionConfig, logger *slog.Logger) *Retention {
	r := &Retention{engine: e, ledger: l, proj: p, cfg: cfg, logger: logger}
	r.status.Enabled = cfg.Retain > 0
	if r.status.Enabled {
		r.status.RetainFinished, r.status.Interval = cfg.Retain.String(), cfg.Interval.String()
	}
	return r
}

// Run runs retention every Interval until ctx ends.
func (r *Retention) Run(ctx context.Context) {
	if r.cfg.Retain <= 0 || r.cfg.Interval <= 0 {
		return
	}
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.Once(ctx); err != nil && ctx.Err() == nil {
			r.logger.Warn("retention", "err", err)
		}
	}
}

// Once runs retention once, at the engine's clock.
func (r *Retention) Once(ctx context.Context) error {
	if r.cfg.Retain <= 0 {
		return errors.New("engine: retention is off")
	}
	r.run.Lock()
	defer r.run.Unlock()
	began := time.Now()
	now := r.engine.cfg.Now().UTC()
	res, err := r.once(ctx, now)
	first, ferr := r.ledger.FirstSeq(ctx)
	size, serr := r.ledger.ArchiveBytes()
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &r.status
	st.LastRunAt, st.LastRunSeconds, st.LastError = &now, time.Since(began).Seconds(), ""
	st.TurnsRetiredTotal += res.Turns
	st.FeedKeysRemovedTotal += res.FeedKeys
	if res.Horizon > 0 {
		st.HorizonLedgerSeq = res.Horizon
	}
	if err != nil {
		st.LastError = err.Error()
	}
	if ferr == nil {
		st.StreamFirstLedgerSeq = first
	}
	if serr == nil {
		st.ArchiveBytes = size
	}
	return err
}

func (r *Retention) once(ctx context.Context, now time.Time) (Retired, error) {
	keepFrom := now.Add(-r.cfg.Retain)
	finishedBefore := now.Add(-max(r.cfg.Retain, kernel.IdempotencyRetention))
	archived, err := r.ledger.Archive(ctx, r.proj.Checkpoint(), func(rec kernel.Recorded) bool {
		return !rec.Event.At.Before(keepFrom)
	})
	r.mu.Lock()
	r.status.ArchivedLedgerSeq = archived
	r.mu.Unlock()
	if err != nil {
		return Retired{}, err
	}
	horizon := archived + 1
	if projects, err := r.proj.Projects(); err != nil {
		return Retired{}, err
	} else if err := r.engine.Preload(ctx, projects); err != nil {
		return Retired{}, err
	}
	if err := r.engine.saveSnapshotsBelow(horizon); err != nil {
		return Retired{}, err
	}
	if err := r.ledger.PurgeBelow(ctx, horizon); err != nil {
		return Retired{}, err
	}
	return r.proj.Retire(ctx, horizon, finishedBefore, now)
}

// Observe sets what a run would report of the horizon and the archive,
// from what an earlier process left (serve calls it at start).
func (r *Retention) Observe(horizon, streamFirst, archived uint64, archiveBytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.HorizonLedgerSeq, r.status.StreamFirstLedgerSeq = horizon, streamFirst
	r.status.ArchivedLedgerSeq, r.status.ArchiveBytes = archived, archiveBytes
}

// Status returns retention's report.
func (r *Retention) Status() RetentionStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.status
	st.LastRunAt = copyTime(st.LastRunAt)
	return st
}
