package main

// These tests prove the monitor's turnledger connection kind against the
// real engine: a whole `turnledger serve` (embedded or external NATS, the
// ledger, the projections, the HTTP API) driven over HTTP, watched by a
// whole `turnledger monitor` that is asked through its own HTTP API.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/ledger"
)

// e2eTokenEnv is the variable the monitor configurations of these tests
// name for the engine's admin token.
const e2eTokenEnv = "TL_E2E_ENGINE_ADMIN_TOKEN"

// startEngine runs the whole binary's `turnledger serve` on addr with the
// data directory dir and the extra flags, and returns its base URL and a
// stop function that waits for it to exit and returns its exit status. The
// admin token is the one serve keeps in dir/admin-token.
func startEngine(t *testing.T, dir, addr string, args ...string) (string, func() int) {
	t.Helper()
	t.Setenv("TURNLEDGER_ADMIN_TOKEN", "") // serve makes (or reads) dir/admin-token
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"serve", "--addr", addr, "--data", dir}, args...), out, out)
	}()
	var base string
	checkfor.Until(t, 10*time.Second, "serve to start", func() bool {
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve exited with %d before serving:\n%s", code, out.String())
		default:
		}
		if m := servingOn.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	stopped, code := false, 0
	stop := func() int {
		if !stopped {
			stopped = true
			cancel()
			code = <-done
			if code != 0 {
				t.Logf("serve exited with %d:\n%s", code, out.String())
			}
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return base, stop
}

// engineAdminToken reads the admin token serve keeps in dir.
func engineAdminToken(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatalf("read the engine's admin token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// e2eQuery is one monitored query of a test configuration.
type e2eQuery struct {
	ID         string         `json:"id"`
	Connection string         `json:"connection"`
	Query      string         `json:"query"`
	Interval   string         `json:"interval"`
	Check      map[string]any `json:"check"`
}

func e2eQ(id, check string, ck map[string]any) e2eQuery {
	return e2eQuery{ID: id, Connection: "engine", Query: check, Interval: "1h", Check: ck}
}

// startEngineMonitor writes a configuration with one turnledger connection
// "engine" to engineURL (token from e2eTokenEnv, watching projects), any
// extra connections, the queries and a log channel, and runs `turnledger
// monitor --no-scheduler` on it: queries run only when the test asks.
func startEngineMonitor(t *testing.T, engineURL string, projects []string, extra []map[string]any, queries ...e2eQuery) monitorAPI {
	t.Helper()
	return startEngineMonitorFlags(t, []string{"--no-scheduler"}, engineURL, projects, extra, queries...)
}

// startEngineMonitorFlags is startEngineMonitor with the monitor's flags
// (beyond --config and --data) given.
func startEngineMonitorFlags(t *testing.T, flags []string, engineURL string, projects []string, extra []map[string]any, queries ...e2eQuery) monitorAPI {
	t.Helper()
	conns := append([]map[string]any{{"id": "engine", "kind": "turnledger", "url": engineURL, "admin_token_env": e2eTokenEnv, "projects": projects}}, extra...)
	b, err := json.MarshalIndent(map[string]any{
		"connections": conns,
		"queries":     queries,
		"channels":    []map[string]any{{"id": "log", "kind": "log"}},
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "monitor.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := startMonitor(t, append([]string{"--config", path, "--data", filepath.Join(dir, "monitor.db")}, flags...)...)
	return monitorAPI{t: t, base: base}
}

// monitorAPI asks a running monitor over HTTP.
type monitorAPI struct {
	t    *testing.T
	base string
}

type e2eRun struct {
	Passed      bool   `json:"passed"`
	Reason      string `json:"reason"`
	RowCount    int    `json:"row_count"`
	ErrorID     uint64 `json:"error_id"`
	ErrorOpened bool   `json:"error_opened"`
}

type e2eError struct {
	ID           uint64     `json:"id"`
	QueryID      string     `json:"query_id"`
	Status       string     `json:"status"`
	Reason       string     `json:"reason"`
	FirstReason  string     `json:"first_reason"`
	Count        int        `json:"count"`
	LastPassedAt *time.Time `json:"last_passed_at"`
	ResolvedAt   *time.Time `json:"resolved_at"`
	Note         string     `json:"note"`
}

type e2eRunAnswer struct {
	Run    e2eRun `json:"run"`
	Result struct {
		Columns  []string         `json:"columns"`
		Rows     []map[string]any `json:"rows"`
		RowCount int              `json:"row_count"`
	} `json:"result"`
	Error *e2eError `json:"error"`
}

func (m monitorAPI) do(method, path string, body any, want int, out any) {
	m.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, m.base+path, rd)
	if err != nil {
		m.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		m.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		m.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			m.t.Fatalf("%s %s: %s is not the expected JSON: %v", method, path, data, err)
		}
	}
}

// run runs a query at once through POST /api/queries/{id}/run.
func (m monitorAPI) run(id string) e2eRunAnswer {
	m.t.Helper()
	var a e2eRunAnswer
	m.do("POST", "/api/queries/"+id+"/run", nil, 200, &a)
	return a
}

// errors lists the monitor's errors; query is the query string of
// GET /api/errors ("" for the default, the active ones).
func (m monitorAPI) errors(query string) []e2eError {
	m.t.Helper()
	var b struct {
		Errors []e2eError `json:"errors"`
	}
	m.do("GET", "/api/errors?"+query, nil, 200, &b)
	return b.Errors
}

// mustFail runs a query, wants it to fail with a reason containing reason,
// and returns the error it opened or counted on.
func (m monitorAPI) mustFail(id, reason string) e2eRunAnswer {
	m.t.Helper()
	a := m.run(id)
	if a.Run.Passed || !strings.Contains(a.Run.Reason, reason) || a.Error == nil || a.Error.QueryID != id || a.Error.Status != "active" {
		m.t.Fatalf("run %s = %+v with error %+v, want a failure mentioning %q with an active error", id, a.Run, a.Error, reason)
	}
	return a
}

// mustPass runs a query and wants it to pass. The answer's error is the
// query's active error, if it has one, with last_passed_at just set.
func (m monitorAPI) mustPass(id string) e2eRunAnswer {
	m.t.Helper()
	a := m.run(id)
	if !a.Run.Passed || a.Run.ErrorID != 0 || (a.Error != nil && (a.Error.Status != "active" || a.Error.LastPassedAt == nil)) {
		m.t.Fatalf("run %s = %+v with error %+v, want passed, touching no error or marking the active one passed", id, a.Run, a.Error)
	}
	return a
}

// mustPassClean runs a query and wants it to pass with no active error.
func (m monitorAPI) mustPassClean(id string) e2eRunAnswer {
	m.t.Helper()
	a := m.mustPass(id)
	if a.Error != nil {
		m.t.Fatalf("run %s: error = %+v, want none", id, a.Error)
	}
	return a
}

// activeError returns the one active error of a query, failing when there
// is none or more than one.
func (m monitorAPI) activeError(id string) e2eError {
	m.t.Helper()
	errs := m.errors("status=active&query_id=" + id)
	if len(errs) != 1 {
		m.t.Fatalf("active errors of %s = %+v, want exactly one", id, errs)
	}
	return errs[0]
}

// engineReadyz reads the engine's /readyz and its status code.
func engineReadyz(t *testing.T, base string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	var r map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	return resp.StatusCode, r
}

func readyzField(r map[string]any, group, field string) any {
	g, _ := r[group].(map[string]any)
	return g[field]
}

// dispatchTurn dispatches one summarize Turn from req to worker in p1 and
// returns its id.
func dispatchTurn(t *testing.T, req client, worker, key string) string {
	t.Helper()
	var tv struct {
		TurnID string `json:"turn_id"`
	}
	json.Unmarshal(req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
		"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", worker), "input": map[string]any{"k": key},
		"turn_kind": "summarize", "dispatch_key": key, "authority": map[string]any{"mode": "root_request", "request_id": key},
	}, 200), &tv)
	if tv.TurnID == "" {
		t.Fatalf("dispatch %s returned no turn_id", key)
	}
	return tv.TurnID
}

// claimTurn claims the next Turn offered to worker in p1 and returns the
// claim token (as the engine answers it).
func claimTurn(t *testing.T, w client, worker string) map[string]any {
	t.Helper()
	var c struct {
		Claim map[string]any `json:"claim"`
	}
	json.Unmarshal(w.call("POST", "/v3r1/projects/p1/agents/"+worker+"/claims:claim", map[string]any{"agent": agentRef("p1", worker)}, 200), &c)
	if c.Claim == nil {
		t.Fatalf("%s claimed nothing", worker)
	}
	return c.Claim
}

// TestMonitorWatchesRealEngineHealth runs `ready`, `ledger_head` and
// `projection_lag` against a real engine: on an empty ledger, after work
// moves its head, while the engine is down, and after it comes back on the
// same address; and tests the connection with a right and a wrong token.
func TestMonitorWatchesRealEngineHealth(t *testing.T) {
	dir := t.TempDir()
	base, stop := startEngine(t, dir, "127.0.0.1:0")
	t.Setenv(e2eTokenEnv, engineAdminToken(t, dir))
	t.Setenv("TL_E2E_WRONG_TOKEN", "tladm_not-the-token")
	mon := startEngineMonitor(t, base, []string{"p1", "p-misspelt"},
		[]map[string]any{{"id": "engine-wrong-token", "kind": "turnledger", "url": base, "admin_token_env": "TL_E2E_WRONG_TOKEN", "projects": []string{"p1"}}},
		e2eQ("ready", "ready", map[string]any{"kind": "query_fails"}),
		e2eQ("head", "ledger_head", map[string]any{"kind": "value_range", "column": "ledger_head", "min": 1}),
		e2eQ("lag", "projection_lag", map[string]any{"kind": "value_range", "column": "lag", "max": 0}),
		e2eQuery{ID: "wrong-token", Connection: "engine-wrong-token", Query: "expired_claims", Interval: "1h", Check: map[string]any{"kind": "query_fails"}},
	)

	// A fresh engine is ready with an empty ledger: the head check fails.
	a := mon.mustPassClean("ready")
	want := []map[string]any{{"status": "ready", "backend": "embedded", "stream": "TURNLEDGER", "ledger_head": 0.0, "applied_seq": 0.0, "lag": 0.0, "reaper_enabled": true}}
	if diff := cmp.Diff(want, a.Result.Rows); diff != "" {
		t.Errorf("run ready on a fresh engine: rows (-want +got):\n%s", diff)
	}
	headErr := mon.mustFail("head", "ledger_head = 0 is below the minimum 1")
	if !headErr.Run.ErrorOpened || headErr.Error.Count != 1 {
		t.Errorf("run head on an empty ledger = %+v with error %+v, want an error opened with count 1", headErr.Run, headErr.Error)
	}
	mon.mustPassClean("lag")

	// Work on the engine moves the ledger head; the projections keep up.
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch")
	agentClient(t, admin, "p1", "worker", 1)
	dispatchTurn(t, req, "worker", "k1")
	// A command is answered once its batch is folded, and may be before
	// the batch's commit, which the lag counts: wait for the commit.
	var rz map[string]any
	checkfor.Until(t, 10*time.Second, "the projections to commit the dispatch", func() bool {
		_, rz = engineReadyz(t, base)
		return readyzField(rz, "projections", "lag") == 0.0
	})
	head := readyzField(rz, "backend", "ledger_head").(float64)
	if head < 3 {
		t.Fatalf("engine ledger_head after registering two agents and dispatching = %v, want at least 3", head)
	}
	a = mon.mustPass("head")
	if diff := cmp.Diff([]map[string]any{{"stream": "TURNLEDGER", "backend": "embedded", "ledger_head": head}}, a.Result.Rows); diff != "" {
		t.Errorf("run head after work: rows (-want +got):\n%s", diff)
	}
	if a.Error == nil || a.Error.ID != headErr.Error.ID {
		t.Errorf("run head after work: error = %+v, want the still active error %d", a.Error, headErr.Error.ID)
	}
	a = mon.mustPassClean("lag")
	if diff := cmp.Diff([]map[string]any{{"ledger_head": head, "applied_seq": head, "lag": 0.0}}, a.Result.Rows); diff != "" {
		t.Errorf("run lag after work: rows (-want +got):\n%s", diff)
	}
	// A passing run does not resolve the head error; it notes the pass.
	if e := mon.activeError("head"); e.ID != headErr.Error.ID || e.Count != 1 || e.LastPassedAt == nil {
		t.Errorf("head error after a passing run = %+v, want error %d still active, count 1, last_passed_at set", e, headErr.Error.ID)
	}
	var resolved e2eError
	mon.do("POST", fmt.Sprintf("/api/errors/%d/resolve", headErr.Error.ID), map[string]any{"note": "the engine got work"}, 200, &resolved)
	if resolved.Status != "resolved" || resolved.ResolvedAt == nil || resolved.Note != "the engine got work" {
		t.Errorf("resolve head error = %+v, want resolved with the note", resolved)
	}
	mon.do("POST", fmt.Sprintf("/api/errors/%d/resolve", headErr.Error.ID), nil, 409, nil)
	mon.do("POST", "/api/errors/999/resolve", nil, 404, nil)

	// The admin bearer is proved against the engine on every project: the
	// right token reads, a wrong one gets the engine's 401. A project the
	// engine has never seen reads as empty, so it is named.
	var ct struct {
		OK      bool           `json:"ok"`
		Error   string         `json:"error"`
		Details map[string]any `json:"details"`
	}
	mon.do("POST", "/api/connections/engine/test", nil, 200, &ct)
	if !ct.OK || ct.Details["ledger_head"] != head || ct.Details["status"] != "ready" {
		t.Errorf("test connection engine = %+v, want ok, ready, ledger_head %v", ct, head)
	}
	if diff := cmp.Diff([]any{"p-misspelt"}, ct.Details["projects_without_agents"]); diff != "" {
		t.Errorf("test connection engine: projects_without_agents (-want +got):\n%s", diff)
	}
	ct.Details = nil
	mon.do("POST", "/api/connections/engine-wrong-token/test", nil, 200, &ct)
	if ct.OK || !strings.Contains(ct.Error, "status 401") {
		t.Errorf("test connection engine-wrong-token = %+v, want not ok with status 401", ct)
	}
	mon.mustFail("wrong-token", "status 401")

	// The engine stops: every check fails, the same error counts on.
	addr := strings.TrimPrefix(base, "http://")
	if code := stop(); code != 0 {
		t.Fatalf("serve exited with %d", code)
	}
	down := mon.mustFail("ready", "query failed: GET /readyz")
	if !down.Run.ErrorOpened || down.Error.Count != 1 {
		t.Errorf("run ready on a stopped engine = %+v with error %+v, want an error opened with count 1", down.Run, down.Error)
	}
	again := mon.mustFail("ready", "query failed: GET /readyz")
	if again.Run.ErrorOpened || again.Error.ID != down.Error.ID || again.Error.Count != 2 {
		t.Errorf("second run ready on a stopped engine = %+v with error %+v, want error %d counted to 2", again.Run, again.Error, down.Error.ID)
	}
	// The head error was resolved, so this failure opens a new one.
	headDown := mon.mustFail("head", "query failed")
	if !headDown.Run.ErrorOpened || headDown.Error.ID == headErr.Error.ID {
		t.Errorf("run head on a stopped engine = %+v with error %+v, want a new error (not %d)", headDown.Run, headDown.Error, headErr.Error.ID)
	}
	mon.mustFail("lag", "query failed")
	mon.do("POST", "/api/connections/engine/test", nil, 200, &ct)
	if ct.OK || ct.Error == "" {
		t.Errorf("test connection to a stopped engine = %+v, want not ok with an error", ct)
	}

	// The engine comes back on the same address with the same ledger.
	base2, _ := startEngine(t, dir, addr)
	if base2 != base {
		t.Fatalf("engine restarted on %s, want %s", base2, base)
	}
	mon.mustPass("ready")
	a = mon.mustPass("head")
	if got := a.Result.Rows[0]["ledger_head"]; got != head {
		t.Errorf("ledger_head after the restart = %v, want %v", got, head)
	}
	active := mon.errors("")
	byQuery := map[string]e2eError{}
	for _, e := range active {
		byQuery[e.QueryID] = e
	}
	if e := byQuery["ready"]; e.ID != down.Error.ID || e.Count != 2 || e.LastPassedAt == nil {
		t.Errorf("ready error after the engine came back = %+v, want error %d active, count 2, last_passed_at set", e, down.Error.ID)
	}
	if len(active) != 4 { // ready, head, lag, wrong-token
		t.Errorf("active errors = %+v, want 4", active)
	}
	all := mon.errors("status=all&query_id=head")
	if len(all) != 2 || all[0].Status != "active" || all[1].Status != "resolved" {
		t.Errorf("errors of head = %+v, want one active (newest first) and one resolved", all)
	}
}

// TestMonitorSeesAStuckProjector runs the engine on an external NATS server
// and puts a message the engine cannot decode on its ledger stream: the
// projector stops at it, /readyz answers 503, and the monitor's `ready` and
// `projection_lag` fail while `ledger_head` and the Turn checks still read.
// Then the NATS server goes away.
func TestMonitorSeesAStuckProjector(t *testing.T) {
	ecfg := ledger.DefaultEmbeddedConfig(t.TempDir())
	ecfg.Port = -1
	natsSrv, err := ledger.StartEmbedded(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsSrv.Close() })

	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--nats-url", natsSrv.ClientURL())
	t.Setenv(e2eTokenEnv, engineAdminToken(t, dir))
	mon := startEngineMonitor(t, base, []string{"p1"}, nil,
		e2eQ("ready", "ready", map[string]any{"kind": "query_fails"}),
		e2eQ("head", "ledger_head", map[string]any{"kind": "value_range", "column": "ledger_head", "min": 1}),
		e2eQ("lag", "projection_lag", map[string]any{"kind": "value_range", "column": "lag", "max": 0}),
		e2eQ("stops", "unserved_stop_requests", map[string]any{"kind": "row_count", "op": ">", "value": 0}),
	)
	admin := adminClient(t, base, dir)
	agentClient(t, admin, "p1", "req", 1, "turns:dispatch")
	a := mon.mustPassClean("ready")
	if a.Result.Rows[0]["backend"] != "external" {
		t.Errorf("run ready: backend = %v, want external", a.Result.Rows[0]["backend"])
	}
	for _, id := range []string{"head", "lag", "stops"} {
		mon.mustPassClean(id)
	}

	// Something other than the engine writes a message it cannot decode.
	nc, err := nats.Connect(natsSrv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(t.Context(), "tl.other.turn.t_corrupt", []byte("not an event"))
	if err != nil {
		t.Fatalf("publish to the ledger stream: %v", err)
	}
	checkfor.Until(t, 10*time.Second, "the engine to report the projector failing", func() bool {
		code, _ := engineReadyz(t, base)
		return code == http.StatusServiceUnavailable
	})

	notReady := mon.mustFail("ready", fmt.Sprintf(`engine is not ready: status "not_ready" (projector failing: ledger: event at ledger_seq %d: `, ack.Sequence))
	if !notReady.Run.ErrorOpened {
		t.Errorf("run ready on a stuck projector = %+v, want an error opened", notReady.Run)
	}
	lag := mon.mustFail("lag", "lag = 1 is above the maximum 0")
	if diff := cmp.Diff([]map[string]any{{"ledger_head": float64(ack.Sequence), "applied_seq": float64(ack.Sequence - 1), "lag": 1.0}}, lag.Result.Rows); diff != "" {
		t.Errorf("run lag on a stuck projector: rows (-want +got):\n%s", diff)
	}
	// The head is read from the 503 answer; the Turn projection still answers.
	a = mon.mustPassClean("head")
	if got := a.Result.Rows[0]["ledger_head"]; got != float64(ack.Sequence) {
		t.Errorf("run head on a stuck projector: ledger_head = %v, want %d", got, ack.Sequence)
	}
	mon.mustPassClean("stops")
	if errs := mon.errors(""); len(errs) != 2 {
		t.Errorf("active errors = %+v, want ready and lag", errs)
	}

	// The NATS server goes away: the engine cannot read the ledger head
	// (its /readyz answers once its NATS request times out, about 5 s), and
	// the ready check quotes that too, counting on the same error.
	nc.Close()
	natsSrv.Close()
	gone := mon.mustFail("ready", `engine is not ready: status "not_ready" (ledger head: ledger: stream info: `)
	if gone.Error.ID != notReady.Error.ID || gone.Error.Count != 2 {
		t.Errorf("run ready without NATS: error = %+v, want error %d counted to 2", gone.Error, notReady.Error.ID)
	}
}

// TestMonitorFindsExpiredClaims runs `expired_claims` against an engine
// whose claims last 2 s and whose reaper is off: a held claim passes, an
// expired one opens an error that counts repeat failures, releasing the claim
// makes the check pass, and the next expiry opens a new error.
func TestMonitorFindsExpiredClaims(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--claim-ttl", "2s", "--reap-interval", "0")
	t.Setenv(e2eTokenEnv, engineAdminToken(t, dir))
	mon := startEngineMonitor(t, base, []string{"p1", "p2"}, nil,
		e2eQ("expired", "expired_claims", map[string]any{"kind": "row_count", "op": ">", "value": 0}))
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch")
	w := agentClient(t, admin, "p1", "worker", 1)

	mon.mustPassClean("expired") // no Turns yet; p2 does not exist yet either
	turn := dispatchTurn(t, req, "worker", "k1")
	mon.mustPassClean("expired") // queued, not claimed
	claim := claimTurn(t, w, "worker")
	if claim["turn_id"] != turn {
		t.Fatalf("claimed %v, want %s", claim["turn_id"], turn)
	}
	a := mon.mustPassClean("expired") // claimed, the claim runs for 2 s
	if a.Result.RowCount != 0 {
		t.Errorf("run expired on a live claim: row_count = %d, want 0", a.Result.RowCount)
	}

	// Wait for the claim to expire; the reaper is off, so the Turn stays
	// claimed. Passing runs leave no error behind, so the first failure opens
	// one with count 1.
	checkfor.Until(t, 10*time.Second, "the monitor to see the claim expired", func() bool { return !mon.run("expired").Run.Passed })
	first := mon.activeError("expired")
	if first.Count != 1 || first.Reason != "row count 1 > 0" {
		t.Errorf("expired error = %+v, want count 1 with reason %q", first, "row count 1 > 0")
	}
	a = mon.mustFail("expired", "row count 1 > 0")
	if a.Run.ErrorOpened || a.Error.ID != first.ID || a.Error.Count != 2 {
		t.Errorf("second failing run = %+v with error %+v, want error %d counted to 2", a.Run, a.Error, first.ID)
	}
	expires, err := time.Parse(time.RFC3339Nano, fmt.Sprint(claim["expires_at"]))
	if err != nil {
		t.Fatalf("claim expires_at %v: %v", claim["expires_at"], err)
	}
	row := a.Result.Rows[0]
	if secs, _ := row["expired_seconds"].(float64); secs <= 0 {
		t.Errorf("expired_seconds = %v, want above 0", row["expired_seconds"])
	}
	delete(row, "expired_seconds")
	wantRow := map[string]any{"project_id": "p1", "turn_id": turn, "agent_id": "worker", "expires_at": expires.UTC().Format(time.RFC3339Nano)}
	if diff := cmp.Diff(wantRow, row); diff != "" {
		t.Errorf("expired row (-want +got):\n%s", diff)
	}

	// Releasing the expired claim (what the reaper does) requeues the Turn:
	// the check passes, the error stays active until resolved.
	var rec struct {
		Released []string `json:"released_turn_ids"`
	}
	json.Unmarshal(admin.call("POST", "/v3r1/projects/p1/claims:reconcile-expired", map[string]any{}, 200), &rec)
	if diff := cmp.Diff([]string{turn}, rec.Released); diff != "" {
		t.Fatalf("reconcile-expired released (-want +got):\n%s", diff)
	}
	if a := mon.mustPass("expired"); a.Error == nil || a.Error.ID != first.ID {
		t.Errorf("run expired after the release: error = %+v, want the still active error %d", a.Error, first.ID)
	}
	if e := mon.activeError("expired"); e.ID != first.ID || e.Count != 2 || e.LastPassedAt == nil {
		t.Errorf("expired error after a passing run = %+v, want error %d, count 2, last_passed_at set", e, first.ID)
	}
	mon.do("POST", fmt.Sprintf("/api/errors/%d/resolve", first.ID), nil, 200, nil)
	if errs := mon.errors(""); len(errs) != 0 {
		t.Errorf("active errors after resolving = %+v, want none", errs)
	}

	// The Turn is claimed again and that claim expires too: a new error.
	claimTurn(t, w, "worker")
	checkfor.Until(t, 10*time.Second, "the monitor to see the second claim expired", func() bool { return !mon.run("expired").Run.Passed })
	second := mon.activeError("expired")
	if second.ID == first.ID || second.Count != 1 {
		t.Errorf("error after the second expiry = %+v, want a new error (not %d) with count 1", second, first.ID)
	}
	all := mon.errors("status=all")
	if len(all) != 2 || all[0].ID != second.ID || all[1].ID != first.ID || all[1].Status != "resolved" {
		t.Errorf("all errors = %+v, want %d active then %d resolved", all, second.ID, first.ID)
	}
}

// TestMonitorFindsUnservedStopRequests runs `unserved_stop_requests`
// against a real engine: stopping a queued Turn finishes it at once (nothing
// to serve), stopping a claimed one leaves a stop request that fails the
// check until its holder finishes the Turn.
func TestMonitorFindsUnservedStopRequests(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--reap-interval", "0")
	t.Setenv(e2eTokenEnv, engineAdminToken(t, dir))
	mon := startEngineMonitor(t, base, []string{"p1"}, nil,
		e2eQ("stops", "unserved_stop_requests", map[string]any{"kind": "row_count", "op": ">", "value": 0}),
		e2eQ("old_stops", "unserved_stop_requests older_than=1h", map[string]any{"kind": "row_count", "op": ">", "value": 0}))
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch")
	w := agentClient(t, admin, "p1", "worker", 1)

	held := dispatchTurn(t, req, "worker", "held")
	queued := dispatchTurn(t, req, "worker", "queued")
	claim := claimTurn(t, w, "worker")
	if claim["turn_id"] != held {
		t.Fatalf("claimed %v, want %s", claim["turn_id"], held)
	}
	mon.mustPassClean("stops")

	stopTurn := func(id string) {
		t.Helper()
		req.call("POST", "/v3r1/projects/p1/management/turns/"+id+":stop", map[string]any{"requested_by": agentRef("p1", "req")}, 200)
	}
	stopTurn(queued)
	mon.mustPassClean("stops") // a queued Turn is stopped at once

	stopTurn(held)
	a := mon.mustFail("stops", "row count 1 > 0")
	if !a.Run.ErrorOpened || a.Error.Count != 1 {
		t.Errorf("run stops = %+v with error %+v, want an error opened with count 1", a.Run, a.Error)
	}
	var tv struct {
		StopRequestedAt time.Time `json:"stop_requested_at"`
	}
	json.Unmarshal(admin.call("GET", "/v3r1/projects/p1/turns/"+held, nil, 200), &tv)
	row := a.Result.Rows[0]
	if pending, ok := row["pending_seconds"].(float64); !ok || pending < 0 {
		t.Errorf("run stops: pending_seconds = %v, want a non-negative number", row["pending_seconds"])
	}
	delete(row, "pending_seconds")
	want := map[string]any{"project_id": "p1", "turn_id": held, "state": "claimed", "agent_id": "worker",
		"stop_requested_at": tv.StopRequestedAt.UTC().Format(time.RFC3339Nano)}
	if diff := cmp.Diff([]map[string]any{want}, a.Result.Rows); diff != "" {
		t.Errorf("run stops: rows (-want +got):\n%s", diff)
	}
	// A stop asked a moment ago is not yet older than an hour.
	mon.mustPassClean("old_stops")
	// The holder may not suspend the Turn instead of finishing it, so a
	// stop request stays on a claimed Turn until the Turn finishes.
	w.call("POST", "/v3r1/projects/p1/turns/"+held+":suspend", map[string]any{"claim": claim}, 409)
	again := mon.mustFail("stops", "row count 1 > 0")
	if again.Error.ID != a.Error.ID || again.Error.Count != 2 || again.Result.Rows[0]["state"] != "claimed" {
		t.Errorf("second run stops = %+v with error %+v, want the claimed Turn again and error %d counted to 2", again.Result.Rows, again.Error, a.Error.ID)
	}

	// The holder serves the stop by finishing the Turn.
	w.call("POST", "/v3r1/projects/p1/turns/"+held+":finish", map[string]any{"claim": claim, "outcome": "failed", "final_payload": nil, "final_record_role": ""}, 200)
	if p := mon.mustPass("stops"); p.Error == nil || p.Error.ID != a.Error.ID {
		t.Errorf("run stops after the stop was served: error = %+v, want the still active error %d", p.Error, a.Error.ID)
	}
	e := mon.activeError("stops")
	if e.ID != a.Error.ID || e.Count != 2 || e.LastPassedAt == nil || e.FirstReason != "row count 1 > 0" {
		t.Errorf("stops error after the stop was served = %+v, want error %d, count 2, last_passed_at set", e, a.Error.ID)
	}
	var resolved e2eError
	mon.do("POST", fmt.Sprintf("/api/errors/%d/resolve", e.ID), nil, 200, &resolved)
	if resolved.Status != "resolved" {
		t.Errorf("resolve = %+v, want resolved", resolved)
	}
	mon.do("POST", fmt.Sprintf("/api/errors/%d/resolve", e.ID), nil, 409, nil)
	if errs := mon.errors(""); len(errs) != 0 {
		t.Errorf("active errors after resolving = %+v, want none", errs)
	}
}

// TestMonitorSchedulerWatchesARealEngine runs the monitor with its
// scheduler on: with nobody running queries by hand, a stop request left
// unserved on the engine opens an error by itself, and repeat scheduled
// failures count on it.
func TestMonitorSchedulerWatchesARealEngine(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0")
	t.Setenv(e2eTokenEnv, engineAdminToken(t, dir))
	q := e2eQ("stops", "unserved_stop_requests", map[string]any{"kind": "row_count", "op": ">", "value": 0})
	q.Interval = "1s"
	mon := startEngineMonitorFlags(t, nil, base, []string{"p1"}, nil, q)
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch")
	w := agentClient(t, admin, "p1", "worker", 1)
	turn := dispatchTurn(t, req, "worker", "k1")
	claimTurn(t, w, "worker")
	req.call("POST", "/v3r1/projects/p1/management/turns/"+turn+":stop", map[string]any{"requested_by": agentRef("p1", "req")}, 200)

	var got e2eError
	checkfor.Until(t, 10*time.Second, "a scheduled run to open an error and count a second failure", func() bool {
		errs := mon.errors("query_id=stops")
		if len(errs) == 1 {
			got = errs[0]
		}
		return got.Count >= 2
	})
	if got.Reason != "row count 1 > 0" || got.Status != "active" {
		t.Errorf("scheduled error = %+v, want active with reason %q", got, "row count 1 > 0")
	}
	var detail struct {
		RecentRuns []struct {
			Trigger string `json:"trigger"`
			Passed  bool   `json:"passed"`
		} `json:"recent_runs"`
	}
	mon.do("GET", "/api/queries/stops", nil, 200, &detail)
	if len(detail.RecentRuns) < 2 || detail.RecentRuns[0].Trigger != "schedule" {
		t.Errorf("recent runs of stops = %+v, want at least two scheduled runs", detail.RecentRuns)
	}
}

// TestMonitorAfterTheReaper runs the Turn checks against an engine whose
// reaper is on: once it has released the expired claims, `expired_claims`
// finds nothing, and the Turn whose stop was requested is finished as
// stopped, which serves the stop request.
func TestMonitorAfterTheReaper(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--claim-ttl", "2s", "--reap-interval", "50ms")
	t.Setenv(e2eTokenEnv, engineAdminToken(t, dir))
	mon := startEngineMonitor(t, base, []string{"p1"}, nil,
		e2eQ("expired", "expired_claims", map[string]any{"kind": "row_count", "op": ">", "value": 0}),
		e2eQ("stops", "unserved_stop_requests", map[string]any{"kind": "row_count", "op": ">", "value": 0}))
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch")
	w := agentClient(t, admin, "p1", "worker", 2)
	stopped, requeued := dispatchTurn(t, req, "worker", "stopped"), dispatchTurn(t, req, "worker", "requeued")
	claimTurn(t, w, "worker")
	claimTurn(t, w, "worker")
	req.call("POST", "/v3r1/projects/p1/management/turns/"+stopped+":stop", map[string]any{"requested_by": agentRef("p1", "req")}, 200)
	a := mon.mustFail("stops", "row count 1 > 0")
	if a.Result.Rows[0]["turn_id"] != stopped {
		t.Errorf("run stops: rows = %+v, want %s", a.Result.Rows, stopped)
	}

	checkfor.Until(t, 10*time.Second, "the reaper to release both claims", func() bool {
		_, rz := engineReadyz(t, base)
		return readyzField(rz, "reaper", "released_total") == 2.0
	})
	// The reaper does not wait for the projections, which the checks read:
	// wait until a later /readyz shows them caught up with the ledger.
	checkfor.Until(t, 10*time.Second, "the projections to apply the releases", func() bool {
		_, rz := engineReadyz(t, base)
		return readyzField(rz, "projections", "lag") == 0.0
	})
	mon.mustPassClean("expired")
	if p := mon.mustPass("stops"); p.Error == nil || p.Error.ID != a.Error.ID {
		t.Errorf("run stops after the reaper: error = %+v, want the still active error %d", p.Error, a.Error.ID)
	}
	for id, want := range map[string]string{stopped: "finished stopped", requeued: "queued <nil>"} {
		var tv struct {
			State   string  `json:"state"`
			Outcome *string `json:"outcome"`
		}
		json.Unmarshal(req.call("GET", "/v3r1/projects/p1/turns/"+id, nil, 200), &tv)
		got := tv.State + " <nil>"
		if tv.Outcome != nil {
			got = tv.State + " " + *tv.Outcome
		}
		if got != want {
			t.Errorf("turn %s after the reaper: state and outcome = %q, want %q", id, got, want)
		}
	}
}
