package monitor

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStats(t *testing.T) {
	c := newClock()
	c.Advance(-48 * time.Hour) // 2026-03-08 12:00
	e, cfg := lagEngine(t, c, newReceiver(t), &syncBuffer{})
	cfg.Queries = append(cfg.Queries, engineQuery("ready", EngineReady, Check{Kind: CheckQueryFails}))
	m := open(t, cfg)
	srv := serve(t, m)
	ctx := context.Background()
	run := func(id string) RunOutcome {
		t.Helper()
		out, err := m.RunQuery(ctx, id, TriggerManual)
		if err != nil {
			t.Fatalf("RunQuery(%s) = %v", id, err)
		}
		return out
	}
	// Day 1 (03-08): lag fails (opens error 1), ready passes.
	setLag(e, 50)
	first := run("lag")
	run("ready")
	// Day 2 (03-09): lag fails again, then error 1 is resolved an hour later.
	c.Advance(24 * time.Hour)
	run("lag")
	c.Advance(time.Hour)
	if _, err := m.Resolve(first.Error.ID, ""); err != nil {
		t.Fatal(err)
	}
	// Day 3 (03-10, today): lag passes, then fails (opens error 2).
	c.Advance(23 * time.Hour)
	setLag(e, 0)
	run("lag")
	setLag(e, 60)
	run("lag")

	var tl Timeline
	if code := call(t, srv, "GET", "/api/stats/timeline?days=4", "", &tl); code != 200 {
		t.Fatalf("GET /api/stats/timeline?days=4 = %d, want 200", code)
	}
	wantTL := Timeline{Days: 4, From: time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC), To: c.Now(), Timeline: []DayCounts{
		{Date: "2026-03-07"},
		{Date: "2026-03-08", Runs: 2, FailedRuns: 1, ErrorsOpened: 1},
		{Date: "2026-03-09", Runs: 1, FailedRuns: 1, ErrorsResolved: 1},
		{Date: "2026-03-10", Runs: 2, FailedRuns: 1, ErrorsOpened: 1},
	}}
	if diff := cmp.Diff(wantTL, tl); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}

	var o Overview
	if code := call(t, srv, "GET", "/api/stats/overview", "", &o); code != 200 {
		t.Fatalf("GET /api/stats/overview = %d, want 200", code)
	}
	wantO := Overview{Days: DefaultStatsDays, From: time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), To: c.Now(),
		Runs: 5, FailedRuns: 3, FailureRate: 0.6, ErrorsOpened: 2, ErrorsResolved: 1, ActiveErrors: 1,
		MeanTimeToResolveSeconds: ptr(25 * time.Hour.Seconds()),
		ByQuery:                  []QueryStats{{QueryID: "lag", Runs: 4, FailedRuns: 3, ErrorsOpened: 2}, {QueryID: "ready", Runs: 1}}}
	if diff := cmp.Diff(wantO, o); diff != "" {
		t.Errorf("overview (-want +got):\n%s", diff)
	}
	// days=1 is today only.
	call(t, srv, "GET", "/api/stats/overview?days=1", "", &o)
	if o.Runs != 2 || o.ErrorsOpened != 1 || o.ErrorsResolved != 0 || o.MeanTimeToResolveSeconds != nil || o.ActiveErrors != 1 {
		t.Errorf("overview?days=1 = %+v, want today's 2 runs, 1 error opened, none resolved, 1 active", o)
	}
	call(t, srv, "GET", "/api/stats/timeline?days=90", "", &tl)
	if len(tl.Timeline) != 90 || tl.Timeline[89].Date != "2026-03-10" {
		t.Errorf("timeline?days=90 has %d days ending %v, want 90 ending 2026-03-10", len(tl.Timeline), tl.Timeline[len(tl.Timeline)-1])
	}

	for _, path := range []string{"/api/stats/overview", "/api/stats/timeline"} {
		for _, q := range []string{"?days=0", "?days=91", "?days=-1", "?days=x", "?days=1.5", "?days=", "?days=1&days=2", "?days=99999999999999999999"} {
			wantError(t, srv, "GET", path+q, "", 400, ErrValidation)
		}
	}
}
