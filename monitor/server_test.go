package monitor

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fullConfig has a postgres and a turnledger connection, a query on each,
// and one channel of each kind.
func fullConfig(t *testing.T, c *clock) Config {
	t.Helper()
	dsn := shop(t)
	e := newEngine(t, "engine-admin-token")
	rc := newReceiver(t)
	ns := runNATS(t)
	cfg := testConfig(t, c, nil)
	cfg.Connections = []ConnectionConfig{
		{ID: "shop", Kind: KindPostgres, DSN: dsn, PasswordEnv: "SHOP_PW", Description: "the shop"},
		{ID: "engine", Kind: KindTurnledger, URL: e.srv.URL, AdminTokenEnv: "TL_ADMIN", Projects: []string{"alpha"}},
	}
	cfg.Channels = []ChannelConfig{
		{ID: "hook", Kind: ChannelWebhook, URLEnv: "HOOK_URL", SecretEnv: "HOOK_SECRET"},
		{ID: "bus", Kind: ChannelNATS, URL: ns.ClientURL(), Subject: "monitor.alerts"},
		{ID: "log", Kind: ChannelLog},
	}
	cfg.Queries = []QueryConfig{
		{ID: "pending", Description: "orders stuck", Connection: "shop", Query: "SELECT id FROM orders WHERE status = 'pending'", Interval: Duration(5 * time.Minute), Check: rowCount(">", 0), Channels: []string{"hook"}},
		{ID: "lag", Connection: "engine", Query: EngineProjectionLag, Interval: Duration(time.Minute), Timeout: Duration(5 * time.Second), Check: Check{Kind: CheckValueRange, Column: "lag", Max: ptr(100.0)}},
	}
	cfg.Secrets = map[string]string{"SHOP_PW": "pg-password-123", "TL_ADMIN": "engine-admin-token", "HOOK_URL": rc.srv.URL + "/secret-path-456", "HOOK_SECRET": "hook-secret-789"}
	return cfg
}

