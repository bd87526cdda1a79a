package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/cliflag"
)

// requestLine is what a JSON request log line says, its duration left out
// (it varies).
type requestLine struct {
	Level    string  `json:"level"`
	Msg      string  `json:"msg"`
	Method   string  `json:"method"`
	Route    string  `json:"route"`
	Status   int     `json:"status"`
	Duration float64 `json:"duration"`
	Project  string  `json:"project"`
}

// requestLines waits until out holds at least n JSON request log lines and
// returns them all, in order.
func requestLines(t *testing.T, out *syncBuffer, n int) []requestLine {
	t.Helper()
	var lines []requestLine
	checkfor.Until(t, 5*time.Second, fmt.Sprintf("%d request log lines", n), func() bool {
		lines = nil
		for _, l := range strings.Split(out.String(), "\n") {
			var v requestLine
			if json.Unmarshal([]byte(l), &v) == nil && v.Msg == "request" {
				v.Duration = 0
				lines = append(lines, v)
			}
		}
		return len(lines) >= n
	})
	return lines
}

// startServeLogged is startServe that also returns what serve writes.
func startServeLogged(t *testing.T, dir string, args ...string) (string, *syncBuffer) {
	t.Helper()
	t.Setenv("TURNLEDGER_ADMIN_TOKEN", "")
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", dir, "--reap-interval", "0"}, args...), out, out)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	var base string
	checkfor.Until(t, 10*time.Second, "serve to start", func() bool {
		if m := servingOn.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	return base, out
}

// TestServeLogsOneLinePerRequestAndNoSecret drives serve with
// --log-format json through registration, credentials, a join invite and a
// Turn's claim, and reads its log: one line per request with method, route
// pattern, status, duration and project, and no token, claim token, join code
// or body anywhere.
func TestServeLogsOneLinePerRequestAndNoSecret(t *testing.T) {
	dir := t.TempDir()
	base, out := startServeLogged(t, dir, "--log-format", "json")
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch")
	w := agentClient(t, admin, "p1", "worker", 1)
	var invite struct {
		JoinCode string `json:"join_code"`
	}
	json.Unmarshal(admin.call("POST", "/admin/v1/projects/p1/agent-join-invites", map[string]any{"agent_id": "joiner", "profile_kind": "k", "runtime_kind": "r"}, 200), &invite)
	req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
		"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", "worker"), "input": map[string]any{"secret_input": "payload-never-logged"},
		"turn_kind": "summarize", "dispatch_key": "k1", "authority": map[string]any{"mode": "root_request", "request_id": "r1"},
	}, 200)
	var claimed struct {
		Claim struct {
			Token string `json:"token"`
		} `json:"claim"`
	}
	json.Unmarshal(w.call("POST", "/v3r1/projects/p1/agents/worker/claims:claim", map[string]any{"agent": agentRef("p1", "worker")}, 200), &claimed)
	bad := client{t: t, base: base, headers: map[string]string{"X-Svc-Project-Id": "p1", "X-Svc-Agent-Id": "worker", "Authorization": "Bearer tla_forged-token-never-logged"}}
	bad.call("GET", "/v3r1/projects/p1/agents/worker", nil, 401)
	admin.call("GET", "/no/such/route", nil, 404)

	requests := requestLines(t, out, 9)
	want := []requestLine{
		{"INFO", "request", "POST", "/v3r1/projects/{project_id}/agents:register", 200, 0, "p1"},
		{"INFO", "request", "POST", "/v3r1/projects/{project_id}/agents/{agent_id}/credentials:issue", 200, 0, "p1"},
		{"INFO", "request", "POST", "/v3r1/projects/{project_id}/agents:register", 200, 0, "p1"},
		{"INFO", "request", "POST", "/v3r1/projects/{project_id}/agents/{agent_id}/credentials:issue", 200, 0, "p1"},
		{"INFO", "request", "POST", "/admin/v1/projects/{project_id}/agent-join-invites", 200, 0, "p1"},
		{"INFO", "request", "POST", "/v3r1/projects/{project_id}/turns:dispatch", 200, 0, "p1"},
		{"INFO", "request", "POST", "/v3r1/projects/{project_id}/agents/{agent_id}/claims:claim", 200, 0, "p1"},
		{"INFO", "request", "GET", "/v3r1/projects/{project_id}/agents/{agent_id}", 401, 0, "p1"},
		{"INFO", "request", "GET", "(no route)", 404, 0, ""},
	}
	if diff := cmp.Diff(want, requests); diff != "" {
		t.Errorf("request log lines (-want +got):\n%s\n%s", diff, out.String())
	}
	adminToken, _ := os.ReadFile(filepath.Join(dir, "admin-token"))
	secrets := map[string]string{
		"admin token":       strings.TrimSpace(string(adminToken)),
		"requester's token": strings.TrimPrefix(req.headers["Authorization"], "Bearer "),
		"worker's token":    strings.TrimPrefix(w.headers["Authorization"], "Bearer "),
		"claim token":       claimed.Claim.Token,
		"join code":         invite.JoinCode,
		"forged token":      "tla_forged-token-never-logged",
		"a body":            "payload-never-logged",
	}
	for name, s := range secrets {
		if len(s) < 8 {
			t.Fatalf("%s %q is not a secret worth looking for", name, s)
		}
		if strings.Contains(out.String(), s) {
			t.Errorf("serve's output holds the %s:\n%s", name, out.String())
		}
	}
}

