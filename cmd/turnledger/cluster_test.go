package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// The cluster tests run two serve instances on a three-server JetStream
// cluster (in-process nats-servers with routes on loopback). Set
// TURNLEDGER_CLUSTER_SOAK to a duration (e.g. 2m) to keep the load of
// TestClusterFailoverUnderLoad running that much longer after the kill, on
// the two servers left, before the checks.
const soakEnv = "TURNLEDGER_CLUSTER_SOAK"

// maxFailoverPause is the longest a command may take while the stream
// leader's server goes away: the bound.
const maxFailoverPause = 5 * time.Second

const clusterAdminToken = "tladm_cluster-test-admin-token"

// startClusterService runs one serve on the cluster at urls, with its own
// data directory and memory storage for a stream it creates.
func startClusterService(t *testing.T, urls string, replicas int, tune func(*serviceConfig)) *service {
	t.Helper()
	cfg := defaultServiceConfig()
	cfg.Addr, cfg.DataDir, cfg.NATSURL = "127.0.0.1:0", t.TempDir(), urls
	cfg.AdminToken = clusterAdminToken
	cfg.ReapInterval = 0
	cfg.Ledger.Replicas = replicas
	cfg.Ledger.Storage = ledger.MemoryStorage
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if tune != nil {
		tune(&cfg)
	}
	s, err := startService(t.Context(), cfg)
	if err != nil {
		t.Fatalf("startService on %s = %v", urls, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// do sends one request and returns the status, body and Retry-After; it is
// safe on any goroutine.
func do(base, method, path string, headers map[string]string, body any) (int, []byte, string, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, nil, "", err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, resp.Header.Get("Retry-After"), err
}

// dispatchBody is a Turn dispatch from req to worker in project with key.
func dispatchBody(project, key string) map[string]any {
	return map[string]any{
		"requested_by": agentRef(project, "req"), "target_agent": agentRef(project, "worker"), "input": map[string]any{"k": key},
		"turn_kind": "summarize", "dispatch_key": key, "authority": map[string]any{"mode": "root_request", "request_id": key},
	}
}

// caughtUp waits until every service's projections have reached the
// ledger's head.
func caughtUp(t *testing.T, services ...*service) {
	t.Helper()
	checkfor.Until(t, 20*time.Second, "projections to reach the ledger head", func() bool {
		for _, s := range services {
			head, err := s.ledger.Head(t.Context())
			if err != nil || s.store.Checkpoint() != head {
				return false
			}
		}
		return true
	})
}

// projectionHash is a SHA-256 of every bucket, key and value of s's
// projections, in order.
func projectionHash(t *testing.T, s *service) (string, map[string]map[string]string) {
	t.Helper()
	dump, err := s.store.Dump()
	if err != nil {
		t.Fatalf("Dump() = %v", err)
	}
	h := sha256.New()
	var buckets []string
	for b := range dump {
		buckets = append(buckets, b)
	}
	sort.Strings(buckets)
	for _, b := range buckets {
		var keys []string
		for k := range dump[b] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%q %q %q\n", b, k, dump[b][k])
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)), dump
}

// readyz returns the status and the decoded /readyz of s.
func readyz(t *testing.T, s *service) (int, readiness) {
	t.Helper()
	code, body, _, err := do(s.URL(), "GET", "/readyz", nil, nil)
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	var r readiness
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("GET /readyz = %s: %v", body, err)
	}
	return code, r
}

// result is one dispatch as the client saw it.
type result struct {
	project    string
	key        string
	turnID     string
	status     int
	start, end time.Time
}

// TestClusterFailoverUnderLoad runs two serve instances on a three-server
// cluster with a stream of three replicas, dispatches Turns through both
// from four clients, and kills the server leading the stream. Commands pause
// (at most maxFailoverPause) and resume; none fails; every acknowledged Turn
// is on the ledger exactly once and in both instances' projections; the two
// instances' projections end identical.
func TestClusterFailoverUnderLoad(t *testing.T) {
	soak := time.Duration(0)
	if v := os.Getenv(soakEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", soakEnv, v, err)
		}
		soak = d
	}
	c := natstest.NewCluster(t, 3)
	a := startClusterService(t, c.URLs(), 3, nil)
	b := startClusterService(t, c.URLs(), 3, nil)
	leader := c.WaitStreamLeader("TURNLEDGER", 20*time.Second)

	admin := client{t: t, base: a.URL(), headers: map[string]string{"Authorization": "Bearer " + clusterAdminToken}}
	reqs := map[string]client{}
	for _, p := range []string{"p1", "p2"} {
		reqs[p] = agentClient(t, admin, p, "req", 1, "turns:dispatch", "projections:read")
		agentClient(t, admin, p, "worker", 1)
	}
	caughtUp(t, a, b)

	var (
		mu      sync.Mutex
		results []result
		killed  time.Time
		after   int // successes that started after the last kill
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		// Each instance writes both projects, one client each: the two
		// instances race on every project.
		base, project := []*service{a, b}[w%2].URL(), []string{"p1", "p2"}[w/2]
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, n)
				start := time.Now()
				code, body, _, err := do(base, "POST", "/v3r1/projects/"+project+"/turns:dispatch", reqs[project].headers, dispatchBody(project, key))
				r := result{project: project, key: key, status: code, start: start, end: time.Now()}
				if err != nil {
					r.status = -1
				}
				var tv struct {
					TurnID string `json:"turn_id"`
				}
				if code == http.StatusOK && json.Unmarshal(body, &tv) == nil {
					r.turnID = tv.TurnID
				} else if err == nil {
					mu.Lock()
					t.Errorf("dispatch %s = %d %s, want 200 (started %v after the kill)", key, code, body, start.Sub(killed))
					mu.Unlock()
				}
				mu.Lock()
				results = append(results, r)
				if r.turnID != "" && !killed.IsZero() && start.After(killed) {
					after++
				}
				mu.Unlock()
			}
		})
	}
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(results), after
	}
	checkfor.Until(t, 20*time.Second, "100 dispatches before the kill", func() bool { n, _ := count(); return n >= 100 })
	mu.Lock()
	killed = time.Now()
	mu.Unlock()
	c.Kill(leader)
	checkfor.Until(t, 30*time.Second, "100 dispatches to succeed after the kill", func() bool { _, n := count(); return n >= 100 })
	if soak > 0 {
		end := time.Now().Add(soak)
		checkfor.Until(t, soak+time.Minute, "the soak to end", func() bool { return time.Now().After(end) })
	}
	close(stop)
	wg.Wait()

	// The pause: the longest any command took once the leader was killed.
	var pause time.Duration
	var failed []result
	for _, r := range results {
		if r.end.After(killed) && r.end.Sub(r.start) > pause {
			pause = r.end.Sub(r.start)
		}
		if r.turnID == "" {
			failed = append(failed, r)
		}
	}
	t.Logf("%d dispatches through 2 instances; the stream leader %s was killed; longest command after the kill: %v", len(results), leader.Name(), pause)
	if len(failed) > 0 {
		t.Errorf("%d dispatches failed, first %+v; want none", len(failed), failed[0])
	}
	if pause > maxFailoverPause {
		t.Errorf("a command took %v across the failover, want at most %v", pause, maxFailoverPause)
	}
	if next := c.WaitStreamLeader("TURNLEDGER", 20*time.Second); next == leader {
		t.Errorf("the killed server still leads the stream")
	}

	// Every acknowledged Turn is on the ledger exactly once.
	dispatched := map[string]int{}
	if _, err := a.ledger.ReadAll(t.Context(), 0, func(batch []kernel.Recorded, _ uint64) error {
		for _, r := range batch {
			if r.Event.Type == kernel.EvTurnDispatched {
				dispatched[r.Event.ID]++
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("ReadAll = %v", err)
	}
	acked := 0
	for _, r := range results {
		if r.turnID == "" {
			continue
		}
		acked++
		if n := dispatched[r.turnID]; n != 1 {
			t.Errorf("Turn %s (dispatch %s) is on the ledger %d times, want 1", r.turnID, r.key, n)
		}
	}
	if len(dispatched) != acked {
		t.Errorf("the ledger holds %d dispatched Turns, the clients were answered %d", len(dispatched), acked)
	}

	// Both instances converge on the same projections, which hold every
	// acknowledged Turn.
	caughtUp(t, a, b)
	hashA, dumpA := projectionHash(t, a)
	hashB, dumpB := projectionHash(t, b)
	if hashA != hashB {
		t.Errorf("projection hashes differ: %s and %s; diff (-a +b):\n%s", hashA, hashB, cmp.Diff(dumpA, dumpB))
	}
	for _, s := range []*service{a, b} {
		for _, r := range results[:min(len(results), 50)] {
			if r.turnID == "" {
				continue
			}
			if code, body, _, err := do(s.URL(), "GET", "/v3r1/projects/"+r.project+"/turns/"+r.turnID, reqs[r.project].headers, nil); err != nil || code != http.StatusOK {
				t.Errorf("GET Turn %s on %s = %d %s %v, want 200", r.turnID, s.URL(), code, body, err)
			}
		}
		code, rz := readyz(t, s)
		if code != http.StatusOK || rz.Stream == nil || rz.Stream.Replicas != 3 || rz.Lag.Events != 0 || !rz.Lag.WithinBound {
			t.Errorf("/readyz after the failover = %d %+v (stream %+v), want 200, 3 replicas, no lag", code, rz, rz.Stream)
		}
	}
}

// TestClusterServeLeavesAnExistingStreamAlone creates the stream with three
// replicas before serve starts with the default of one: serve uses it as it
// is, says so in /readyz, and works on it. Then two of the three servers
// stop: with no quorum a command answers 503 with Retry-After once the
// ledger's bound has passed, never 500.
func TestClusterServeLeavesAnExistingStreamAlone(t *testing.T) {
	c := natstest.NewCluster(t, 3)
	js, err := jetstream.New(natstest.ConnectURL(t, c.URLs()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: "TURNLEDGER", Subjects: []string{"tl.>"}, Storage: jetstream.MemoryStorage, Replicas: 3,
	}); err != nil {
		t.Fatalf("CreateStream(R3) = %v", err)
	}
	c.WaitStreamLeader("TURNLEDGER", 20*time.Second)
	s := startClusterService(t, c.Servers[0].ClientURL(), 1, func(cfg *serviceConfig) {
		cfg.Ledger.AttemptTimeout, cfg.Ledger.RetryFor = 250*time.Millisecond, 2*time.Second
	})
	admin := client{t: t, base: s.URL(), headers: map[string]string{"Authorization": "Bearer " + clusterAdminToken}}
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	agentClient(t, admin, "p1", "worker", 1)
	req.call("POST", "/v3r1/projects/p1/turns:dispatch", dispatchBody("p1", "k1"), 200)

	st, err := js.Stream(t.Context(), "TURNLEDGER")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Replicas; got != 3 {
		t.Errorf("the stream has %d replicas after serve --replicas 1 started on it, want 3", got)
	}
	code, rz := readyz(t, s)
	if code != http.StatusOK || rz.Stream == nil || rz.Stream.Replicas != 3 || rz.Stream.Current != 3 {
		t.Errorf("/readyz = %d, stream %+v; want 200 and 3 replicas, 3 current", code, rz.Stream)
	}

	for _, srv := range c.Servers[1:] {
		c.Kill(srv)
	}
	code, body, retryAfter, err := do(s.URL(), "POST", "/v3r1/projects/p1/turns:dispatch", req.headers, dispatchBody("p1", "k2"))
	var e struct {
		Error string `json:"error"`
	}
	json.Unmarshal(body, &e)
	if err != nil || code != http.StatusServiceUnavailable || e.Error != string(kernel.Unavailable) {
		t.Errorf("dispatch without quorum = %d %s %v, want 503 %s", code, body, err, kernel.Unavailable)
	}
	if n, err := strconv.Atoi(retryAfter); err != nil || n < 1 {
		t.Errorf("dispatch without quorum: Retry-After %q, want a number of seconds", retryAfter)
	}
}

// TestReadmeClusterConfigParses reads the three-node nats-server
// configuration the README gives and has nats-server parse it.
func TestReadmeClusterConfigParses(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(readme, []byte("A minimal three-node cluster"))
	_, rest, ok2 := bytes.Cut(rest, []byte("```\n"))
	conf, _, ok3 := bytes.Cut(rest, []byte("```"))
	if !ok || !ok2 || !ok3 {
		t.Fatalf("README.md has no three-node configuration block")
	}
	path := t.TempDir() + "/n1.conf"
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TURNLEDGER_NATS_PASSWORD", "pw")
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server cannot parse the README's configuration: %v\n%s", err, conf)
	}
	if o.ServerName != "n1" || !o.JetStream || o.Cluster.Name != "turnledger" || len(o.Routes) != 3 || o.Username != "turnledger" || o.Password != "pw" {
		t.Errorf("the README's configuration reads as server %q, JetStream %v, cluster %q, %d routes, user %q; want n1, true, turnledger, 3, turnledger",
			o.ServerName, o.JetStream, o.Cluster.Name, len(o.Routes), o.Username)
	}
}
