package monitor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// These tests run against a small HTTP server on loopback that serves the
// engine's documented /readyz and Turn projection JSON: the engine itself
// is being built in parallel.

func engineConfig(t *testing.T, c *clock, e *engine, token string, queries ...QueryConfig) Config {
	t.Helper()
	cfg := testConfig(t, c, nil)
	cfg.Connections = []ConnectionConfig{{ID: "engine", Kind: KindTurnledger, URL: e.srv.URL, AdminTokenEnv: "TL_ADMIN", Projects: []string{"alpha", "beta"}}}
	cfg.Secrets = map[string]string{"TL_ADMIN": token}
	cfg.Queries = queries
	return cfg
}

func engineQuery(id, check string, ck Check) QueryConfig {
	return QueryConfig{ID: id, Connection: "engine", Query: check, Interval: Duration(30 * time.Second), Check: ck}
}

func TestEngineChecks(t *testing.T) {
	e := newEngine(t, "s3cret")
	c := newClock()
	e.set(func(e *engine) {
		e.turns["alpha"] = []map[string]any{
			{"turn_id": "t1", "state": "claimed", "stop_requested": false, "claim": map[string]any{"agent_id": "a1", "expires_at": t0.Add(-90 * time.Second).Format(time.RFC3339)}},
			{"turn_id": "t2", "state": "claimed", "stop_requested": true, "stop_requested_at": t0.Add(-30 * time.Second).Format(time.RFC3339), "claim": map[string]any{"agent_id": "a2", "expires_at": t0.Add(time.Minute).Format(time.RFC3339)}},
			{"turn_id": "t3", "state": "queued", "stop_requested": false, "claim": nil},
			{"turn_id": "t4", "state": "finished", "stop_requested": true, "claim": nil},
		}
		e.turns["beta"] = []map[string]any{
			{"turn_id": "t5", "state": "suspended", "stop_requested": true, "claim": nil},
		}
	})
	m := open(t, engineConfig(t, c, e, "s3cret",
		engineQuery("ready", EngineReady, Check{Kind: CheckQueryFails}),
		engineQuery("head", EngineLedgerHead, Check{Kind: CheckValueRange, Column: "ledger_head", Min: ptr(1.0)}),
		engineQuery("lag", EngineProjectionLag, Check{Kind: CheckValueRange, Column: "lag", Max: ptr(2.0)}),
		engineQuery("expired", EngineExpiredClaims, rowCount(">", 0)),
		engineQuery("stops", EngineUnservedStopRequests, rowCount(">", 0)),
		engineQuery("old_stops", EngineUnservedStopRequests+" older_than=60s", rowCount(">", 0)),
	))
	for _, tc := range []struct {
		id         string
		wantPassed bool
		wantRows   []map[string]any
	}{
		{"ready", true, []map[string]any{{"status": "ready", "backend": "embedded", "stream": "TURNLEDGER", "ledger_head": int64(123), "applied_seq": int64(120), "lag": int64(3), "reaper_enabled": true}}},
		{"head", true, []map[string]any{{"stream": "TURNLEDGER", "backend": "embedded", "ledger_head": int64(123)}}},
		{"lag", false, []map[string]any{{"ledger_head": int64(123), "applied_seq": int64(120), "lag": int64(3)}}},
		{"expired", false, []map[string]any{{"project_id": "alpha", "turn_id": "t1", "agent_id": "a1", "expires_at": "2026-03-10T11:58:30Z", "expired_seconds": 90.0}}},
		{"stops", false, []map[string]any{
			{"project_id": "alpha", "turn_id": "t2", "state": "claimed", "agent_id": "a2", "stop_requested_at": "2026-03-10T11:59:30Z", "pending_seconds": 30.0},
			{"project_id": "beta", "turn_id": "t5", "state": "suspended", "agent_id": nil, "stop_requested_at": nil, "pending_seconds": nil},
		}},
		// A stop asked 30 s ago is not yet older than 60 s; one of unknown age
		// (an engine that does not say when) is kept.
		{"old_stops", false, []map[string]any{
			{"project_id": "beta", "turn_id": "t5", "state": "suspended", "agent_id": nil, "stop_requested_at": nil, "pending_seconds": nil},
		}},
	} {
		out, err := m.RunQuery(context.Background(), tc.id, TriggerManual)
		if err != nil {
			t.Fatalf("RunQuery(%s) = %v", tc.id, err)
		}
		if out.Run.Passed != tc.wantPassed {
			t.Errorf("RunQuery(%s).Passed = %v (%s), want %v", tc.id, out.Run.Passed, out.Run.Reason, tc.wantPassed)
		}
		if diff := cmp.Diff(tc.wantRows, out.Result.Rows); diff != "" {
			t.Errorf("RunQuery(%s) rows (-want +got):\n%s", tc.id, diff)
		}
	}
}

