package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// crashKills is how many times TestCrashHarness kills serve with SIGKILL:
// 10 in CI, more with TURNLEDGER_CRASH_KILLS (docs/reliability.md's long run uses 100).
func crashKills(t *testing.T) int {
	if v := os.Getenv("TURNLEDGER_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TURNLEDGER_CRASH_KILLS=%q must be a positive integer", v)
		}
		return n
	}
	return 10
}

// serveChild is `turnledger serve` running as a child process.
type serveChild struct {
	cmd  *exec.Cmd
	base string
	out  *syncBuffer
	done chan struct{} // closed once the process has ended
	err  error         // how it ended, once done is closed
}

// startServeChild starts serve on dir as a child process and waits until it
// listens. Extra flags follow the data directory.
func startServeChild(t *testing.T, dir string, extra ...string) *serveChild {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", dir}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envChildMain+"=1", "TURNLEDGER_ADMIN_TOKEN=")
	c := &serveChild{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.out.Write(append(sc.Bytes(), '\n'))
		}
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			cmd.Process.Kill()
			<-c.done
		}
	})
	checkfor.Until(t, 30*time.Second, "serve (child) to listen", func() bool {
		if m := servingOn.FindStringSubmatch(c.out.String()); m != nil {
			c.base = m[1]
			return true
		}
		select {
		case <-c.done:
			t.Fatalf("serve exited before serving (%v):\n%s", c.err, c.out.String())
		default:
		}
		return false
	})
	return c
}

// kill sends sig and waits for the process to end; it returns the exit code
// (-1 when a signal ended it).
func (c *serveChild) kill(t *testing.T, sig syscall.Signal, bound time.Duration) int {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
	select {
	case <-c.done:
	case <-time.After(bound):
		c.cmd.Process.Kill()
		<-c.done
		t.Fatalf("serve did not exit within %s of %v:\n%s", bound, sig, c.out.String())
	}
	return c.cmd.ProcessState.ExitCode()
}

// waitReadyz waits until /readyz answers 200 and returns how long it took.
func waitReadyz(t *testing.T, base string, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	hc := &http.Client{Timeout: 2 * time.Second}
	checkfor.Until(t, bound, "/readyz to answer 200", func() bool {
		resp, err := hc.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return time.Since(start)
}

// crashClient sends requests to whichever serve is up, retrying (with the
// same Idempotency-Key and body) through kills and restarts.
type crashClient struct {
	t  *testing.T
	hc *http.Client

	mu      sync.Mutex
	base    string
	changed chan struct{} // closed when base changes
	retries int
}

func (h *crashClient) setBase(base string) {
	h.mu.Lock()
	h.base = base
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
}

// send sends one request until it gets an answer below 500; it returns the
// status and body, or ok false when ctx ended first.
func (h *crashClient) send(ctx context.Context, headers map[string]string, key, method, path string, body any) (int, []byte, bool) {
	data, _ := json.Marshal(body)
	for attempt := 0; ; attempt++ {
		h.mu.Lock()
		base, changed := h.base, h.changed
		if attempt > 0 {
			h.retries++
		}
		h.mu.Unlock()
		req, _ := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(data))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := h.hc.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return resp.StatusCode, b, true
			}
		}
		if ctx.Err() != nil {
			return 0, nil, false
		}
		// serve is down or busy: back off a little, or go at once when it
		// has been restarted.
		select {
		case <-changed:
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return 0, nil, false
		}
	}
}

// ack is one acknowledged command.
type ack struct {
	kind    string // dispatch, claim, record, renew, finish
	turnID  string
	op      string // the record's op id
	turnSeq uint64
}

