package serve

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
)

// Retention (serve --retain-finished): the archive directory, the ledger
// read through it, and the timer that archives, purges and retires
// (engine.Retention; docs/retention.md).

// DefaultRetentionInterval is the time between retention runs.
const DefaultRetentionInterval = time.Minute

// DefaultArchiveSegmentEvents is the most events one archive segment holds.
const DefaultArchiveSegmentEvents = 100_000

// RetentionConfig is serve's part of retention.
type RetentionConfig struct {
	// RetainFinished turns retention on: events older than it leave the
	// stream for the archive, and Turn trees finished longer ago than it
	// (and than the 24h idempotency memory) leave the projections. 0: off,
	// everything is kept.
	RetainFinished time.Duration
	// Interval is the time between runs (DefaultRetentionInterval when 0).
	Interval time.Duration
	// ArchiveDir is the archive's directory (DataDir/archive when empty),
	// or nats://<bucket>: a NATS object store bucket of the ledger's
	// server, with the stream's replicas, so that a cluster's archive lives
	// on the cluster.
	ArchiveDir string
	// SegmentEvents is the most events a segment holds
	// (DefaultArchiveSegmentEvents when 0).
	SegmentEvents int
	// CompactFreeShare: at start, projections.db is compacted (copied
	// with every page full) when at least this share of its pages is free,
	// as after retention retired much of it. 0: never. Default 0.5.
	CompactFreeShare float64
	// Wrap, when set, wraps the ledger and the projections as retention
	// uses them. Tests only: they interrupt a run between its steps.
	Wrap func(engine.RetentionLedger, engine.RetentionProjections) (engine.RetentionLedger, engine.RetentionProjections)
}

func (c RetentionConfig) validate() error {
	var errs []error
	if c.RetainFinished < 0 {
		errs = append(errs, errors.New("serve: the retention (RetainFinished) must not be negative"))
	}
	if c.RetainFinished > 0 && c.RetainFinished < time.Minute {
		errs = append(errs, errors.New("serve: a retention (RetainFinished) shorter than a minute would archive the events of work in progress: give at least 1m"))
	}
	if c.CompactFreeShare < 0 || c.CompactFreeShare > 1 {
		errs = append(errs, errors.New("serve: the free share that compacts the projections at start must be 0 to 1"))
	}
	if c.Interval < 0 || c.SegmentEvents < 0 {
		errs = append(errs, errors.New("serve: the retention interval and segment size must not be negative"))
	}
	return errors.Join(errs...)
}

// compactProjections compacts the projection file at path before it opens,
// when it is mostly free pages.
func (s *Service) compactProjections(path string) {
	res, err := projection.CompactIfFree(path, s.cfg.Retention.CompactFreeShare)
	switch {
	case err != nil:
		s.cfg.Logger.Warn("compact the projections", "path", path, "err", err)
	case res.Compacted:
		s.cfg.Logger.Info("compacted the projections", "path", path, "free_share", res.FreeShare, "bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter)
	}
}

// archiveDir is where the archive is.
func (s *Service) archiveDir() string {
	if s.cfg.Retention.ArchiveDir != "" {
		return s.cfg.Retention.ArchiveDir
	}
	return filepath.Join(s.cfg.DataDir, "archive")
}

// openArchive opens the archive when retention is on, or when one exists
// (retention ran before: the stream may be purged below a horizon), and
// reads the ledger through it.
func (s *Service) openArchive(ctx context.Context) error {
	a, err := openArchive(ctx, s.nc, s.archiveDir(), s.cfg.Retention.RetainFinished > 0, s.cfg.Ledger.Replicas)
	if err != nil || a == nil {
		return err
	}
	s.archived = ledger.WithArchive(s.ledger, a)
	return nil
}

// openArchive opens the archive at where (a directory, or nats://<bucket>
// on nc's server): for writing, making it when missing; else for reading,
// when it exists (nil when it does not).
func openArchive(ctx context.Context, nc *nats.Conn, where string, write bool, replicas int) (*ledger.Archive, error) {
	if bucket, ok := ledger.IsObjectArchive(where); ok {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, err
		}
		if write {
			return ledger.OpenObjectArchive(ctx, js, bucket, replicas)
		}
		a, err := ledger.ReadObjectArchive(ctx, js, bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, nil
		}
		return a, err
	}
	if write {
		return ledger.OpenArchive(where)
	}
	if _, err := os.Stat(where); err != nil {
		return nil, nil
	}
	return ledger.ReadArchive(where)
}

// readLedger is the ledger as the engine and the projector read it:
// through the archive when there is one.
func (s *Service) readLedger() interface {
	engine.Ledger
	projection.Source
} {
	if s.archived != nil {
		return s.archived
	}
	return s.ledger
}