// TestEngineNotReadyNamesTheCauses checks that a run of `ready` on an engine
// answering 503 quotes the causes the engine reports, each clipped.
func TestEngineNotReadyNamesTheCauses(t *testing.T) {
	e := newEngine(t, "s3cret")
	m := open(t, engineConfig(t, newClock(), e, "s3cret", engineQuery("ready", EngineReady, Check{Kind: CheckQueryFails})))
	long := strings.Repeat("é", 200) // 400 bytes
	for _, tc := range []struct {
		name, body, want string
	}{
		{"no cause", `{"status":"not_ready"}`, `query failed: engine is not ready: status "not_ready"`},
		{"projector", `{"status":"not_ready","projections":{"failing":true,"last_error":"ledger: event at ledger_seq 3: bad"}}`,
			`query failed: engine is not ready: status "not_ready" (projector failing: ledger: event at ledger_seq 3: bad)`},
		{"projector without a message", `{"status":"not_ready","projections":{"failing":true}}`,
			`query failed: engine is not ready: status "not_ready" (projector failing)`},
		{"both, clipped", `{"status":"not_ready","backend":{"error":"nats: timeout"},"projections":{"failing":true,"last_error":"` + long + `"}}`,
			`query failed: engine is not ready: status "not_ready" (ledger head: nats: timeout; projector failing: ` + strings.Repeat("é", 150) + `…)`},
	} {
		e.set(func(e *engine) { e.status, e.ready = 503, tc.body })
		out, err := m.RunQuery(context.Background(), "ready", TriggerManual)
		if err != nil || out.Run.Passed || out.Run.Reason != tc.want {
			t.Errorf("%s: RunQuery(ready) = %+v, %v; want failed with reason %q", tc.name, out.Run, err, tc.want)
		}
	}
}

func TestEngineNotReadyAndBadToken(t *testing.T) {
	e := newEngine(t, "right")
	m := open(t, engineConfig(t, newClock(), e, "wrong",
		engineQuery("ready", EngineReady, Check{Kind: CheckQueryFails}),
		engineQuery("lag", EngineProjectionLag, Check{Kind: CheckValueRange, Column: "lag", Max: ptr(10.0)}),
		engineQuery("expired", EngineExpiredClaims, rowCount(">", 0)),
	))
	e.set(func(e *engine) {
		e.status = 503
		e.ready = strings.Replace(e.ready, `"ready"`, `"not_ready"`, 1)
	})
	out, err := m.RunQuery(context.Background(), "ready", TriggerManual)
	if err != nil || out.Run.Passed || !strings.Contains(out.Run.Reason, "not ready") {
		t.Errorf("RunQuery(ready) on a 503 engine = %+v, %v; want a failure saying it is not ready", out.Run, err)
	}
	// The lag is still read from a 503 answer.
	out, err = m.RunQuery(context.Background(), "lag", TriggerManual)
	if err != nil || !out.Run.Passed {
		t.Errorf("RunQuery(lag) on a 503 engine = %+v, %v; want passed", out.Run, err)
	}
	out, err = m.RunQuery(context.Background(), "expired", TriggerManual)
	if err != nil || out.Run.Passed || !strings.Contains(out.Run.Reason, "status 401") {
		t.Errorf("RunQuery(expired) with a wrong token = %+v, %v; want a failure naming status 401", out.Run, err)
	}
	ct, err := m.TestConnection(context.Background(), "engine")
	if err != nil || ct.OK {
		t.Errorf("TestConnection on a 503 engine with a wrong token = %+v, %v; want not ok", ct, err)
	}
	e.set(func(e *engine) { e.status = 200; e.token = "wrong" })
	ct, err = m.TestConnection(context.Background(), "engine")
	if err != nil || !ct.OK || ct.Details["ledger_head"] != int64(123) {
		t.Errorf("TestConnection on a ready engine = %+v, %v; want ok with ledger_head 123", ct, err)
	}
	// beta has no agent registered: named, but the test still passes.
	if diff := cmp.Diff([]string{"beta"}, ct.Details["projects_without_agents"]); diff != "" {
		t.Errorf("TestConnection: projects_without_agents (-want +got):\n%s", diff)
	}
	e.srv.Close()
	ct, err = m.TestConnection(context.Background(), "engine")
	if err != nil || ct.OK || ct.Error == "" {
		t.Errorf("TestConnection on a stopped engine = %+v, %v; want not ok with an error", ct, err)
	}
}

// TestEngineChecksFollowTheCursor: a check reads every page of a project's
// Turns, not only the first 500.
func TestEngineChecksFollowTheCursor(t *testing.T) {
	e := newEngine(t, "s3cret")
	c := newClock()
	e.set(func(e *engine) {
		var turns []map[string]any
		for i := 0; i < 1234; i++ {
			turns = append(turns, map[string]any{"turn_id": fmt.Sprintf("t%d", i), "state": "claimed", "stop_requested": i%2 == 0,
				"claim": map[string]any{"agent_id": "a", "expires_at": t0.Add(time.Minute).Format(time.RFC3339)}})
		}
		e.turns["alpha"] = turns
		e.turns["beta"] = nil
	})
	m := open(t, engineConfig(t, c, e, "s3cret", engineQuery("stops", EngineUnservedStopRequests, rowCount(">", 0))))
	out, err := m.RunQuery(context.Background(), "stops", TriggerManual)
	if err != nil {
		t.Fatal(err)
	}
	// (The response shows the first rows only; row_count counts them all.)
	if out.Result.RowCount != 617 {
		t.Errorf("row_count = %d; want 617 Turns read across pages", out.Result.RowCount)
	}
}

func TestParseEngineQuery(t *testing.T) {
	for _, bad := range []string{"", "nope", "ready older_than=5s", "unserved_stop_requests older_than=soon", "unserved_stop_requests older_than=-1s", "unserved_stop_requests since=5s"} {
		if _, _, err := ParseEngineQuery(bad); err == nil {
			t.Errorf("ParseEngineQuery(%q) = nil error, want an error", bad)
		}
	}
	check, d, err := ParseEngineQuery("unserved_stop_requests older_than=90s")
	if err != nil || check != EngineUnservedStopRequests || d != 90*time.Second {
		t.Errorf("ParseEngineQuery = %q, %v, %v", check, d, err)
	}
}
