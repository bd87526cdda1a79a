package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/serve"
)

// The linearizability check of claims: many clients claim, renew, record,
// finish, stop and reconcile the Turns of one agent through two serve
// instances on one NATS server, while the clock moves on and claims
// expire, and porcupine checks each history against the sequential model
// below: a few Turns, queued in dispatch order, one agent of capacity
// linCapacity, claims that last linTTLTicks ticks of the clock.
//
// The two instances run in the test process (startService), each with its
// own engine, projections, HTTP server and NATS connection: they share
// nothing but the NATS server, as two serve processes would, and one clock,
// which the test injects (serviceConfig.Kernel.Now) so that claims expire
// when the history says; a serve process has no way to take its clock from
// a test without a hook in the binary.
//
// The clock moves only between rounds, while no request is in flight: a
// tick is an operation of its own in the history, ordered after every
// operation before it and before every one after it. Within a round the
// clients run concurrently.

const (
	linTurns    = 3
	linCapacity = 2
	linWorkers  = 4
	linRounds   = 4 // rounds of each history, with a tick of the clock between two
	linPerRound = 2 // operations per client and round
	// A claim lasts linTTL; the clock moves linTick at each tick, so a claim
	// taken (or renewed) at tick k is live at k+1 and expired from k+2 on.
	linTTL      = 60 * time.Second
	linTick     = 40 * time.Second
	linTTLTicks = 2
)

// linState is the model's state; it is comparable, so == is its equality.
type linState struct {
	clock uint8 // ticks so far
	state [linTurns]uint8
	token [linTurns]string
	exp   [linTurns]uint8 // the tick from which the claim is expired
	seq   [linTurns]uint64
	stop  [linTurns]bool
}

const (
	linQueued uint8 = iota
	linClaimed
	linFinished
)

type linInput struct {
	op    string // claim, renew, record, finish, stop, reconcile, tick
	turn  int
	token string
}

type linOutput struct {
	ok       bool   // applied (200); false: refused with 409
	turn     int    // claim: the Turn claimed, -1 for none
	token    string // claim: the token won
	seq      uint64 // record: turn_seq
	stop     bool   // renew, record: stop_requested
	released uint8  // reconcile: the Turns released, one bit each
}

func linStep(st, in, out any) (bool, any) {
	s, i, o := st.(linState), in.(linInput), out.(linOutput)
	active := 0
	first := -1
	for t := range linTurns {
		if s.state[t] == linClaimed { // expired or not: until released it uses capacity
			active++
		}
		if s.state[t] == linQueued && first < 0 {
			first = t
		}
	}
	held := i.turn >= 0 && s.state[i.turn] == linClaimed
	unexpired := held && s.clock < s.exp[i.turn]
	live := unexpired && s.token[i.turn] == i.token
	switch i.op {
	case "tick":
		s.clock++
		return true, s
	case "claim":
		if o.turn < 0 {
			return first < 0 || active >= linCapacity, s
		}
		if o.turn != first || active >= linCapacity {
			return false, s
		}
		s.state[o.turn], s.token[o.turn], s.exp[o.turn] = linClaimed, o.token, s.clock+linTTLTicks
		return true, s
	case "renew":
		if o.ok != live || (o.ok && o.stop != s.stop[i.turn]) {
			return false, s
		}
		if o.ok {
			s.exp[i.turn] = s.clock + linTTLTicks
		}
		return true, s
	case "record":
		if o.ok != live {
			return false, s
		}
		if !o.ok {
			return true, s
		}
		if o.seq != s.seq[i.turn]+1 || o.stop != s.stop[i.turn] {
			return false, s
		}
		s.seq[i.turn] = o.seq
		return true, s
	case "finish":
		if o.ok != live {
			return false, s
		}
		if o.ok {
			s.state[i.turn], s.token[i.turn] = linFinished, ""
		}
		return true, s
	case "stop":
		switch {
		case s.state[i.turn] == linFinished:
			return !o.ok, s
		case unexpired:
			s.stop[i.turn] = true // the holder is asked to stop
		default: // queued, or held by an expired claim: nobody works on it
			s.state[i.turn], s.token[i.turn], s.stop[i.turn] = linFinished, "", true
		}
		return o.ok, s
	case "reconcile":
		var released uint8
		for t := range linTurns {
			if s.state[t] == linClaimed && s.clock >= s.exp[t] {
				released |= 1 << t
				s.token[t] = ""
				if s.stop[t] {
					s.state[t] = linFinished
				} else {
					s.state[t] = linQueued
				}
			}
		}
		return o.released == released, s
	}
	return false, s
}

var linModel = porcupine.Model{
	Init: func() any { return linState{} },
	Step: linStep,
	DescribeOperation: func(in, out any) string {
		return fmt.Sprintf("%+v -> %+v", in, out)
	},
}

// linHistories is how many histories TestClaimsAreLinearizable checks: 10
// in CI, more with TURNLEDGER_LIN_HISTORIES. TURNLEDGER_LIN_SEED sets the
// seed of their random choices (logged by every run).
func linHistories(t *testing.T) int {
	if v := os.Getenv("TURNLEDGER_LIN_HISTORIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TURNLEDGER_LIN_HISTORIES=%q must be a positive integer", v)
		}
		return n
	}
	return 10
}

