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
	"slices"
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
	"github.com/turnledger/turnledger/serve"
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

// clusterLogLevel is the level of the cluster tests' serve logs: errors,
// or TURNLEDGER_CLUSTER_LOG (debug, info, warn, error).
func clusterLogLevel() slog.Level {
	var l slog.Level = slog.LevelError
	if v := os.Getenv("TURNLEDGER_CLUSTER_LOG"); v != "" {
		l.UnmarshalText([]byte(v))
	}
	return l
}

// startClusterService runs one serve on the cluster at urls, with its own
// data directory and memory storage for a stream it creates.
func startClusterService(t *testing.T, urls string, replicas int, tune func(*serve.Config)) *serve.Service {
	t.Helper()
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir, cfg.NATSURL = "127.0.0.1:0", t.TempDir(), urls
	cfg.AdminToken = clusterAdminToken
	cfg.ReapInterval = 0
	cfg.Ledger.Replicas = replicas
	cfg.Ledger.Storage = ledger.MemoryStorage
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: clusterLogLevel()}))
	if tune != nil {
		tune(&cfg)
	}
	s, err := serve.Start(t.Context(), cfg)
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
func caughtUp(t *testing.T, services ...*serve.Service) {
	t.Helper()
	checkfor.Until(t, 20*time.Second, "projections to reach the ledger head", func() bool {
		for _, s := range services {
			head, err := s.Ledger().Head(t.Context())
			if err != nil || s.Store().Checkpoint() != head {
				return false
			}
		}
		return true
	})
}

// projectionHash is a SHA-256 of every bucket, key and value of s's
// projections, in order.
func projectionHash(t *testing.T, s *serve.Service) (string, map[string]map[string]string) {
	t.Helper()
	dump, err := s.Store().Dump()
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
func readyz(t *testing.T, s *serve.Service) (int, serve.Readiness) {
	t.Helper()
	code, body, _, err := do(s.URL(), "GET", "/readyz", nil, nil)
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	var r serve.Readiness
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("GET /readyz = %s: %v", body, err)
	}
	return code, r
}

// result is one command as the client saw it.
type result struct {
	instance   int // 0 for a, 1 for b
	project    string
	kind       string // dispatch, claim, record, finish
	key        string // the lifecycle's key; the Idempotency-Key is kind + "-" + key
	turnID     string
	status     int
	start, end time.Time
	retried    int // 503s with Retry-After retried with the same Idempotency-Key
}

// TestClusterFailoverUnderLoad runs failoverUnderLoad on three in-process
// servers, stopping the stream leader's (a clean stop: it hands over its
// leaderships first); commands pause at most maxFailoverPause.
func TestClusterFailoverUnderLoad(t *testing.T) {
	c := natstest.NewCluster(t, 3)
	name := func(s *server.Server) string {
		if s == nil {
			return ""
		}
		return s.Name()
	}
	failoverUnderLoad(t, failoverCluster{
		urls:       c.URLs(),
		waitLeader: func() string { return c.WaitStreamLeader("TURNLEDGER", 20*time.Second).Name() },
		leader:     func() string { return name(c.StreamLeader("TURNLEDGER")) },
		metaLeader: func() string { return name(c.MetaLeader()) },
		kill: func(name string) {
			for _, s := range c.Servers {
				if s.Name() == name {
					c.Kill(s)
				}
			}
		},
		maxPause: maxFailoverPause,
	})
}

// maxCrashPause bounds a command across a crash of the stream leader's
// server, retries of a 503 included. The followers notice only when
// nats-server's raft election timer runs out (4 to 9 s after the last
// append, drawn at random; fixed in nats-server 2.15, not configurable), and
// if the crashed server led the meta group too, making the projections'
// consumer waits for that election as well; commands then resume within
// about half a second (one ledger attempt, 500 ms). The worst legitimate
// pause is thus about 10 s; the bound leaves room for a loaded machine and
// is below the 15 s and more that a stall of the projections took (a
// consumer create stuck on a crashed server, fixed in ledger/read.go). A
// command that cannot finish answers 503 with Retry-After — never 500 — and
// its retry with the same Idempotency-Key answers the same result.
const maxCrashPause = 15 * time.Second

// TestClusterLeaderCrash is TestClusterFailoverUnderLoad with a crash:
// three nats-server processes, and the one leading the stream is killed
// with SIGKILL, so it hands nothing over.
func TestClusterLeaderCrash(t *testing.T) {
	c := natstest.NewProcCluster(t, 3)
	js, err := jetstream.New(natstest.ConnectURL(t, c.URLs()))
	if err != nil {
		t.Fatal(err)
	}
	failoverUnderLoad(t, failoverCluster{
		urls: c.URLs(),
		waitLeader: func() string {
			var name string
			checkfor.Until(t, 30*time.Second, "the stream to have a leader", func() bool {
				name = c.StreamLeader(js, "TURNLEDGER")
				return name != ""
			})
			return name
		},
		leader:     func() string { return c.StreamLeaderNow("TURNLEDGER") },
		metaLeader: c.MetaLeader,
		kill:       func(name string) { c.Node(name).Kill() },
		maxPause:   maxCrashPause,
		retry503:   true,
	})
}

