package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The built-in configuration, used when `turnledger monitor` gets no
// --config: it watches the local engine (engineURL, `turnledger monitor`'s
// --engine-url, default http://127.0.0.1:8000) — readiness every 30s and projection lag every
// 30s — and, for the projects given with --projects, expired claims and
// unserved stop requests every minute; every error goes to the log channel.
// The admin token is TURNLEDGER_ADMIN_TOKEN, else the one serve keeps in
// <--engine-data>/admin-token (default ./data).

// BuiltinTokenEnv is the secret name the built-in configuration uses for
// the engine's admin token.
const BuiltinTokenEnv = "TURNLEDGER_ADMIN_TOKEN"

// BuiltinFile returns the built-in configuration file; blank project names
// are left out.
func BuiltinFile(engineURL string, projects []string, withToken bool) ([]byte, error) {
	var names []string
	for _, p := range projects {
		if p = strings.TrimSpace(p); p != "" {
			names = append(names, p)
		}
	}
	projects = names
	if len(projects) > 0 && !withToken {
		return nil, fmt.Errorf("watching projects needs the engine's admin token: set %s or pass --engine-data DIR with DIR/admin-token", BuiltinTokenEnv)
	}
	conn := map[string]any{"id": "engine", "kind": "turnledger", "description": "the local turnledger engine (built-in configuration)", "url": engineURL}
	if withToken {
		conn["admin_token_env"] = BuiltinTokenEnv
	}
	if len(projects) > 0 {
		conn["projects"] = projects
	}
	queries := []any{
		map[string]any{"id": "engine-ready", "connection": "engine", "query": "ready", "interval": "30s", "check": map[string]any{"kind": "query_fails"}, "channels": []string{"log"}},
		map[string]any{"id": "projection-lag", "connection": "engine", "query": "projection_lag", "interval": "30s", "check": map[string]any{"kind": "value_range", "column": "lag", "max": 1000}, "channels": []string{"log"}},
	}
	if len(projects) > 0 {
		queries = append(queries,
			map[string]any{"id": "expired-claims", "connection": "engine", "query": "expired_claims", "interval": "1m", "check": map[string]any{"kind": "row_count", "op": ">", "value": 0}, "channels": []string{"log"}},
			map[string]any{"id": "unserved-stops", "connection": "engine", "query": "unserved_stop_requests older_than=60s", "interval": "1m", "check": map[string]any{"kind": "row_count", "op": ">", "value": 0}, "channels": []string{"log"}},
		)
	}
	return json.Marshal(map[string]any{
		"connections": []any{conn},
		"queries":     queries,
		"channels":    []any{map[string]any{"id": "log", "kind": "log"}},
	})
}

// Serve serves the API with hs on ln and, when schedule is set, runs the
// queries on their schedules, until ctx ends or hs fails; then it shuts hs
// down (waiting up to 10 s) and waits for the scheduler.
func (m *Monitor) Serve(ctx context.Context, hs *http.Server, ln net.Listener, schedule bool) error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	if schedule {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.RunScheduler(runCtx)
		}()
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs.Shutdown(shutdownCtx)
	wg.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
