package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/projection"
)

var servingOn = regexp.MustCompile(`serving on (http://127\.0\.0\.1:\d+)`)

// startServe runs the whole binary's `turnledger serve` on a random loopback
// port with the given data directory (see startEngine), with a fast reaper.
func startServe(t *testing.T, dir string) (string, func() int) {
	t.Helper()
	return startEngine(t, dir, "127.0.0.1:0", "--reap-interval", "50ms")
}

// client drives the API over HTTP.
type client struct {
	t       *testing.T
	base    string
	headers map[string]string
}

func (c client) call(method, path string, body any, want int) []byte {
	c.t.Helper()
	var rd io.Reader
	if raw, ok := body.([]byte); ok {
		rd = bytes.NewReader(raw) // sent as written
	} else if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	return data
}

func adminClient(t *testing.T, base, dir string) client {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatalf("read admin token: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "admin-token")); fi.Mode().Perm() != 0o600 {
		t.Errorf("admin-token mode = %v, want 0600", fi.Mode().Perm())
	}
	return client{t: t, base: base, headers: map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(tok))}}
}

func agentClient(t *testing.T, admin client, project, agent string, capacity int, grants ...string) client {
	t.Helper()
	if grants == nil {
		grants = []string{}
	}
	admin.call("POST", "/v3r1/projects/"+project+"/agents:register", map[string]any{
		"spec": map[string]any{"agent_id": agent, "role": "worker", "description": "", "enabled": true, "accepts_work": true,
			"capacity": capacity, "capabilities": []string{"summarize"}, "grants": grants, "public_metadata": map[string]any{}},
		"provenance": map[string]any{"kind": "test", "external_ref": "", "payload_hash": nil},
	}, 200)
	var issued struct {
		Token string `json:"token"`
	}
	json.Unmarshal(admin.call("POST", "/v3r1/projects/"+project+"/agents/"+agent+"/credentials:issue", nil, 200), &issued)
	return client{t: t, base: admin.base, headers: map[string]string{
		"X-Svc-Project-Id": project, "X-Svc-Agent-Id": agent, "Authorization": "Bearer " + issued.Token,
	}}
}

func agentRef(project, agent string) map[string]string {
	return map[string]string{"project_id": project, "agent_id": agent}
}

// TestServeRestartKeepsEverything drives one Turn through the whole binary,
// stops it, starts it again on the same data directory, and finds every
// Turn, claim and feed item where it was.
func TestServeRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir)
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	w := agentClient(t, admin, "p1", "worker", 2)

	dispatch := func(key string) string {
		var tv struct {
			TurnID string `json:"turn_id"`
		}
		json.Unmarshal(req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
			"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", "worker"), "input": map[string]any{"k": key},
			"turn_kind": "summarize", "dispatch_key": key, "authority": map[string]any{"mode": "root_request", "request_id": key},
		}, 200), &tv)
		return tv.TurnID
	}
	done, held := dispatch("done"), dispatch("held")
	claim := func() map[string]any {
		var c map[string]any
		json.Unmarshal(w.call("POST", "/v3r1/projects/p1/agents/worker/claims:claim", map[string]any{"agent": agentRef("p1", "worker")}, 200), &c)
		return c["claim"].(map[string]any)
	}
	c1 := claim()
	w.call("POST", "/v3r1/projects/p1/turns/"+done+"/semantic-records", map[string]any{"claim": c1, "role": "note", "payload": map[string]any{"x": 1}}, 200)
	w.call("POST", "/v3r1/projects/p1/turns/"+done+":finish", map[string]any{"claim": c1, "outcome": "succeeded", "final_payload": nil, "final_record_role": ""}, 200)
	c2 := claim()

	before := map[string][]byte{
		"done": req.call("GET", "/v3r1/projects/p1/turns/"+done, nil, 200),
		"held": req.call("GET", "/v3r1/projects/p1/turns/"+held, nil, 200),
		"feed": req.call("GET", "/v3r1/projects/p1/projection/feed?limit=500", nil, 200),
		"ctx":  req.call("GET", "/v3r1/projects/p1/turns/"+done+"/context", nil, 200),
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve exited with %d", code)
	}
	// serve saved the write model's snapshot when it stopped, at the
	// project's last event: the restart loads from it (and the claim held
	// across the restart fences below).
	st, err := projection.Open(filepath.Join(dir, "projections.db"), projection.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var snapSeq uint64
	if err := st.LoadSnapshot("p1", func(seq uint64, _ []byte) error { snapSeq = seq; return nil }); err != nil {
		t.Fatal(err)
	}
	if cp := st.Checkpoint(); snapSeq == 0 || snapSeq != cp {
		t.Errorf("snapshot of p1 at ledger_seq %d after the stop, want the last one, %d", snapSeq, cp)
	}
	st.Close()

	base2, _ := startServe(t, dir)
	req.base, w.base = base2, base2
	after := map[string][]byte{
		"done": req.call("GET", "/v3r1/projects/p1/turns/"+done, nil, 200),
		"held": req.call("GET", "/v3r1/projects/p1/turns/"+held, nil, 200),
		"feed": req.call("GET", "/v3r1/projects/p1/projection/feed?limit=500", nil, 200),
		"ctx":  req.call("GET", "/v3r1/projects/p1/turns/"+done+"/context", nil, 200),
	}
	for k := range before {
		if diff := cmp.Diff(string(before[k]), string(after[k])); diff != "" {
			t.Errorf("%s changed across the restart (-before +after):\n%s", k, diff)
		}
	}
	// The claim taken before the restart still fences: its holder finishes.
	w.call("POST", "/v3r1/projects/p1/turns/"+held+":finish", map[string]any{"claim": c2, "outcome": "failed", "final_payload": nil, "final_record_role": ""}, 200)
	w.call("POST", "/v3r1/projects/p1/turns/"+held+":finish", map[string]any{"claim": c2, "outcome": "failed", "final_payload": nil, "final_record_role": ""}, 409)

	var ready struct {
		Status  string `json:"status"`
		Backend struct {
			Kind       string `json:"kind"`
			LedgerHead uint64 `json:"ledger_head"`
		} `json:"backend"`
		Reaper struct {
			Enabled bool `json:"enabled"`
		} `json:"reaper"`
	}
	json.Unmarshal(client{t: t, base: base2}.call("GET", "/readyz", nil, 200), &ready)
	if ready.Status != "ready" || ready.Backend.Kind != "embedded" || ready.Backend.LedgerHead == 0 || !ready.Reaper.Enabled {
		t.Errorf("readyz = %+v", ready)
	}
}