// TestCrashHarness drives concurrent Turn lifecycles against serve running
// as a child process, kills it with SIGKILL at random moments (after a
// random number of acknowledged commands), sometimes damages the projection
// file before the restart (truncated, zeroed, random bytes), restarts it and
// retries every unanswered command with its Idempotency-Key. Then it checks
// that nothing acknowledged is lost, no record is appended twice, no retry
// was refused, dispatch keys are unique, SIGTERM under load exits 0, and the
// projections equal a fresh `turnledger replay`. It runs in both sync
// modes: with --sync always an acknowledgement waits for the group commit's
// fsync, with --sync interval for the server's write alone, and a SIGKILL
// loses nothing acknowledged in either.
func TestCrashHarness(t *testing.T) {
	for _, mode := range []string{"always", "interval"} {
		t.Run(mode, func(t *testing.T) { crashHarness(t, mode) })
	}
}

func crashHarness(t *testing.T, syncMode string) {
	kills := crashKills(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("TURNLEDGER_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (TURNLEDGER_CRASH_SEED), %d kills", seed, kills)
	rng := rand.New(rand.NewPCG(seed, 19))

	dir := t.TempDir()
	c := startServeChild(t, dir, "--sync", syncMode)
	admin := adminClient(t, c.base, dir)
	const workers = 4
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	var ws []client
	for i := range workers {
		ws = append(ws, agentClient(t, admin, "p1", fmt.Sprintf("w%d", i), 1))
	}

	h := &crashClient{t: t, hc: &http.Client{Timeout: 10 * time.Second}, base: c.base, changed: make(chan struct{})}
	var mu sync.Mutex
	var acks []ack
	record := func(a ack) {
		mu.Lock()
		acks = append(acks, a)
		mu.Unlock()
	}
	nacks := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acks)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runLifecycles(ctx, t, h, req.headers, ws[i].headers, i, record)
		}()
	}

	var maxReady time.Duration
	damage := []string{"truncated", "zeroed", "random"}
	healed := 0
	for round := range kills {
		target := nacks() + 1 + rng.IntN(40)
		checkfor.Until(t, 60*time.Second, "the clients to make progress", func() bool { return nacks() >= target })
		c.kill(t, syscall.SIGKILL, 10*time.Second)
		if round%3 == 2 {
			damageFile(t, filepath.Join(dir, "projections.db"), damage[(round/3)%len(damage)], rng)
			healed++
		}
		c = startServeChild(t, dir, "--sync", syncMode)
		h.setBase(c.base)
		if d := waitReadyz(t, c.base, 30*time.Second); d > maxReady {
			maxReady = d
		}
		if round%3 == 2 && !strings.Contains(c.out.String(), "projection file is damaged") {
			t.Errorf("round %d: serve did not report the damaged projection file:\n%s", round, c.out.String())
		}
	}

	// SIGTERM under load: in-flight requests finish, serve exits 0.
	target := nacks() + 10
	checkfor.Until(t, 60*time.Second, "the clients to make progress", func() bool { return nacks() >= target })
	start := time.Now()
	if code := c.kill(t, syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Errorf("serve exited with %d on SIGTERM under load, want 0:\n%s", code, c.out.String())
	}
	termTook := time.Since(start)
	c = startServeChild(t, dir, "--sync", syncMode)
	h.setBase(c.base)
	waitReadyz(t, c.base, 30*time.Second)
	target = nacks() + 5
	checkfor.Until(t, 60*time.Second, "the clients to make progress", func() bool { return nacks() >= target })
	cancel()
	wg.Wait()

	checkAcks(t, c.base, req.headers, acks)
	waitReady(t, c.base)
	if code := c.kill(t, syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Errorf("serve exited with %d on SIGTERM, want 0", code)
	}
	live := dumpProjections(t, filepath.Join(dir, "projections.db"))
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"replay", "--data", dir}, &out, &out); code != 0 {
		t.Fatalf("replay exited with %d:\n%s", code, out.String())
	}
	if diff := cmp.Diff(live, dumpProjections(t, filepath.Join(dir, "projections.db"))); diff != "" {
		t.Errorf("projections after the kills differ from a fresh replay (-live +replayed):\n%s", diff)
	}
	h.mu.Lock()
	retries := h.retries
	h.mu.Unlock()
	t.Logf("kills %d, damaged files healed %d, acknowledged commands %d (lost 0), retried requests %d, slowest /readyz after a restart %s, SIGTERM under load exited in %s",
		kills, healed, len(acks), retries, maxReady.Round(time.Millisecond), termTook.Round(time.Millisecond))
}

