package monitor

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// t0 is the tests' starting instant.
var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// clock is an injected clock; its Sleep advances time instead of waiting
// and remembers what it was asked.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testConfig is a Config on the clock c with a data file in a temp dir and
// a JSON logger writing to log.
func testConfig(t *testing.T, c *clock, log io.Writer) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataPath = filepath.Join(t.TempDir(), "monitor.db")
	cfg.Now = c.Now
	cfg.Sleep = c.Sleep
	if log == nil {
		log = io.Discard
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(log, nil))
	return cfg
}

func open(t *testing.T, cfg Config) *Monitor {
	t.Helper()
	m, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open = %v, want nil", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// serve starts the monitor's API on a loopback test server.
func serve(t *testing.T, m *Monitor) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// call sends a request and decodes the JSON answer into out (if not nil).
// It fails the test if the answer is not JSON.
func call(t *testing.T, srv *httptest.Server, method, path, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatalf("NewRequest(%s %s): %v", method, path, err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type = %q, want application/json (body %s)", method, path, ct, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: body %s is not the expected JSON: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

// raw sends a request and returns status and body.
func raw(t *testing.T, srv *httptest.Server, method, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// wantError checks a {error, message} answer.
func wantError(t *testing.T, srv *httptest.Server, method, path, body string, status int, name string) {
	t.Helper()
	var eb errorBody
	if got := call(t, srv, method, path, body, &eb); got != status || eb.Error != name || eb.Message == "" {
		t.Errorf("%s %s = %d %+v, want %d with error %s and a message", method, path, got, eb, status, name)
	}
}

func ptr[T any](v T) *T { return &v }

// engine stands in for a turnledger engine's public HTTP API: /readyz and
// the Turn projection of each project, behind an admin token.
type engine struct {
	mu     sync.Mutex
	token  string
	status int
	ready  string
	turns  map[string][]map[string]any // project -> turn snapshots
	agents map[string][]string         // project -> registered agent ids
	srv    *httptest.Server
}

func newEngine(t *testing.T, token string) *engine {
	t.Helper()
	e := &engine{token: token, status: 200, ready: `{"status":"ready","backend":{"kind":"embedded","stream":"TURNLEDGER","ledger_head":123},"projections":{"applied_seq":120,"lag":3},"reaper":{"enabled":true,"interval":"5s"}}`, turns: map[string][]map[string]any{}, agents: map[string][]string{"alpha": {"a1"}}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.status)
		io.WriteString(w, e.ready)
	})
	mux.HandleFunc("GET /v3r1/projects/{project}/projection/turns", func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+e.token {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":"Unauthenticated","message":"admin token required"}`)
			return
		}
		q := r.URL.Query()
		limit, err := strconv.Atoi(q.Get("limit"))
		if err != nil || limit < 1 {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"ValidationError","message":"limit must be a positive integer"}`)
			return
		}
		// Like the engine: Turns in dispatch order (here, the i-th Turn has
		// dispatch seq i+1), after the after_ledger_seq cursor, limit at a time.
		after, _ := strconv.Atoi(q.Get("after_ledger_seq"))
		items := []map[string]any{}
		next, more := after, false
		for i, turn := range e.turns[r.PathValue("project")] {
			if i+1 <= after {
				continue
			}
			if len(items) == limit {
				more = true
				break
			}
			next = i + 1
			if s := q.Get("state"); s != "" && turn["state"] != s {
				continue
			}
			if q.Get("stop_requested_only") == "true" && turn["stop_requested"] != true {
				continue
			}
			items = append(items, turn)
		}
		json.NewEncoder(w).Encode(map[string]any{"project_id": r.PathValue("project"), "items": items, "limit": limit, "diagnostics": []any{},
			"next_after_ledger_seq": next, "has_more": more})
	})
	mux.HandleFunc("GET /v3r1/projects/{project}/projection/agents", func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+e.token {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":"Unauthenticated","message":"admin token required"}`)
			return
		}
		items := []map[string]any{}
		for _, a := range e.agents[r.PathValue("project")] {
			items = append(items, map[string]any{"agent_id": a})
		}
		json.NewEncoder(w).Encode(map[string]any{"project_id": r.PathValue("project"), "items": items, "limit": 1, "diagnostics": []any{}})
	})
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *engine) set(f func(e *engine)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e)
}

// receiver is a webhook receiver on loopback that answers with the given
// statuses in turn (then 200) and keeps what it got.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	got      []received
	srv      *httptest.Server
}

type received struct {
	Header http.Header
	Body   []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	t.Helper()
	rc := &receiver{statuses: statuses}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.got = append(rc.got, received{r.Header.Clone(), body})
		status := 200
		if len(rc.statuses) > 0 {
			status, rc.statuses = rc.statuses[0], rc.statuses[1:]
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) received() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// notifications decodes the bodies received.
func (rc *receiver) notifications(t *testing.T) []Notification {
	t.Helper()
	var out []Notification
	for _, r := range rc.received() {
		var n Notification
		if err := json.Unmarshal(r.Body, &n); err != nil {
			t.Fatalf("webhook body %s is not a notification: %v", r.Body, err)
		}
		out = append(out, n)
	}
	return out
}

func cfgLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("Atoi(%q) = %v", s, err)
	}
	return n
}
