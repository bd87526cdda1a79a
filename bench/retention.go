package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
	"github.com/turnledger/turnledger/serve"
)

// RetentionResult is what the retention scenario measured: the sizes of the
// stream, the projections and the archive before and after one retention
// run that keeps the last 10 % of --events, the run's time, command latency
// before and during it, and the projections' bytes per event before and
// after compaction.
type RetentionResult struct {
	Horizon        uint64  `json:"horizon_ledger_seq"`
	TurnsRetired   int     `json:"turns_retired"`
	RunSeconds     float64 `json:"run_seconds"`
	LedgerMBBefore float64 `json:"ledger_mib_before"`
	LedgerMBAfter  float64 `json:"ledger_mib_after"`
	ProjMBBefore   float64 `json:"projections_mib_before"`
	ProjMBAfter    float64 `json:"projections_mib_after"`
	ProjMBCompact  float64 `json:"projections_mib_compacted"`
	ArchiveMB      float64 `json:"archive_mib"`
	BytesPerEvent  float64 `json:"projection_bytes_per_event_before"`
	BytesPerEventC float64 `json:"projection_bytes_per_event_compacted"`
	// Command latency (every command kind together), before the run and
	// while it runs, under the same open-loop load.
	P99Before  float64 `json:"command_p99_ms_before"`
	P99During  float64 `json:"command_p99_ms_during"`
	P50Before  float64 `json:"command_p50_ms_before"`
	P50During  float64 `json:"command_p50_ms_during"`
	CmdsDuring int     `json:"commands_during"`
}

func (r *RetentionResult) print(w io.Writer, events int) {
	fmt.Fprintf(w, "%d events, retention keeping the last 10 %%: horizon %d, %d Turns retired, the run took %.1f s\n", events, r.Horizon, r.TurnsRetired, r.RunSeconds)
	fmt.Fprintf(w, "  stream %.0f → %.0f MiB; projections.db %.0f → %.0f MiB, %.0f MiB compacted; archive %.0f MiB\n",
		r.LedgerMBBefore, r.LedgerMBAfter, r.ProjMBBefore, r.ProjMBAfter, r.ProjMBCompact, r.ArchiveMB)
	fmt.Fprintf(w, "  projections bytes per event of the ledger: %.0f before, %.0f compacted\n", r.BytesPerEvent, r.BytesPerEventC)
	fmt.Fprintf(w, "  commands p50/p99: %.2f/%.2f ms before the run, %.2f/%.2f ms during it (%d commands)\n", r.P50Before, r.P99Before, r.P50During, r.P99During, r.CmdsDuring)
}