// runLifecycles runs Turn lifecycles for worker i until ctx ends: dispatch
// (with a dispatch_key), claim, three records with a renew after the first,
// finish, each with an
// Idempotency-Key, each retried through kills until answered. Any refusal
// of a retry is an error of the test.
func runLifecycles(ctx context.Context, t *testing.T, h *crashClient, reqH, wH map[string]string, i int, record func(ack)) {
	wid := fmt.Sprintf("w%d", i)
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("%d-%d", i, n)
		status, body, ok := h.send(ctx, reqH, "d-"+id, "POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
			"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", wid), "input": map[string]any{"lifecycle": id},
			"turn_kind": "summarize", "dispatch_key": "k-" + id, "authority": map[string]any{"mode": "root_request", "request_id": id},
		})
		if !ok {
			return
		}
		if status != 200 {
			t.Errorf("dispatch %s = %d %s", id, status, body)
			return
		}
		var tv struct {
			TurnID string `json:"turn_id"`
		}
		json.Unmarshal(body, &tv)
		record(ack{kind: "dispatch", turnID: tv.TurnID, op: id})

		status, body, ok = h.send(ctx, wH, "c-"+id, "POST", "/v3r1/projects/p1/agents/"+wid+"/claims:claim", map[string]any{"agent": agentRef("p1", wid)})
		if !ok {
			return
		}
		var cl struct {
			Claim map[string]any `json:"claim"`
		}
		if status != 200 || json.Unmarshal(body, &cl) != nil || cl.Claim == nil || cl.Claim["turn_id"] != tv.TurnID {
			t.Errorf("claim %s = %d %s, want the claim of %s", id, status, body, tv.TurnID)
			return
		}
		record(ack{kind: "claim", turnID: tv.TurnID})
		for r := 1; r <= 3; r++ {
			op := fmt.Sprintf("%s-%d", id, r)
			status, body, ok = h.send(ctx, wH, "r-"+op, "POST", "/v3r1/projects/p1/turns/"+tv.TurnID+"/semantic-records",
				map[string]any{"claim": cl.Claim, "role": "note", "payload": map[string]any{"op": op}})
			if !ok {
				return
			}
			var rec struct {
				TurnSeq uint64 `json:"turn_seq"`
			}
			if status != 200 || json.Unmarshal(body, &rec) != nil || rec.TurnSeq != uint64(r) {
				t.Errorf("record %s = %d %s, want turn_seq %d", op, status, body, r)
				return
			}
			record(ack{kind: "record", turnID: tv.TurnID, op: op, turnSeq: rec.TurnSeq})
			if r != 1 {
				continue
			}
			status, body, ok = h.send(ctx, wH, "n-"+id, "POST", "/v3r1/projects/p1/claims:renew", map[string]any{"claim": cl.Claim})
			if !ok {
				return
			}
			if status != 200 {
				t.Errorf("renew %s = %d %s", id, status, body)
				return
			}
			record(ack{kind: "renew", turnID: tv.TurnID})
		}
		status, body, ok = h.send(ctx, wH, "f-"+id, "POST", "/v3r1/projects/p1/turns/"+tv.TurnID+":finish",
			map[string]any{"claim": cl.Claim, "outcome": "succeeded"})
		if !ok {
			return
		}
		if status != 200 {
			t.Errorf("finish %s = %d %s (a retried finish must answer what the first one did)", id, status, body)
			return
		}
		record(ack{kind: "finish", turnID: tv.TurnID})
	}
}

