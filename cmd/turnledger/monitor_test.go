package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/checkfor"
)

// fakeEngine serves the engine's /readyz on loopback; ready says whether it
// answers 200 or 503. It stands in for `turnledger serve`, built in parallel.
func fakeEngine(t *testing.T, ready *atomic.Bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		status, word := 200, "ready"
		if !ready.Load() {
			status, word = 503, "not_ready"
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"status":%q,"backend":{"kind":"embedded","stream":"TURNLEDGER","ledger_head":7},"projections":{"applied_seq":7,"lag":0},"reaper":{"enabled":true,"interval":"5s"}}`, word)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeConfig(t *testing.T, engineURL string) string {
	t.Helper()
	cfg := fmt.Sprintf(`{
		"connections": [{"id": "engine", "kind": "turnledger", "url": %q, "admin_token_env": "TL_MONITOR_TEST_TOKEN"}],
		"queries": [{"id": "ready", "connection": "engine", "query": "ready", "interval": "1h", "check": {"kind": "query_fails"}}],
		"channels": [{"id": "log", "kind": "log"}]
	}`, engineURL)
	path := filepath.Join(t.TempDir(), "monitor.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startMonitor runs `turnledger monitor` on a free loopback port and
// returns its base URL and a function that stops it and returns its exit code.
func startMonitor(t *testing.T, args ...string) (string, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"monitor", "--addr", "127.0.0.1:0"}, args...), stdout, stderr)
	}()
	re := regexp.MustCompile(`monitor listening on (http://\S+)`)
	var base string
	checkfor.Until(t, 10*time.Second, "the listening line", func() bool {
		select {
		case code := <-done:
			t.Fatalf("monitor exited with %d: %s", code, stderr.String())
		default:
		}
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	var once sync.Once
	code := 0
	stop := func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("monitor did not stop")
			}
		})
		return code
	}
	t.Cleanup(func() { stop() })
	return base, stop
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %s is not JSON: %v", url, body, err)
	}
	return resp.StatusCode
}

func TestMonitorCommandServesAndKeepsStateAcrossRestarts(t *testing.T) {
	t.Setenv("TL_MONITOR_TEST_TOKEN", "token")
	var ready atomic.Bool
	config := writeConfig(t, fakeEngine(t, &ready))
	data := filepath.Join(t.TempDir(), "state", "monitor.db")

	base, stop := startMonitor(t, "--config", config, "--data", data)
	var health struct {
		Status    string `json:"status"`
		Queries   int    `json:"queries"`
		Scheduler string `json:"scheduler"`
	}
	if code := getJSON(t, base+"/api/health", &health); code != 200 || health.Status != "ok" || health.Queries != 1 {
		t.Fatalf("GET /api/health = %d %+v, want 200 ok with 1 query", code, health)
	}
	// The scheduler runs the never-run query at once; the engine is not
	// ready, so an error opens.
	type errorsBody struct {
		Errors []struct {
			ID      int    `json:"id"`
			QueryID string `json:"query_id"`
		} `json:"errors"`
	}
	var errs errorsBody
	checkfor.Until(t, 10*time.Second, "the scheduled run to open an error", func() bool {
		getJSON(t, base+"/api/errors", &errs)
		return len(errs.Errors) == 1
	})
	if code := stop(); code != 0 {
		t.Fatalf("monitor exit code = %d, want 0", code)
	}

	// After a restart the error is still there, and the schedule waits an
	// interval (1h) since the last scheduled run instead of running again.
	base, _ = startMonitor(t, "--config", config, "--data", data)
	var after errorsBody
	getJSON(t, base+"/api/errors", &after)
	if len(after.Errors) != 1 || after.Errors[0].ID != errs.Errors[0].ID {
		t.Errorf("errors after restart = %+v, want %+v", after.Errors, errs.Errors)
	}
	var next struct {
		QueryID   string  `json:"query_id"`
		InSeconds float64 `json:"in_seconds"`
	}
	getJSON(t, base+"/api/scheduler/next", &next)
	if next.QueryID != "ready" || next.InSeconds < 3000 {
		t.Errorf("next after restart = %+v, want ready in about an hour", next)
	}
}

func TestMonitorCommandRejectsBadStarts(t *testing.T) {
	var ready atomic.Bool
	config := writeConfig(t, fakeEngine(t, &ready))
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"queries": [{"id": "q", "connection": "nope", "query": "x", "interval": "1s", "check": {"kind": "query_fails"}}], "extra": 1}`), 0o600)
	for _, tc := range []struct {
		name     string
		args     []string
		env      bool
		wantCode int
		wantErr  string
	}{
		{"built-in config, projects without a token", []string{"--projects", "p", "--engine-data", t.TempDir()}, true, 1, "needs the engine's admin token"},
		{"unknown flag", []string{"--nope"}, true, 2, "flag provided but not defined"},
		{"missing file", []string{"--config", filepath.Join(t.TempDir(), "none.json")}, true, 1, "no such file"},
		{"unknown field", []string{"--config", bad}, true, 1, `unknown field "extra"`},
		{"unset secret variable", []string{"--config", config}, false, 1, "TL_MONITOR_TEST_TOKEN is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TURNLEDGER_ADMIN_TOKEN", "")
			if tc.env {
				t.Setenv("TL_MONITOR_TEST_TOKEN", "token")
			} else {
				t.Setenv("TL_MONITOR_TEST_TOKEN", "") // restored after the test
				os.Unsetenv("TL_MONITOR_TEST_TOKEN")
			}
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), append([]string{"monitor", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "m.db")}, tc.args...), &stdout, &stderr)
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("monitor %v = %d, stderr %q; want %d mentioning %q", tc.args, code, stderr.String(), tc.wantCode, tc.wantErr)
			}
		})
	}
}

func TestMonitorHelpPrintsFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"monitor", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("monitor --help = %d, want 0", code)
	}
	for _, flag := range []string{"-config", "-addr", "-data", "-no-scheduler", "127.0.0.1:5000"} {
		if !strings.Contains(stdout.String(), flag) {
			t.Errorf("monitor --help does not mention %s:\n%s", flag, stdout.String())
		}
	}
}