func TestServeLogFormatAndLevelFlags(t *testing.T) {
	base, out := startServeLogged(t, t.TempDir())
	client{t: t, base: base}.call("GET", "/healthz", nil, 200)
	checkfor.Until(t, 5*time.Second, "a text request line", func() bool {
		return strings.Contains(out.String(), "level=INFO msg=request method=GET route=/healthz status=200 duration=")
	})

	base, out = startServeLogged(t, t.TempDir(), "--log-level", "warn")
	// The second request is served on the same connection only after the
	// first one's handler, its log line included, has returned.
	client{t: t, base: base}.call("GET", "/healthz", nil, 200)
	client{t: t, base: base}.call("GET", "/healthz", nil, 200)
	if strings.Contains(out.String(), "msg=request") {
		t.Errorf("--log-level warn logged a request:\n%s", out.String())
	}

	for _, args := range [][]string{{"--log-format", "xml"}, {"--log-level", "loud"}} {
		code, _, stderr := runTurnledger(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, args...)...)
		if code != 2 || !strings.Contains(stderr, args[0]+" must be") {
			t.Errorf("serve %v = exit %d, stderr %q; want 2 naming %s", args, code, stderr, args[0])
		}
	}
}

func TestNonLoopbackAddressWarns(t *testing.T) {
	for addr, warns := range map[string]bool{
		"127.0.0.1:8000": false, "localhost:8000": false, "[::1]:8000": false,
		":8000": true, "0.0.0.0:8000": true, "192.0.2.7:8000": true,
	} {
		var b bytes.Buffer
		cliflag.WarnIfNotLoopback(slog.New(slog.NewTextHandler(&b, nil)), addr)
		if got := strings.Contains(b.String(), "level=WARN msg=\"listening beyond loopback"); got != warns {
			t.Errorf("cliflag.WarnIfNotLoopback(%q) logged %q, want a warning: %v", addr, b.String(), warns)
		}
	}
}

func TestServeHelpPointsToTheRouteReference(t *testing.T) {
	code, out, _ := runTurnledger(t, "serve", "--help")
	if code != 0 || !strings.Contains(out, "docs/api.md") || !strings.Contains(out, "-log-format") {
		t.Errorf("serve --help = exit %d:\n%s\nwant it to name docs/api.md and -log-format", code, out)
	}
	if _, err := os.Stat(filepath.Join("..", "..", "docs", "api.md")); err != nil {
		t.Errorf("serve --help names docs/api.md: %v", err)
	}
}

// TestRuntimeTakesTheLoggerFlags: the runtime's own lines follow
// --log-format and --log-level, like serve's.
func TestRuntimeTakesTheLoggerFlags(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runtime.db")
	_, stderr := rtStartLogs(t, []string{"--addr", "127.0.0.1:0", "--db", db, "--log-format", "json"}, nil)
	var first struct {
		Level string `json:"level"`
		Msg   string `json:"msg"`
	}
	line, _, _ := strings.Cut(stderr.String(), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil || first.Level != "WARN" || !strings.Contains(first.Msg, "APP_ENV is not set") {
		t.Errorf("runtime --log-format json first line = %q (%v), want a JSON WARN about APP_ENV", line, err)
	}
	_, stderr = rtStartLogs(t, []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "r.db"), "--log-level", "error"}, nil)
	if stderr.String() != "" {
		t.Errorf("runtime --log-level error logged %q, want nothing", stderr.String())
	}
}
