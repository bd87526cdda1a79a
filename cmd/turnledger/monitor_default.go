package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// The built-in monitor configuration, used when `turnledger monitor` gets
// no --config: it watches the local engine (--engine-url, default
// http://127.0.0.1:8000) — readiness every 30s and projection lag every
// 30s — and, for the projects given with --projects, expired claims and
// unserved stop requests every minute; every error goes to the log channel.
// The admin token is TURNLEDGER_ADMIN_TOKEN, else the one serve keeps in
// <--engine-data>/admin-token (default ./data).

// defaultMonitorEnv is the secret name the built-in configuration uses for
// the engine's admin token.
const defaultMonitorEnv = "TURNLEDGER_ADMIN_TOKEN"

// defaultMonitorFile returns the built-in configuration file.
func defaultMonitorFile(engineURL string, projects []string, withToken bool) ([]byte, error) {
	if len(projects) > 0 && !withToken {
		return nil, fmt.Errorf("watching projects needs the engine's admin token: set %s or pass --engine-data DIR with DIR/admin-token", defaultMonitorEnv)
	}
	conn := map[string]any{"id": "engine", "kind": "turnledger", "description": "the local turnledger engine (built-in configuration)", "url": engineURL}
	if withToken {
		conn["admin_token_env"] = defaultMonitorEnv
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

// monitorConfig reads the configuration file, or makes the built-in one
// when *path is empty (and then names it so in *path, for messages); token is
// the engine's admin token the built-in configuration uses.
func monitorConfig(path *string, engineURL, engineData, projects string, stdout io.Writer) (data []byte, token string, err error) {
	if *path != "" {
		if data, err = os.ReadFile(*path); err != nil {
			return nil, "", fmt.Errorf("read configuration: %w", err)
		}
		return data, "", nil
	}
	token, _ = adminTokenFor("", engineData)
	if data, err = defaultMonitorFile(engineURL, splitList(projects), token != ""); err != nil {
		return nil, "", err
	}
	*path = "built-in configuration"
	fmt.Fprintf(stdout, "monitor: no --config, watching %s with the built-in configuration\n", engineURL)
	return data, token, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