// linClock is the clock of both instances: it stands still until the test
// moves it.
type linClock struct{ at atomic.Int64 }

func (c *linClock) now() time.Time          { return time.Unix(0, c.at.Load()).UTC() }
func (c *linClock) advance(d time.Duration) { c.at.Add(int64(d)) }

// linClient sends requests to one of two instances, chosen at random.
type linClient struct {
	hc      *http.Client
	bases   [2]string
	headers map[string]string
}

func (c linClient) send(rng *rand.Rand, method, path string, body any) (int, []byte, error) {
	base := c.bases[rng.IntN(2)]
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

func TestClaimsAreLinearizable(t *testing.T) {
	srv := natstest.Start(t)
	clock := &linClock{}
	clock.at.Store(time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC).UnixNano())
	secret := bytes.Repeat([]byte{7}, 32) // one deployment: one secret key
	var log syncBuffer
	tune := func(cfg *serve.Config) {
		cfg.NATSURL = srv.ClientURL()
		cfg.Kernel.Now, cfg.Kernel.ClaimTTL, cfg.Kernel.SecretKey = clock.now, linTTL, secret
		cfg.ReapInterval = 0 // only the history's reconciles release claims
	}
	a := startTestService(t, t.TempDir(), &log, tune)
	b := startTestService(t, t.TempDir(), &log, tune)
	admin := client{t: t, base: a.URL(), headers: map[string]string{"Authorization": "Bearer " + clusterAdminToken}}
	hc := &http.Client{Timeout: 10 * time.Second}
	n := linHistories(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("TURNLEDGER_LIN_SEED"); v != "" { // to replay a failure's operations
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("TURNLEDGER_LIN_SEED=%q must be an unsigned integer", v)
		}
	}
	t.Logf("seed %d, %d histories", seed, n)
	ops := 0
	tally := map[string]int{}
	for h := range n {
		project := fmt.Sprintf("lin%d", h)
		req := agentClient(t, admin, project, "req", 1, "turns:dispatch")
		w := agentClient(t, admin, project, "w", linCapacity)
		turns := make([]string, linTurns)
		for i := range turns {
			var tv struct {
				TurnID string `json:"turn_id"`
			}
			json.Unmarshal(req.call("POST", "/v3r1/projects/"+project+"/turns:dispatch", map[string]any{
				"requested_by": agentRef(project, "req"), "target_agent": agentRef(project, "w"), "input": map[string]any{"i": i},
				"turn_kind": "summarize", "dispatch_key": fmt.Sprint(i), "authority": map[string]any{"mode": "root_request", "request_id": "r"},
			}, 200), &tv)
			turns[i] = tv.TurnID
		}
		history := linHistory(t, hc, [2]string{a.URL(), b.URL()}, clock, project, turns, req.headers, w.headers, seed+uint64(h))
		ops += len(history)
		for _, op := range history {
			in, out := op.Input.(linInput), op.Output.(linOutput)
			k := in.op
			switch {
			case in.op == "reconcile" && out.released != 0:
				k += " released"
			case in.op == "claim" && out.turn < 0:
				k += " none"
			case !out.ok && in.op != "claim" && in.op != "tick" && in.op != "reconcile":
				k += " refused"
			}
			tally[k]++
		}
		res, info := porcupine.CheckOperationsVerbose(linModel, history, 30*time.Second)
		if res != porcupine.Ok {
			path := filepath.Join(t.TempDir(), "history.html")
			porcupine.VisualizePath(linModel, info, path)
			// The file goes with the test's temporary directory: the
			// history is logged too, in call order, for a failure in CI.
			sorted := slices.Clone(history)
			slices.SortFunc(sorted, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
			for _, op := range sorted {
				t.Logf("client %d [%d, %d] µs: %s", op.ClientId, op.Call/1000, op.Return/1000, linModel.DescribeOperation(op.Input, op.Output))
			}
			t.Fatalf("history %d (%d operations) is %v against the model of one agent's Turns; visualisation in %s", h, len(history), res, path)
		}
	}
	t.Logf("%d histories, %d operations (%v), 0 violations", n, ops, tally)
	if tally["reconcile released"] == 0 {
		t.Errorf("no reconcile released an expired claim in %d histories: the expiry path went unchecked", n)
	}
}

// linHistory records one history of concurrent operations on the project's
// Turns through both instances, in linRounds rounds with a tick of the clock
// between two.
func linHistory(t *testing.T, hc *http.Client, bases [2]string, clock *linClock, project string, turns []string, reqH, wH map[string]string, seed uint64) []porcupine.Operation {
	t.Helper()
	start := time.Now()
	now := func() int64 { return time.Since(start).Nanoseconds() }
	index := map[string]int{}
	for i, id := range turns {
		index[id] = i
	}
	var mu sync.Mutex // guards history and claims
	var history []porcupine.Operation
	type held struct {
		claim map[string]any
		turn  int
	}
	var claims []held // every claim won, for clients that use stale ones
	p := "/v3r1/projects/" + project

	// A client keeps its random source and the claim it holds across rounds.
	type linWorker struct {
		id   int
		rng  *rand.Rand
		c    linClient
		mine *held
		// next picks the next operation; nil skips this round's rest (a
		// worker that stalls while it holds a claim, so that it expires).
		next func(w *linWorker) (in linInput, method, path string, body any, ok bool)
	}
	worker := func(w *linWorker) (linInput, string, string, any, bool) {
		use := w.mine
		mu.Lock()
		if len(claims) > 0 && w.rng.IntN(5) == 0 {
			use = &claims[w.rng.IntN(len(claims))] // someone's claim, maybe stale or expired
		}
		mu.Unlock()
		if use == nil {
			return linInput{op: "claim", turn: -1}, "POST", p + "/agents/w/claims:claim", map[string]any{"agent": agentRef(project, "w")}, true
		}
		if use == w.mine && w.rng.IntN(3) == 0 {
			return linInput{}, "", "", nil, false // stalls for the rest of the round
		}
		in := linInput{turn: use.turn, token: use.claim["token"].(string)}
		id := turns[use.turn]
		switch k := w.rng.IntN(8); {
		case k < 4:
			in.op = "record"
			return in, "POST", p + "/turns/" + id + "/semantic-records", map[string]any{"claim": use.claim, "role": "note", "payload": map[string]any{"k": k}}, true
		case k < 6:
			in.op = "renew"
			return in, "POST", p + "/claims:renew", map[string]any{"claim": use.claim}, true
		default:
			in.op = "finish"
			return in, "POST", p + "/turns/" + id + ":finish", map[string]any{"claim": use.claim, "outcome": "succeeded"}, true
		}
	}
	requester := func(w *linWorker) (linInput, string, string, any, bool) {
		if w.rng.IntN(2) == 0 {
			return linInput{op: "reconcile", turn: -1}, "POST", p + "/claims:reconcile-expired", nil, true
		}
		i := w.rng.IntN(linTurns)
		return linInput{op: "stop", turn: i}, "POST", p + "/management/turns/" + turns[i] + ":stop", map[string]any{"requested_by": agentRef(project, "req")}, true
	}
	var clients []*linWorker
	for i := range linWorkers {
		clients = append(clients, &linWorker{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i))), c: linClient{hc: hc, bases: bases, headers: wH}, next: worker})
	}
	clients = append(clients, &linWorker{id: linWorkers, rng: rand.New(rand.NewPCG(seed, linWorkers)), c: linClient{hc: hc, bases: bases, headers: reqH}, next: requester})

	round := func(w *linWorker) {
		for range linPerRound {
			in, method, path, b, ok := w.next(w)
			if !ok {
				return
			}
			call := now()
			status, data, err := w.c.send(w.rng, method, path, b)
			ret := now()
			if err != nil || (status != 200 && status != 409) {
				t.Errorf("%s %s = %d %s %v, want 200 or 409", method, path, status, data, err)
				return
			}
			out := linOutput{ok: status == 200, turn: -1}
			switch in.op {
			case "claim":
				var r struct {
					Claim map[string]any `json:"claim"`
				}
				json.Unmarshal(data, &r)
				if r.Claim != nil {
					out.turn, out.token = index[r.Claim["turn_id"].(string)], r.Claim["token"].(string)
					w.mine = &held{claim: r.Claim, turn: out.turn}
					mu.Lock()
					claims = append(claims, *w.mine)
					mu.Unlock()
				}
			case "renew", "record":
				var r struct {
					TurnSeq       uint64 `json:"turn_seq"`
					StopRequested bool   `json:"stop_requested"`
				}
				json.Unmarshal(data, &r)
				out.seq, out.stop = r.TurnSeq, r.StopRequested
			case "finish":
				if w.mine != nil && in.token == w.mine.claim["token"] {
					w.mine = nil // finished, or (409) no longer live
				}
			case "reconcile":
				var r struct {
					Released []string `json:"released_turn_ids"`
				}
				json.Unmarshal(data, &r)
				for _, id := range r.Released {
					out.released |= 1 << index[id]
				}
			}
			if status == 409 && w.mine != nil && in.token == w.mine.claim["token"] {
				w.mine = nil // the claim is no longer live: claim anew
			}
			if in.op == "claim" && status != 200 {
				t.Errorf("claim = %d %s", status, data)
				return
			}
			mu.Lock()
			history = append(history, porcupine.Operation{ClientId: w.id, Input: in, Call: call, Output: out, Return: ret})
			mu.Unlock()
		}
	}
	for r := range linRounds {
		if r > 0 {
			// No request is in flight: the tick is ordered between the rounds.
			call := now()
			clock.advance(linTick)
			history = append(history, porcupine.Operation{ClientId: linWorkers + 1, Input: linInput{op: "tick", turn: -1}, Call: call, Output: linOutput{ok: true, turn: -1}, Return: now()})
		}
		var wg sync.WaitGroup
		for _, w := range clients {
			wg.Go(func() { round(w) })
		}
		wg.Wait()
	}
	return history
}