// checkAcks checks every acknowledged command against the projections.
func checkAcks(t *testing.T, base string, headers map[string]string, acks []ack) {
	t.Helper()
	c := client{t: t, base: base, headers: headers}
	// Every Turn, once per dispatch_key.
	byInput := map[string]int{}
	states := map[string]string{}
	after := uint64(0)
	for {
		var page struct {
			Items []struct {
				TurnID string         `json:"turn_id"`
				State  string         `json:"state"`
				Input  map[string]any `json:"input"`
			} `json:"items"`
			Next    uint64 `json:"next_after_ledger_seq"`
			HasMore bool   `json:"has_more"`
		}
		json.Unmarshal(c.call("GET", fmt.Sprintf("/v3r1/projects/p1/projection/turns?limit=500&after_ledger_seq=%d", after), nil, 200), &page)
		for _, it := range page.Items {
			byInput[fmt.Sprint(it.Input["lifecycle"])]++
			states[it.TurnID] = it.State
		}
		if !page.HasMore {
			break
		}
		after = page.Next
	}
	for k, n := range byInput {
		if n != 1 {
			t.Errorf("lifecycle %s has %d Turns, want 1 (a retried dispatch was duplicated)", k, n)
		}
	}
	records := map[string][]string{} // turn → ops in turn_seq order
	renewals := map[string]int{}
	for id := range states {
		var feed struct {
			Items []struct {
				Type string `json:"type"`
			} `json:"items"`
		}
		json.Unmarshal(c.call("GET", "/v3r1/projects/p1/turns/"+id+"/feed?limit=500", nil, 200), &feed)
		for _, it := range feed.Items {
			if it.Type == "turn.claim_renewed" {
				renewals[id]++
			}
		}
		if renewals[id] > 1 {
			t.Errorf("turn %s was renewed %d times, want at most once (a retried renew was appended again)", id, renewals[id])
		}
		var ctxPage struct {
			Items []struct {
				TurnSeq uint64         `json:"turn_seq"`
				Payload map[string]any `json:"payload"`
			} `json:"items"`
		}
		json.Unmarshal(c.call("GET", "/v3r1/projects/p1/turns/"+id+"/context?limit=500", nil, 200), &ctxPage)
		seen := map[string]bool{}
		for _, it := range ctxPage.Items {
			op := fmt.Sprint(it.Payload["op"])
			if seen[op] {
				t.Errorf("turn %s holds record %s twice", id, op)
			}
			seen[op] = true
			records[id] = append(records[id], op)
		}
	}
	for _, a := range acks {
		switch a.kind {
		case "dispatch":
			if _, ok := states[a.turnID]; !ok {
				t.Errorf("acknowledged dispatch of %s is lost", a.turnID)
			}
		case "claim":
			if states[a.turnID] == "queued" {
				t.Errorf("acknowledged claim of %s is lost (the Turn is queued)", a.turnID)
			}
		case "record":
			got := records[a.turnID]
			if int(a.turnSeq) > len(got) || got[a.turnSeq-1] != a.op {
				t.Errorf("acknowledged record %s (turn_seq %d) of %s is lost: the Turn holds %v", a.op, a.turnSeq, a.turnID, got)
			}
		case "renew":
			if renewals[a.turnID] != 1 {
				t.Errorf("acknowledged renew of %s is lost", a.turnID)
			}
		case "finish":
			if states[a.turnID] != "finished" {
				t.Errorf("acknowledged finish of %s is lost (state %s)", a.turnID, states[a.turnID])
			}
		}
	}
}

// damageFile spoils the projection file between runs.
func damageFile(t *testing.T, path, how string, rng *rand.Rand) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "truncated":
		// Three pages: well inside the pages bbolt counts as used (bbolt
		// grows the file ahead of use, so half of it may be only spare room).
		err = os.Truncate(path, min(fi.Size()/2, 3*4096))
	case "zeroed", "random":
		var f *os.File
		if f, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
			break
		}
		// Every page but the two meta pages.
		b := make([]byte, fi.Size()-8192)
		if how == "random" {
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
		}
		_, err = f.WriteAt(b, 8192)
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}
