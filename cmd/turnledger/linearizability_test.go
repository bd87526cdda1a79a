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
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/turnledger/turnledger/internal/natstest"
)

// The linearizability check of claims: many clients claim, renew, record,
// finish, stop and reconcile the Turns of one agent through two serve
// instances on one NATS server, and porcupine checks each history against
// the sequential model below: a few Turns, queued in dispatch order, one
// agent of capacity linCapacity.

const (
	linTurns    = 3
	linCapacity = 2
	linWorkers  = 4
	linOps      = 8 // per worker and history
)

// linState is the model's state; it is comparable, so == is its equality.
type linState struct {
	state [linTurns]uint8 // 0 queued, 1 claimed, 2 finished
	token [linTurns]string
	seq   [linTurns]uint64
	stop  [linTurns]bool
}

const (
	linQueued uint8 = iota
	linClaimed
	linFinished
)

type linInput struct {
	op    string // claim, renew, record, finish, stop, reconcile
	turn  int
	token string
}

type linOutput struct {
	ok       bool   // applied (200); false: refused with 409
	turn     int    // claim: the Turn claimed, -1 for none
	token    string // claim: the token won
	seq      uint64 // record: turn_seq
	stop     bool   // renew, record: stop_requested
	released int    // reconcile
}

func linStep(st, in, out any) (bool, any) {
	s, i, o := st.(linState), in.(linInput), out.(linOutput)
	active := 0
	first := -1
	for t := range linTurns {
		if s.state[t] == linClaimed {
			active++
		}
		if s.state[t] == linQueued && first < 0 {
			first = t
		}
	}
	live := i.turn >= 0 && s.state[i.turn] == linClaimed && s.token[i.turn] == i.token
	switch i.op {
	case "claim":
		if o.turn < 0 {
			return first < 0 || active >= linCapacity, s
		}
		if o.turn != first || active >= linCapacity {
			return false, s
		}
		s.state[o.turn], s.token[o.turn] = linClaimed, o.token
		return true, s
	case "renew":
		return o.ok == live && (!o.ok || o.stop == s.stop[i.turn]), s
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
		switch s.state[i.turn] {
		case linFinished:
			return !o.ok, s
		case linQueued:
			s.state[i.turn] = linFinished
		case linClaimed:
			s.stop[i.turn] = true
		}
		return o.ok, s
	case "reconcile":
		// No claim expires within a history (the TTL is a minute).
		return o.released == 0, s
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
// in CI, more with TURNLEDGER_LIN_HISTORIES.
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

// linClient sends requests to one of two instances, chosen at random.
type linClient struct {
	hc      *http.Client
	bases   [2]string
	headers map[string]string
}

func (c linClient) send(rng *rand.Rand, mu *sync.Mutex, method, path string, body any) (int, []byte, error) {
	mu.Lock()
	base := c.bases[rng.IntN(2)]
	mu.Unlock()
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
	dirA, dirB := t.TempDir(), t.TempDir()
	baseA, _ := startEngine(t, dirA, "127.0.0.1:0", "--nats-url", srv.ClientURL())
	// One deployment: the instances share the admin token and the secret key.
	for _, f := range []string{"admin-token", "secret-key"} {
		b, err := os.ReadFile(filepath.Join(dirA, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirB, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	baseB, _ := startEngine(t, dirB, "127.0.0.1:0", "--nats-url", srv.ClientURL())
	admin := adminClient(t, baseA, dirA)
	hc := &http.Client{Timeout: 10 * time.Second}
	n := linHistories(t)
	seed := uint64(time.Now().UnixNano())
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
		history := linHistory(t, hc, [2]string{baseA, baseB}, project, turns, req.headers, w.headers, seed+uint64(h))
		ops += len(history)
		for _, op := range history {
			k := op.Input.(linInput).op
			if !op.Output.(linOutput).ok {
				k += " refused"
			}
			tally[k]++
		}
		res, info := porcupine.CheckOperationsVerbose(linModel, history, 30*time.Second)
		if res != porcupine.Ok {
			path := filepath.Join(t.TempDir(), "history.html")
			porcupine.VisualizePath(linModel, info, path)
			t.Fatalf("history %d (%d operations) is %v against the model of one agent's Turns; visualisation in %s", h, len(history), res, path)
		}
	}
	t.Logf("%d histories, %d operations (%v), 0 violations", n, ops, tally)
}

// linHistory records one history of concurrent operations on the project's
// Turns through both instances.
func linHistory(t *testing.T, hc *http.Client, bases [2]string, project string, turns []string, reqH, wH map[string]string, seed uint64) []porcupine.Operation {
	t.Helper()
	start := time.Now()
	now := func() int64 { return time.Since(start).Nanoseconds() }
	index := map[string]int{}
	for i, id := range turns {
		index[id] = i
	}
	var mu sync.Mutex // guards history, tokens and the rngs' shared use of bases
	var history []porcupine.Operation
	type held struct {
		claim map[string]any
		turn  int
	}
	var tokens []held // every claim won, for clients that use stale ones
	p := "/v3r1/projects/" + project
	var wg sync.WaitGroup
	run := func(client int, hdr map[string]string, body func(rng *rand.Rand, mine *held) (linInput, string, string, any)) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, uint64(client)))
		c := linClient{hc: hc, bases: bases, headers: hdr}
		var mine *held
		for range linOps {
			in, method, path, b := body(rng, mine)
			call := now()
			status, data, err := c.send(rng, &mu, method, path, b)
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
					mine = &held{claim: r.Claim, turn: out.turn}
					mu.Lock()
					tokens = append(tokens, *mine)
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
				if mine != nil && in.token == mine.claim["token"] {
					mine = nil // finished, or (409) no longer live
				}
			case "reconcile":
				var r struct {
					Released []string `json:"released_turn_ids"`
				}
				json.Unmarshal(data, &r)
				out.released = len(r.Released)
			}
			if status == 409 && mine != nil && in.token == mine.claim["token"] {
				mine = nil // the claim is no longer live: claim anew
			}
			if in.op == "claim" && status != 200 {
				t.Errorf("claim = %d %s", status, data)
				return
			}
			mu.Lock()
			history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
			mu.Unlock()
		}
	}
	for i := range linWorkers {
		wg.Add(1)
		go run(i, wH, func(rng *rand.Rand, mine *held) (linInput, string, string, any) {
			use := mine
			mu.Lock()
			if len(tokens) > 0 && rng.IntN(5) == 0 {
				use = &tokens[rng.IntN(len(tokens))] // someone's claim, maybe stale
			}
			mu.Unlock()
			if use == nil {
				return linInput{op: "claim", turn: -1}, "POST", p + "/agents/w/claims:claim", map[string]any{"agent": agentRef(project, "w")}
			}
			in := linInput{turn: use.turn, token: use.claim["token"].(string)}
			id := turns[use.turn]
			switch k := rng.IntN(8); {
			case k < 4:
				in.op = "record"
				return in, "POST", p + "/turns/" + id + "/semantic-records", map[string]any{"claim": use.claim, "role": "note", "payload": map[string]any{"k": k}}
			case k < 6:
				in.op = "renew"
				return in, "POST", p + "/claims:renew", map[string]any{"claim": use.claim}
			default:
				in.op = "finish"
				return in, "POST", p + "/turns/" + id + ":finish", map[string]any{"claim": use.claim, "outcome": "succeeded"}
			}
		})
	}
	wg.Add(1)
	go run(linWorkers, reqH, func(rng *rand.Rand, _ *held) (linInput, string, string, any) {
		if rng.IntN(3) == 0 {
			return linInput{op: "reconcile", turn: -1}, "POST", p + "/claims:reconcile-expired", nil
		}
		i := rng.IntN(linTurns)
		return linInput{op: "stop", turn: i}, "POST", p + "/management/turns/" + turns[i] + ":stop", map[string]any{"requested_by": agentRef(project, "req")}
	})
	wg.Wait()
	return history
}
