package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// ProjectLister lists the projects the reaper should look at (the
// projections know every project with events).
type ProjectLister interface {
	Projects() ([]string, error)
}

// Reaper releases expired claims on a timer: the background form of
// claims:reconcile-expired, acting as the system. Every instance may run one;
// the ledger's expectation lets only one release a given claim.
type Reaper struct {
	engine   *Engine
	projects ProjectLister
	interval time.Duration
	logger   *slog.Logger

	mu     sync.Mutex
	status ReaperStatus
}

// ReaperStatus is what the reaper reports to readiness.
type ReaperStatus struct {
	Enabled       bool       `json:"enabled"`
	Interval      string     `json:"interval"`
	ClaimTTL      string     `json:"claim_ttl"`
	LastRunAt     *time.Time `json:"last_run_at"`
	ReleasedTotal int        `json:"released_total"`
	LastError     string     `json:"last_error,omitempty"`
}

// NewReaper returns a reaper of e's projects that runs every interval (0: it
// is disabled and Run returns at once).
func NewReaper(e *Engine, projects ProjectLister, interval time.Duration, logger *slog.Logger) *Reaper {
	return &Reaper{engine: e, projects: projects, interval: interval, logger: logger, status: ReaperStatus{
		Enabled: interval > 0, Interval: interval.String(), ClaimTTL: e.cfg.ClaimTTL.String(),
	}}
}

// Run releases expired claims every interval until ctx ends.
func (r *Reaper) Run(ctx context.Context) {
	if r.interval <= 0 {
		return
	}
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.Once(ctx)
	}
}

// Once runs one round: it loads the projects the lister knows (so that
// projects no request named yet are reaped too) and releases every expired
// claim. It returns how many it released.
func (r *Reaper) Once(ctx context.Context) int {
	projects, err := r.projects.Projects()
	if err == nil {
		err = r.engine.Preload(ctx, projects)
	}
	if err != nil && ctx.Err() == nil {
		r.logger.Warn("reaper: load projects", "err", err)
	}
	n, err := r.engine.Reap(ctx)
	now := r.engine.cfg.Now().UTC()
	r.mu.Lock()
	r.status.LastRunAt, r.status.ReleasedTotal, r.status.LastError = &now, r.status.ReleasedTotal+n, ""
	if err != nil {
		r.status.LastError = err.Error()
	}
	r.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		r.logger.Warn("reaper", "err", err)
	}
	return n
}

// Status returns the reaper's report.
func (r *Reaper) Status() ReaperStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.status
	st.LastRunAt = copyTime(st.LastRunAt)
	return st
}

// copyTime returns a copy of *t (nil for nil), so that a status handed out
// shares nothing with the one kept under the lock.
func copyTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}