// failoverCluster is a three-server cluster as failoverUnderLoad drives it.
type failoverCluster struct {
	urls       string
	waitLeader func() string     // waits for the stream to have a leader; its server's name
	leader     func() string     // the stream's leader now ("" while it has none or cannot be asked)
	metaLeader func() string     // the JetStream meta group's leader now ("" likewise)
	kill       func(name string) // stops or kills the server with that name
	maxPause   time.Duration
	// retry503 lets a client retry a 503 with Retry-After (the ledger's
	// documented answer when a command cannot finish within its bounds).
	retry503 bool
}

// failoverUnderLoad runs two serve instances on the cluster with a stream
// of three replicas; four clients, each with a worker agent of its own,
// drive whole Turn lifecycles through both (dispatch, claim, record,
// finish; every command with an Idempotency-Key), and the server leading
// the stream is killed. Commands pause (at most maxPause) and resume; none
// fails; every acknowledged command is on the ledger exactly once and in
// both instances' projections; the two instances' projections end
// identical. It logs the phases of the failover: when the cluster had a
// stream (and meta) leader again, when the first command succeeded after
// the kill, the longest command, and the longest time with no command
// completing.
func failoverUnderLoad(t *testing.T, c failoverCluster) {
	soak := time.Duration(0)
	if v := os.Getenv(soakEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", soakEnv, v, err)
		}
		soak = d
	}
	a := startClusterService(t, c.urls, 3, nil)
	b := startClusterService(t, c.urls, 3, nil)
	leader := c.waitLeader()

	admin := client{t: t, base: a.URL(), headers: map[string]string{"Authorization": "Bearer " + clusterAdminToken}}
	reqs := map[string]client{}
	workers := map[int]client{}
	for w := range 4 {
		project := []string{"p1", "p2"}[w/2]
		if _, ok := reqs[project]; !ok {
			reqs[project] = agentClient(t, admin, project, "req", 1, "turns:dispatch", "projections:read")
		}
		workers[w] = agentClient(t, admin, project, fmt.Sprintf("w%d", w), 1)
	}
	caughtUp(t, a, b)
	// Each instance loads a project's write model on its first request
	// (and answers 503 while it loads): load them before the load starts,
	// so that a load is not what the kill interrupts.
	checkfor.Until(t, 20*time.Second, "both instances to have loaded both projects", func() bool {
		for _, s := range []*serve.Service{a, b} {
			for project, req := range reqs {
				if code, _, _, err := do(s.URL(), "GET", "/v3r1/projects/"+project+"/projection/agents", req.headers, nil); err != nil || code != http.StatusOK {
					return false
				}
			}
		}
		return true
	})

	var (
		mu      sync.Mutex
		results []result
		killed  time.Time
		after   int // successes of commands that started after the kill
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		// Each instance writes both projects, one client each: the two
		// instances race on every project.
		base, project, agent := []*serve.Service{a, b}[w%2].URL(), []string{"p1", "p2"}[w/2], fmt.Sprintf("w%d", w)
		p := "/v3r1/projects/" + project
		// send sends one command with its Idempotency-Key and, where
		// allowed, retries a 503 with Retry-After with the same key, as a
		// client does: it must answer the same result, never apply twice.
		send := func(kind, key, path string, headers map[string]string, body any) (result, []byte) {
			h := map[string]string{"Idempotency-Key": kind + "-" + key}
			for k, v := range headers {
				h[k] = v
			}
			r := result{instance: w % 2, project: project, kind: kind, key: key, start: time.Now()}
			code, data, retryAfter, err := do(base, "POST", path, h, body)
			for c.retry503 && err == nil && code == http.StatusServiceUnavailable && retryAfter != "" && r.retried < 20 {
				r.retried++
				code, data, retryAfter, err = do(base, "POST", path, h, body)
			}
			r.end, r.status = time.Now(), code
			if err != nil {
				r.status = -1
			}
			mu.Lock()
			if r.status != http.StatusOK {
				t.Errorf("%s %s = %d %s %v, want 200 (started %v after the kill)", kind, key, code, data, err, r.start.Sub(killed))
			}
			mu.Unlock()
			return r, data
		}
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, n)
				var lifecycle []result
				done := func(r result) bool {
					lifecycle = append(lifecycle, r)
					mu.Lock()
					results = append(results, r)
					if r.status == http.StatusOK && !killed.IsZero() && r.start.After(killed) {
						after++
					}
					mu.Unlock()
					return r.status == http.StatusOK
				}
				body := dispatchBody(project, key)
				body["target_agent"] = agentRef(project, agent)
				r, data := send("dispatch", key, p+"/turns:dispatch", reqs[project].headers, body)
				var tv struct {
					TurnID string `json:"turn_id"`
				}
				json.Unmarshal(data, &tv)
				r.turnID = tv.TurnID
				if !done(r) {
					return
				}
				r, data = send("claim", key, p+"/agents/"+agent+"/claims:claim", workers[w].headers, map[string]any{"agent": agentRef(project, agent)})
				var cl struct {
					Claim map[string]any `json:"claim"`
				}
				json.Unmarshal(data, &cl)
				r.turnID = tv.TurnID
				if r.status == http.StatusOK && (cl.Claim == nil || cl.Claim["turn_id"] != tv.TurnID) {
					mu.Lock()
					t.Errorf("claim %s = %s, want the claim of %s", key, data, tv.TurnID)
					mu.Unlock()
					r.status = -1
				}
				if !done(r) {
					return
				}
				r, _ = send("record", key, p+"/turns/"+tv.TurnID+"/semantic-records", workers[w].headers,
					map[string]any{"claim": cl.Claim, "role": "note", "payload": map[string]any{"op": key}})
				r.turnID = tv.TurnID
				if !done(r) {
					return
				}
				r, _ = send("finish", key, p+"/turns/"+tv.TurnID+":finish", workers[w].headers, map[string]any{"claim": cl.Claim, "outcome": "succeeded"})
				r.turnID = tv.TurnID
				if !done(r) {
					return
				}
			}
		})
	}
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(results), after
	}
	checkfor.Until(t, 20*time.Second, "100 commands before the kill", func() bool { n, _ := count(); return n >= 100 })
	metaWasLeader := c.metaLeader() == leader
	mu.Lock()
	killed = time.Now()
	mu.Unlock()
	c.kill(leader)
	// Watch the cluster recover: when the stream, and the meta group, have a
	// leader again.
	var streamBack, metaBack time.Duration
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for streamBack == 0 || metaBack == 0 {
			if time.Since(killed) > maxCrashPause {
				return
			}
			if l := c.leader(); streamBack == 0 && l != "" && l != leader {
				streamBack = time.Since(killed)
			}
			if l := c.metaLeader(); metaBack == 0 && l != "" && l != leader {
				metaBack = time.Since(killed)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	checkfor.Until(t, 40*time.Second, "100 commands to succeed after the kill", func() bool { _, n := count(); return n >= 100 })
	if soak > 0 {
		end := time.Now().Add(soak)
		checkfor.Until(t, soak+time.Minute, "the soak to end", func() bool { return time.Now().After(end) })
	}
	close(stop)
	wg.Wait()
	<-watched

	// The pause: the longest any command took once the leader was killed,
	// and the longest time after the kill without a command completing.
	var pause, firstOK time.Duration
	var failed []result
	var ends []time.Time
	retries := 0
	for _, r := range results {
		if r.end.After(killed) && r.end.Sub(r.start) > pause {
			pause = r.end.Sub(r.start)
		}
		if r.status != http.StatusOK {
			failed = append(failed, r)
			continue
		}
		if r.end.After(killed) {
			ends = append(ends, r.end)
			if d := r.end.Sub(killed); firstOK == 0 || d < firstOK {
				firstOK = d
			}
		}
		retries += r.retried
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	gap, prev := time.Duration(0), killed
	for _, e := range ends {
		gap, prev = max(gap, e.Sub(prev)), e
	}
	meta := "the meta group kept its leader"
	if metaWasLeader {
		meta = fmt.Sprintf("it led the meta group too, which had a leader again after %v", metaBack.Round(time.Millisecond))
	}
	t.Logf("%d commands (whole lifecycles) through 2 instances; the stream leader %s was killed; the stream had a leader again after %v; %s; the first command completed %v after the kill; longest command after the kill: %v; longest time without a command completing: %v (%d retries of a 503)",
		len(results), leader, streamBack.Round(time.Millisecond), meta, firstOK.Round(time.Millisecond), pause.Round(time.Millisecond), gap.Round(time.Millisecond), retries)
	slow := slices.Clone(results)
	sort.Slice(slow, func(i, j int) bool { return slow[i].end.Sub(slow[i].start) > slow[j].end.Sub(slow[j].start) })
	for _, r := range slow[:min(5, len(slow))] {
		t.Logf("slow: %s %s through instance %d, started %v after the kill, took %v (%d retries of a 503)",
			r.kind, r.key, r.instance, r.start.Sub(killed).Round(time.Millisecond), r.end.Sub(r.start).Round(time.Millisecond), r.retried)
	}
	if len(failed) > 0 {
		t.Errorf("%d commands failed, first %+v; want none", len(failed), failed[0])
	}
	if pause > c.maxPause {
		t.Errorf("a command took %v across the failover, want at most %v", pause, c.maxPause)
	}
	if next := c.waitLeader(); next == leader {
		t.Errorf("the killed server still leads the stream")
	}

	// Every acknowledged command is on the ledger exactly once.
	applied := map[string]map[string]int{} // event type → Turn → count
	if _, err := a.Ledger().ReadAll(t.Context(), 0, func(batch []kernel.Recorded, _ uint64) error {
		for _, r := range batch {
			if applied[r.Event.Type] == nil {
				applied[r.Event.Type] = map[string]int{}
			}
			applied[r.Event.Type][r.Event.ID]++
		}
		return nil
	}); err != nil {
		t.Fatalf("ReadAll = %v", err)
	}
	eventOf := map[string]string{"dispatch": kernel.EvTurnDispatched, "claim": kernel.EvTurnClaimed, "record": kernel.EvTurnRecordAppended, "finish": kernel.EvTurnFinished}
	acked := map[string]int{}
	for _, r := range results {
		if r.status != http.StatusOK {
			continue
		}
		acked[r.kind]++
		if n := applied[eventOf[r.kind]][r.turnID]; n != 1 {
			t.Errorf("%s of Turn %s (%s) is on the ledger %d times, want 1", r.kind, r.turnID, r.key, n)
		}
	}
	if n := len(applied[kernel.EvTurnDispatched]); n != acked["dispatch"] {
		t.Errorf("the ledger holds %d dispatched Turns, the clients were answered %d", n, acked["dispatch"])
	}

	// Both instances converge on the same projections, which hold every
	// acknowledged Turn.
	caughtUp(t, a, b)
	hashA, dumpA := projectionHash(t, a)
	hashB, dumpB := projectionHash(t, b)
	if hashA != hashB {
		t.Errorf("projection hashes differ: %s and %s; diff (-a +b):\n%s", hashA, hashB, cmp.Diff(dumpA, dumpB))
	}
	for _, s := range []*serve.Service{a, b} {
		checked := 0
		for _, r := range results {
			if r.kind != "finish" || r.status != http.StatusOK || checked == 50 {
				continue
			}
			checked++
			code, body, _, err := do(s.URL(), "GET", "/v3r1/projects/"+r.project+"/turns/"+r.turnID, reqs[r.project].headers, nil)
			var tv struct {
				State       string `json:"state"`
				LastTurnSeq uint64 `json:"last_turn_seq"`
			}
			json.Unmarshal(body, &tv)
			if err != nil || code != http.StatusOK || tv.State != "finished" || tv.LastTurnSeq != 1 {
				t.Errorf("GET Turn %s on %s = %d %s %v, want 200, finished with one record", r.turnID, s.URL(), code, body, err)
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
	s := startClusterService(t, c.Servers[0].ClientURL(), 1, func(cfg *serve.Config) {
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
	// A follower may be a moment behind the dispatch just acknowledged by
	// the quorum: /readyz says so (current 2 of 3) until it has caught up.
	checkfor.Until(t, 10*time.Second, "/readyz to answer 200 with 3 replicas, 3 current", func() bool {
		code, rz := readyz(t, s)
		return code == http.StatusOK && rz.Stream != nil && rz.Stream.Replicas == 3 && rz.Stream.Current == 3
	})

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

// TestClusterDocConfigParses reads the three-node nats-server
// configuration docs/cluster.md gives and has nats-server parse it.
func TestClusterDocConfigParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cluster.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(doc, []byte("A minimal three-node cluster"))
	_, rest, ok2 := bytes.Cut(rest, []byte("```\n"))
	conf, _, ok3 := bytes.Cut(rest, []byte("```"))
	if !ok || !ok2 || !ok3 {
		t.Fatalf("docs/cluster.md has no three-node configuration block")
	}
	path := t.TempDir() + "/n1.conf"
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TURNLEDGER_NATS_PASSWORD", "pw")
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server cannot parse docs/cluster.md's configuration: %v\n%s", err, conf)
	}
	if o.ServerName != "n1" || !o.JetStream || o.Cluster.Name != "turnledger" || len(o.Routes) != 3 || o.Username != "turnledger" || o.Password != "pw" {
		t.Errorf("docs/cluster.md's configuration reads as server %q, JetStream %v, cluster %q, %d routes, user %q; want n1, true, turnledger, 3, turnledger",
			o.ServerName, o.JetStream, o.Cluster.Name, len(o.Routes), o.Username)
	}
}