// startRetention starts the retention timer when retention is on.
func (s *Service) startRetention(ctx context.Context) {
	rc := s.cfg.Retention
	if rc.Interval == 0 {
		rc.Interval = DefaultRetentionInterval
	}
	if rc.SegmentEvents == 0 {
		rc.SegmentEvents = DefaultArchiveSegmentEvents
	}
	if rc.RetainFinished > 0 && s.cfg.NATSURL != "" {
		s.cfg.Logger.Warn("retention purges the shared stream by this instance's projections and snapshots: run it on one instance only, and give the others this archive (docs/retention.md)", "archive", s.archiveDir())
	}
	var l engine.RetentionLedger = noArchive{}
	if s.archived != nil {
		l = &retentionLedger{l: s.archived, segmentEvents: rc.SegmentEvents, logger: s.cfg.Logger}
	}
	var p engine.RetentionProjections = retentionProjections{s.store}
	if rc.Wrap != nil {
		l, p = rc.Wrap(l, p)
	}
	s.retention = engine.NewRetention(s.engine, l, p, engine.RetentionConfig{Retain: rc.RetainFinished, Interval: rc.Interval}, s.cfg.Logger)
	horizon, _ := s.store.Horizon()
	first, _ := l.FirstSeq(ctx)
	var archived uint64
	var size int64
	if s.archived != nil {
		archived, _ = s.archived.Archive().Last()
		size, _ = s.archived.Archive().Size()
	}
	s.retention.Observe(horizon, first, archived, size)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.retention.Run(ctx)
	}()
}

// Retention is the service's retention (disabled without RetainFinished).
func (s *Service) Retention() *engine.Retention { return s.retention }

// retentionLedger is the ledger and its archive as engine.Retention uses
// them.
type retentionLedger struct {
	l             *ledger.Archived
	segmentEvents int
	logger        *slog.Logger
	denied        sync.Once
}

func (r *retentionLedger) Archive(ctx context.Context, until uint64, keep func(kernel.Recorded) bool) (uint64, error) {
	return r.l.ArchiveTo(ctx, r.l.Archive(), until, r.segmentEvents, keep)
}

// PurgeBelow purges the stream, unless it was made append-only (before
// retention was turned on): then the events stay in the stream too, and
// /readyz shows its first ledger_seq below the horizon.
func (r *retentionLedger) PurgeBelow(ctx context.Context, horizon uint64) error {
	err := r.l.PurgeBelow(ctx, horizon)
	if errors.Is(err, ledger.ErrPurgeDenied) {
		r.denied.Do(func() { r.logger.Warn("retention archives, but cannot purge the stream", "err", err) })
		return nil
	}
	return err
}

func (r *retentionLedger) FirstSeq(ctx context.Context) (uint64, error) { return r.l.FirstSeq(ctx) }
func (r *retentionLedger) ArchiveBytes() (int64, error)                 { return r.l.Archive().Size() }

// noArchive is the ledger of a disabled retention.
type noArchive struct{}

func (noArchive) Archive(context.Context, uint64, func(kernel.Recorded) bool) (uint64, error) {
	return 0, errors.New("serve: retention is off")
}
func (noArchive) PurgeBelow(context.Context, uint64) error { return nil }
func (noArchive) FirstSeq(context.Context) (uint64, error) { return 1, nil }
func (noArchive) ArchiveBytes() (int64, error)             { return 0, nil }

// retentionProjections is the projection store as engine.Retention uses it.
type retentionProjections struct{ *projection.Store }

func (p retentionProjections) Retire(_ context.Context, horizon uint64, finishedBefore, now time.Time) (engine.Retired, error) {
	res, err := p.Store.Retire(projection.Retirement{Horizon: horizon, FinishedBefore: finishedBefore, Now: now})
	return engine.Retired{Horizon: res.Horizon, FeedKeys: res.FeedKeys, Turns: res.TurnsRetired}, err
}

// watchRetention registers the retention gauges.
func (m *metrics) watchRetention(s *Service) {
	gauge := func(name, help string, f func(engine.RetentionStatus) float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if s.retention == nil {
				return 0
			}
			return f(s.retention.Status())
		}))
	}
	gauge("turnledger_retention_horizon_ledger_seq", "The first ledger_seq the feeds hold (0: no retention run yet).", func(st engine.RetentionStatus) float64 {
		return float64(st.HorizonLedgerSeq)
	})
	gauge("turnledger_archive_bytes", "Bytes of the archive's segments.", func(st engine.RetentionStatus) float64 { return float64(st.ArchiveBytes) })
	gauge("turnledger_retention_last_run_timestamp_seconds", "When the last retention run began, Unix seconds (0: none yet).", func(st engine.RetentionStatus) float64 {
		if st.LastRunAt == nil {
			return 0
		}
		return float64(st.LastRunAt.UnixNano()) / 1e9
	})
	gauge("turnledger_retention_last_run_duration_seconds", "How long the last retention run took.", func(st engine.RetentionStatus) float64 { return st.LastRunSeconds })
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "turnledger_turns_retired_total", Help: "Turns retired from the projections since the start."}, func() float64 {
		if s.retention == nil {
			return 0
		}
		return float64(s.retention.Status().TurnsRetiredTotal)
	}))
}