// TestReplayRebuildsTheSameProjections runs a long random scenario, then
// rebuilds every projection from ledger_seq 1 with `turnledger replay` and
// compares the rebuilt file with the live one.
func TestReplayRebuildsTheSameProjections(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir)
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "management")
	workers := []client{agentClient(t, admin, "p1", "w1", 3), agentClient(t, admin, "p1", "w2", 2)}
	other := agentClient(t, admin, "p2", "solo", 1, "turns:dispatch")

	// A body as a client may write it (white space, escapes, numbers
	// written long) goes into the live projections from the event the
	// engine decided, and into the rebuilt ones from the ledger's message:
	// both must come out the same.
	req.call("POST", "/v3r1/projects/p1/turns:dispatch", []byte(`{ "requested_by": {"project_id": "p1", "agent_id": "req"},
		"target_agent": {"project_id":"p1","agent_id":"w1"}, "input": { "q" : "\u003cb\u003e & é", "n": 1.50, "list": [ 1 , 2 ] },
		"turn_kind": "summarize", "dispatch_key": "raw", "authority": {"mode": "root_request", "request_id": "r"},
		"meta": {"note": "spaced", "annotations": { "k" : [ true , null ] }}, "trace": {"trace_id": "t1", "recursion_depth": 0} }`), 200)
	rng := rand.New(rand.NewPCG(1, 2))
	var claims []map[string]any
	turns := 0
	for step := 0; step < 300; step++ {
		wi := rng.IntN(2)
		w := workers[wi]
		wid := fmt.Sprintf("w%d", wi+1)
		switch op := rng.IntN(10); {
		case op < 3:
			turns++
			req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
				"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", wid), "input": map[string]any{"n": turns},
				"turn_kind": "summarize", "dispatch_key": fmt.Sprintf("k%d", turns), "authority": map[string]any{"mode": "root_request", "request_id": "r"},
				"meta": map[string]any{"note": "scenario"},
			}, 200)
		case op < 5:
			var c map[string]any
			json.Unmarshal(w.call("POST", "/v3r1/projects/p1/agents/"+wid+"/claims:claim", map[string]any{"agent": agentRef("p1", wid)}, 200), &c)
			if c != nil {
				claims = append(claims, c["claim"].(map[string]any))
			}
		case op < 7 && len(claims) > 0:
			c := claims[rng.IntN(len(claims))]
			owner := workers[0]
			if c["agent_id"] == "w2" {
				owner = workers[1]
			}
			code := owner.rawStatus("POST", "/v3r1/projects/p1/turns/"+c["turn_id"].(string)+"/semantic-records", map[string]any{"claim": c, "role": "note", "payload": map[string]any{"s": step}})
			if code != 200 && code != 409 {
				t.Fatalf("record = %d", code)
			}
		case op < 8 && len(claims) > 0:
			i := rng.IntN(len(claims))
			c := claims[i]
			owner := workers[0]
			if c["agent_id"] == "w2" {
				owner = workers[1]
			}
			owner.rawStatus("POST", "/v3r1/projects/p1/turns/"+c["turn_id"].(string)+":finish", map[string]any{"claim": c, "outcome": "succeeded", "final_payload": map[string]any{"done": step}, "final_record_role": "final"})
			claims = append(claims[:i], claims[i+1:]...)
		case op < 9 && turns > 0:
			var page struct {
				Items []struct {
					TurnID string `json:"turn_id"`
				} `json:"items"`
			}
			json.Unmarshal(req.call("GET", "/v3r1/projects/p1/projection/turns?state=queued&limit=5", nil, 200), &page)
			if len(page.Items) > 0 {
				req.call("POST", "/v3r1/projects/p1/management/turns/"+page.Items[0].TurnID+":stop", map[string]any{"requested_by": agentRef("p1", "req")}, 200)
			}
		default:
			other.call("POST", "/v3r1/projects/p2/management/agents/solo:heartbeat-presence", nil, 200)
		}
	}
	// Let the projector reach the head, then stop serve.
	waitReady(t, base)
	if code := stop(); code != 0 {
		t.Fatalf("serve exited with %d", code)
	}
	live := dumpProjections(t, filepath.Join(dir, "projections.db"))
	liveSnaps := snapshots(t, filepath.Join(dir, "projections.db"), "p1", "p2")
	for p, snap := range liveSnaps {
		if strings.HasPrefix(snap, "at 0:") {
			t.Errorf("serve saved no snapshot of %s when it stopped", p)
		}
	}

	var out bytes.Buffer
	if code := Main(t.Context(), []string{"replay", "--data", dir}, &out, &out); code != 0 {
		t.Fatalf("replay exited with %d:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "replayed") || !strings.Contains(out.String(), "rebuilt") {
		t.Errorf("replay output shows no progress:\n%s", out.String())
	}
	rebuilt := dumpProjections(t, filepath.Join(dir, "projections.db"))
	if diff := cmp.Diff(live, rebuilt); diff != "" {
		t.Errorf("rebuilt projections differ from the live ones (-live +rebuilt):\n%s", diff)
	}
	// Replay folds the write models on the way and leaves their snapshots
	// in the new file: the same bytes as the ones serve saved when it
	// stopped, so the next start loads them instead of the whole history.
	if diff := cmp.Diff(liveSnaps, snapshots(t, filepath.Join(dir, "projections.db"), "p1", "p2")); diff != "" {
		t.Errorf("replay's write-model snapshots differ from serve's (-serve +replay):\n%s", diff)
	}
	if len(live["feed"]) < 200 {
		t.Errorf("the scenario left only %d feed items", len(live["feed"]))
	}
}