func TestRoutes(t *testing.T) {
	c := newClock()
	cfg := fullConfig(t, c)
	m := open(t, cfg)
	srv := serve(t, m)

	var h Health
	if code := call(t, srv, "GET", "/api/health", "", &h); code != 200 {
		t.Fatalf("GET /api/health = %d, want 200", code)
	}
	if diff := cmp.Diff(Health{Status: "ok", StartedAt: t0, Queries: 2, Connections: 2, Channels: 3, Scheduler: "stopped"}, h); diff != "" {
		t.Errorf("health (-want +got):\n%s", diff)
	}

	var qs struct{ Queries []QueryInfo }
	if code := call(t, srv, "GET", "/api/queries", "", &qs); code != 200 || len(qs.Queries) != 2 {
		t.Fatalf("GET /api/queries = %d with %d queries, want 200 with 2", code, len(qs.Queries))
	}
	got := qs.Queries[1]
	if got.ID != "lag" || got.Interval != "1m0s" || got.Timeout != "5s" || !cmp.Equal(got.Channels, []string{"hook", "bus", "log"}) ||
		got.NextRunAt == nil || !got.NextRunAt.Equal(t0) || got.LastRun != nil || got.ActiveErrorID != nil {
		t.Errorf("GET /api/queries [1] = %+v, want lag every 1m0s, timeout 5s, all channels, due now, never run", got)
	}

	var run RunOutcome
	if code := call(t, srv, "POST", "/api/queries/pending/run", "", &run); code != 200 || run.Run.Passed || run.Result.RowCount != 2 || run.Error == nil {
		t.Fatalf("POST /api/queries/pending/run = %d %+v, want 200, failed with 2 rows and an error", code, run)
	}
	var q QueryDetail
	if code := call(t, srv, "GET", "/api/queries/pending", "", &q); code != 200 {
		t.Fatalf("GET /api/queries/pending = %d, want 200", code)
	}
	if q.Description != "orders stuck" || q.LastRun == nil || q.LastRun.ID != run.Run.ID || len(q.RecentRuns) != 1 || q.ActiveErrorID == nil || *q.ActiveErrorID != run.Error.ID {
		t.Errorf("GET /api/queries/pending = %+v, want its last run and active error", q)
	}
	call(t, srv, "GET", "/api/health", "", &h)
	if h.ActiveErrors != 1 {
		t.Errorf("health active_errors = %d, want 1", h.ActiveErrors)
	}

	var conns struct{ Connections []ConnectionInfo }
	if code := call(t, srv, "GET", "/api/connections", "", &conns); code != 200 {
		t.Fatalf("GET /api/connections = %d, want 200", code)
	}
	u, _ := url.Parse(cfg.Connections[0].DSN)
	wantConns := []ConnectionInfo{
		{ID: "shop", Kind: KindPostgres, Description: "the shop", Queries: []string{"pending"},
			Target: map[string]any{"host": "127.0.0.1", "port": float64(atoi(t, u.Port())), "database": strings.TrimPrefix(u.Path, "/"), "user": "postgres", "password_env": "SHOP_PW"}},
		{ID: "engine", Kind: KindTurnledger, Queries: []string{"lag"},
			Target: map[string]any{"url": cfg.Connections[1].URL, "projects": []any{"alpha"}, "admin_token_env": "TL_ADMIN"}},
	}
	if diff := cmp.Diff(wantConns, conns.Connections); diff != "" {
		t.Errorf("GET /api/connections (-want +got):\n%s", diff)
	}
	var ct ConnectionTest
	for _, id := range []string{"shop", "engine"} {
		if code := call(t, srv, "POST", "/api/connections/"+id+"/test", "", &ct); code != 200 || !ct.OK || ct.ConnectionID != id {
			t.Errorf("POST /api/connections/%s/test = %d %+v, want 200 ok", id, code, ct)
		}
	}

	var chans struct{ Channels []ChannelInfo }
	if code := call(t, srv, "GET", "/api/channels", "", &chans); code != 200 || len(chans.Channels) != 3 {
		t.Fatalf("GET /api/channels = %d %+v, want 200 with 3", code, chans)
	}
	var chTest ChannelTest
	if code := call(t, srv, "POST", "/api/channels/hook/test", "", &chTest); code != 200 || !chTest.OK {
		t.Errorf("POST /api/channels/hook/test = %d %+v, want 200 ok", code, chTest)
	}

	var errs struct{ Errors []Error }
	if code := call(t, srv, "GET", "/api/errors", "", &errs); code != 200 || len(errs.Errors) != 1 {
		t.Errorf("GET /api/errors = %d %+v, want 200 with one", code, errs)
	}
	var resolved Error
	if code := call(t, srv, "POST", "/api/errors/1/resolve", "", &resolved); code != 200 || resolved.Status != StatusResolved {
		t.Errorf("POST /api/errors/1/resolve = %d %+v, want 200 resolved", code, resolved)
	}
	var o Overview
	if code := call(t, srv, "GET", "/api/stats/overview?days=7", "", &o); code != 200 || o.Runs != 1 {
		t.Errorf("GET /api/stats/overview = %d %+v, want 200 with 1 run", code, o)
	}
	var tl Timeline
	if code := call(t, srv, "GET", "/api/stats/timeline?days=2", "", &tl); code != 200 || len(tl.Timeline) != 2 {
		t.Errorf("GET /api/stats/timeline = %d %+v, want 200 with 2 days", code, tl)
	}
	var next SchedulerNext
	if code := call(t, srv, "GET", "/api/scheduler/next", "", &next); code != 200 || next.QueryID == nil || *next.QueryID != "lag" {
		t.Errorf("GET /api/scheduler/next = %d %+v, want 200 naming lag", code, next)
	}

	// No answer carries a secret.
	for _, path := range []string{"/api/health", "/api/queries", "/api/queries/pending", "/api/connections", "/api/channels", "/api/errors?status=all", "/api/scheduler/next"} {
		_, body := raw(t, srv, "GET", path)
		for name, secret := range cfg.Secrets {
			if strings.Contains(body, secret) || (name == "HOOK_URL" && strings.Contains(body, "secret-path-456")) {
				t.Errorf("GET %s shows the value of %s", path, name)
			}
		}
	}
}

func TestRouteErrors(t *testing.T) {
	c := newClock()
	_, cfg := schedConfig(t, c)
	m := open(t, cfg)
	srv := serve(t, m)
	for _, tc := range []struct {
		method, path string
		status       int
		name         string
	}{
		{"GET", "/api/queries/nope", 404, ErrNotFound},
		{"POST", "/api/queries/nope/run", 404, ErrNotFound},
		{"POST", "/api/connections/nope/test", 404, ErrNotFound},
		{"POST", "/api/channels/nope/test", 404, ErrNotFound},
		{"POST", "/api/errors/0/resolve", 404, ErrNotFound},
		{"POST", "/api/errors/01/resolve", 404, ErrNotFound},
		{"GET", "/api/errors?status=open", 400, ErrValidation},
		{"GET", "/api/errors?query_id=nope", 400, ErrValidation},
		{"GET", "/api/nothing", 404, ErrNotFound},
		{"GET", "/api/queries/", 404, ErrNotFound},
		{"DELETE", "/api/queries/fast", 405, ErrMethodNotAllowed},
		{"GET", "/api/queries/fast/run", 405, ErrMethodNotAllowed},
		{"PUT", "/api/health", 405, ErrMethodNotAllowed},
		{"GET", "/api/errors/1/resolve", 405, ErrMethodNotAllowed},
	} {
		wantError(t, srv, tc.method, tc.path, "", tc.status, tc.name)
	}
}