// retention fills --data to --events (a stream that may be purged), then
// starts serve in-process with its clock set so that the last 10 % of the
// events are younger than the retention window (24 h), drives an open loop
// of lifecycles at --rate (20 Turns/s by default) for --duration before the
// run and during it, runs retention once, and measures the files before,
// after, and after a compaction.
func (b *bench) retention(ctx context.Context) (*Result, error) {
	dir, cleanup, err := b.dataDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	const retain = 24 * time.Hour
	res := &Result{Scenario: "retention", Events: b.cfg.Events}
	// The ledger is made with retention on (a stream without deny_purge),
	// its timer too far off to run.
	b.tune = func(c *serve.Config) {
		c.Retention.RetainFinished, c.Retention.Interval, c.Retention.CompactFreeShare = retain, 10000*time.Hour, 0
	}
	if err := b.fill(ctx, dir, res); err != nil {
		return nil, err
	}
	rr := &RetentionResult{
		LedgerMBBefore: dirMiB(filepath.Join(dir, "nats")),
		ProjMBBefore:   dirMiB(filepath.Join(dir, "projections.db")),
	}
	res.Retention = rr
	// The time of the event at 90 % of the ledger is now - retain.
	var offset atomic.Int64
	b.tune = func(c *serve.Config) {
		c.Retention.RetainFinished, c.Retention.Interval, c.Retention.CompactFreeShare = retain, 10000*time.Hour, 0
		c.ReapInterval = 0
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	}
	var svc *serve.Service
	b.onStart = func(s *serve.Service) { svc = s }
	t, err := b.start(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if t != nil {
			t.close()
		}
	}()
	head, err := svc.Ledger().Head(ctx)
	if err != nil {
		return nil, err
	}
	at90, err := svc.Ledger().Event(ctx, head*9/10)
	if err != nil {
		return nil, err
	}
	// (Set again right before the run: the clock moves meanwhile.)
	keepFrom := func() { offset.Store(int64(at90.Event.At.Add(retain).Sub(time.Now()))) }
	keepFrom()

	shared := newHTTPClient(b.cfg.Agents)
	defer shared.CloseIdleConnections()
	adm, err := t.adminClient(shared)
	if err != nil {
		return nil, err
	}
	// The write model of a large project loads in the background: until it
	// has, its commands are answered 503.
	for deadline := time.Now().Add(10 * time.Minute); ; {
		var r struct {
			Loading int `json:"write_models_loading"`
		}
		if raw, err := adm.Readyz(ctx); err == nil && json.Unmarshal(raw, &r) == nil && r.Loading == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the write models did not load within 10 minutes")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	f, err := b.setUp(ctx, t, adm)
	if err != nil {
		return nil, err
	}
	rate := b.cfg.Rate
	if rate <= 0 {
		rate = 20
	}
	before := &recorder{lat: map[string][]time.Duration{}}
	b.drive(ctx, shared, f, before, b.cfg.Duration, rate, 0)
	rr.P50Before, rr.P99Before = allQuantiles(before)

	during := &recorder{lat: map[string][]time.Duration{}}
	runCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		b.drive(runCtx, shared, f, during, 24*time.Hour, rate, 0)
	}()
	keepFrom()
	start := time.Now()
	runErr := svc.Retention().Once(ctx)
	rr.RunSeconds = time.Since(start).Seconds()
	stopLoad()
	<-loadDone
	if runErr != nil {
		return nil, fmt.Errorf("the retention run: %w", runErr)
	}
	rr.P50During, rr.P99During = allQuantiles(during)
	rr.CmdsDuring = int(during.cmds.Load())
	st := svc.Retention().Status()
	rr.Horizon, rr.TurnsRetired = st.HorizonLedgerSeq, st.TurnsRetiredTotal
	events, _ := svc.Ledger().Head(ctx)
	if err := t.close(); err != nil {
		return nil, err
	}
	t = nil
	rr.LedgerMBAfter = dirMiB(filepath.Join(dir, "nats"))
	rr.ProjMBAfter = dirMiB(filepath.Join(dir, "projections.db"))
	rr.ArchiveMB = dirMiB(filepath.Join(dir, "archive"))
	rr.BytesPerEvent = rr.ProjMBBefore * (1 << 20) / float64(head)
	size, err := projection.Compact(filepath.Join(dir, "projections.db"))
	if err != nil {
		return nil, err
	}
	rr.ProjMBCompact = float64(size) / (1 << 20)
	rr.BytesPerEventC = float64(size) / float64(events)
	res.LedgerMB, res.ProjectionsMB = rr.LedgerMBAfter, rr.ProjMBCompact
	if a, err := ledger.ReadArchive(filepath.Join(dir, "archive")); err == nil {
		if n, err := a.Size(); err == nil {
			rr.ArchiveMB = float64(n) / (1 << 20)
		}
	}
	return res, nil
}

// allQuantiles is the p50 and p99 of every command a recorder timed, in
// milliseconds.
func allQuantiles(r *recorder) (p50, p99 float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []time.Duration
	for _, d := range r.lat {
		all = append(all, d...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return quantile(all, 0.50), quantile(all, 0.99)
}