// snapshots reads the write-model snapshots of the projects: ledger_seq
// and bytes.
func snapshots(t *testing.T, path string, projects ...string) map[string]string {
	t.Helper()
	st, err := projection.Open(path, projection.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[string]string{}
	for _, p := range projects {
		err := st.LoadSnapshot(p, func(seq uint64, data []byte) error {
			out[p] = fmt.Sprintf("at %d: %x", seq, data)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func (c client) rawStatus(method, path string, body any) int {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.base+path, bytes.NewReader(b))
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitReady(t *testing.T, base string) {
	t.Helper()
	checkfor.Until(t, 10*time.Second, "the projections to catch up with the ledger", func() bool {
		var r struct {
			Projections struct {
				Lag uint64 `json:"lag"`
			} `json:"projections"`
		}
		json.Unmarshal(client{t: t, base: base}.call("GET", "/readyz", nil, 200), &r)
		return r.Projections.Lag == 0
	})
}

func dumpProjections(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	st, err := projection.Open(path, projection.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := st.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestServeHelpAndBadFlags(t *testing.T) {
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"--help"}, &out, &out); code != 0 || !strings.Contains(out.String(), "serve") || !strings.Contains(out.String(), "replay") {
		t.Errorf("--help = %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := Main(t.Context(), []string{"serve", "--help"}, &out, &out); code != 0 || !strings.Contains(out.String(), "-nats-url") {
		t.Errorf("serve --help = %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := Main(t.Context(), []string{"serve", "--bogus"}, &out, &out); code != 2 {
		t.Errorf("serve --bogus = %d, want 2:\n%s", code, out.String())
	}
	out.Reset()
	if code := Main(t.Context(), []string{"nope"}, &out, &out); code != 2 {
		t.Errorf("unknown command = %d, want 2", code)
	}
}

// TestServeRefusesProjectionsAheadOfTheLedger: projections folded from a
// ledger that is gone must not be served as if they were current.
func TestServeRefusesProjectionsAheadOfTheLedger(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir)
	admin := adminClient(t, base, dir)
	agentClient(t, admin, "p1", "worker", 1)
	waitReady(t, base)
	if code := stop(); code != 0 {
		t.Fatalf("serve exited with %d", code)
	}
	if err := os.RemoveAll(filepath.Join(dir, "nats")); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	code := Main(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--data", dir}, &out, &out)
	if code != 1 || !strings.Contains(out.String(), "turnledger replay") {
		t.Fatalf("serve over a lost ledger = %d:\n%s\nwant exit 1 naming turnledger replay", code, out.String())
	}
	// replay rebuilds the projections from the (now empty) ledger, and serve starts.
	if code := Main(t.Context(), []string{"replay", "--data", dir}, &out, &out); code != 0 {
		t.Fatalf("replay = %d:\n%s", code, out.String())
	}
	startServe(t, dir)
}

// TestTwoServesShareOneNATS runs two `serve` processes' worth of service on
// one external NATS server, each with its own projections: work dispatched
// through one is claimed and finished through the other, and a credential
// revoked through one is refused by the other on the next request.
func TestTwoServesShareOneNATS(t *testing.T) {
	srv := natstest.Start(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	baseA, _ := startEngine(t, dirA, "127.0.0.1:0", "--nats-url", srv.ClientURL())
	// Both instances of one deployment share the admin token.
	tok, err := os.ReadFile(filepath.Join(dirA, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, "admin-token"), tok, 0o600); err != nil {
		t.Fatal(err)
	}
	baseB, _ := startEngine(t, dirB, "127.0.0.1:0", "--nats-url", srv.ClientURL())

	adminA := adminClient(t, baseA, dirA)
	req := agentClient(t, adminA, "p1", "req", 1, "turns:dispatch")
	w := agentClient(t, adminA, "p1", "worker", 1)
	var tv struct {
		TurnID string `json:"turn_id"`
	}
	json.Unmarshal(req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
		"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", "worker"), "input": map[string]any{},
		"turn_kind": "summarize", "dispatch_key": "k1", "authority": map[string]any{"mode": "root_request", "request_id": "r1"},
	}, 200), &tv)

	wB := w
	wB.base = baseB
	var c struct {
		Claim map[string]any `json:"claim"`
		Turn  struct {
			TurnID string `json:"turn_id"`
		} `json:"turn"`
	}
	json.Unmarshal(wB.call("POST", "/v3r1/projects/p1/agents/worker/claims:claim", map[string]any{"agent": agentRef("p1", "worker")}, 200), &c)
	if c.Turn.TurnID != tv.TurnID {
		t.Fatalf("claim through B = %q, want the turn %s dispatched through A", c.Turn.TurnID, tv.TurnID)
	}
	// A claim through A now finds nothing: B's claim holds the Turn.
	if got := strings.TrimSpace(string(w.call("POST", "/v3r1/projects/p1/agents/worker/claims:claim", map[string]any{"agent": agentRef("p1", "worker")}, 200))); got != "null" {
		t.Fatalf("second claim through A = %s, want null", got)
	}
	w.call("POST", "/v3r1/projects/p1/turns/"+tv.TurnID+":finish", map[string]any{"claim": c.Claim, "outcome": "succeeded", "final_payload": nil, "final_record_role": ""}, 200)
	var fin struct {
		State string `json:"state"`
	}
	json.Unmarshal(wB.call("GET", "/v3r1/projects/p1/turns/"+tv.TurnID, nil, 200), &fin)
	if fin.State != "finished" {
		t.Fatalf("turn read through B = %s, want finished", fin.State)
	}

	var creds struct {
		Items []struct {
			CredentialID string `json:"credential_id"`
		} `json:"items"`
	}
	json.Unmarshal(adminA.call("GET", "/v3r1/projects/p1/agents/worker/credentials", nil, 200), &creds)
	adminA.call("POST", "/v3r1/projects/p1/agents/worker/credentials/"+creds.Items[0].CredentialID+":revoke", nil, 200)
	wB.call("GET", "/v3r1/projects/p1/turns/"+tv.TurnID, nil, 401)
}
