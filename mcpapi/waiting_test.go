package mcpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// claimAsync calls claim_turn with wait_s in the background and sends what
// it answered.
func claimAsync(cs *mcp.ClientSession, waitS float64) <-chan claimed {
	got := make(chan claimed, 1)
	go func() {
		var c claimed
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "claim_turn", Arguments: map[string]any{"wait_s": waitS}})
		if err == nil && !res.IsError {
			data, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(data, &c)
		}
		got <- c
	}()
	return got
}

// listen opens a 2026-07-28 subscriptions/listen stream to the resource of
// a Turn and answers once it is acknowledged; the stream ends when ctx is
// done or the server ends it (ended is closed then).
func (e *env) listen(ctx context.Context, project, agent, token, turnID string) (ended <-chan struct{}) {
	e.t.Helper()
	resp := e.openListen(ctx, project, agent, token, 1, "turnledger://turns/"+turnID)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "notifications/subscriptions/acknowledged") {
			break
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		for sc.Scan() {
		}
	}()
	return done
}

// Waiting MCP requests hold no in-flight slot: with a bound of two requests
// per project (three per instance), three 2025-11-25 sessions (each with
// its GET stream), two claim_turn calls waiting (one of each era) and a
// subscriptions/listen stream to a Turn all wait at once, and a dispatch_turn, a
// get_turn and an HTTP request of the project are still served; the
// dispatches wake the waiting claims.
func TestWaitingRequestsHoldNoSlots(t *testing.T) {
	e := newEnvWith(t, func(c *httpapi.Config) { c.MaxProjectInFlight, c.MaxInFlight = 2, 3 })
	reqTok := e.agent("p1", "req", false, "turns:dispatch")
	w1Tok := e.agent("p1", "w1", true)
	w2Tok := e.agent("p1", "w2", true)
	e.agent("p1", "idle", true)

	// settle waits until no request is in flight: a client may send its
	// next request as soon as it has read an answer, before the server's
	// handler has returned and given its slot back.
	settle := func() {
		t.Helper()
		checkfor.Until(t, 10*time.Second, "no request in flight", func() bool { return e.api.InFlight("p1") == 0 && e.api.InFlight("") == 0 })
	}
	requester := e.client("p1", "req", reqTok, "2025-11-25", nil)
	var d0 turnView // a Turn nobody claims, to listen to
	mustCall(t, requester, "dispatch_turn", map[string]any{"target_agent_id": "idle", "turn_kind": "summarize", "input": map[string]any{}}, &d0)
	settle()
	w1 := e.client("p1", "w1", w1Tok, "2025-11-25", nil)
	settle()
	e.client("p1", "w2", w2Tok, "2025-11-25", nil)
	checkfor.Until(t, 10*time.Second, "three GET streams", func() bool { _, s := e.mcp.Waiting(); return s == 3 })
	settle()
	w2 := e.client("p1", "w2", w2Tok, "2026-07-28", nil)
	settle()

	got1 := claimAsync(w1, 30)
	got2 := claimAsync(w2, 30)
	checkfor.Until(t, 10*time.Second, "two waiting claims", func() bool { c, _ := e.mcp.Waiting(); return c == 2 })
	settle()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.listen(ctx, "p1", "req", reqTok, d0.TurnID)
	// The SDK acknowledges a listen as it starts its handler: wait for it.
	checkfor.Until(t, 10*time.Second, "the listen stream", func() bool { _, s := e.mcp.Waiting(); return s == 4 })
	if p, i := e.api.InFlight("p1"), e.api.InFlight(""); p != 0 || i != 0 {
		t.Errorf("in flight with only waiting requests: project %d, instance %d; want 0, 0", p, i)
	}

	var d1, d2, got turnView
	mustCall(t, requester, "dispatch_turn", map[string]any{"target_agent_id": "w1", "turn_kind": "summarize", "input": map[string]any{"n": 1}}, &d1)
	mustCall(t, requester, "get_turn", map[string]any{"turn_id": d1.TurnID}, &got)
	e.admin("GET", "/v3r1/projects/p1/turns/"+d1.TurnID, nil, &got)
	mustCall(t, requester, "dispatch_turn", map[string]any{"target_agent_id": "w2", "turn_kind": "summarize", "input": map[string]any{"n": 2}}, &d2)
	for _, w := range []struct {
		got  <-chan claimed
		want string
	}{{got1, d1.TurnID}, {got2, d2.TurnID}} {
		select {
		case c := <-w.got:
			if c.Turn == nil || c.Turn.TurnID != w.want {
				t.Errorf("waiting claim_turn = %+v, want Turn %s", c, w.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the waiting claim_turn did not get Turn %s", w.want)
		}
	}
}

// StopWaiting (serve's shutdown) ends the waiting claims, which answer
// nothing claimed, and the streams.
func TestStopWaitingEndsWaits(t *testing.T) {
	e := newEnv(t)
	wTok := e.agent("p1", "w", true, "turns:dispatch")
	e.agent("p1", "idle", true)
	old := e.client("p1", "w", wTok, "2025-11-25", nil)
	var d0 turnView // a Turn nobody claims, to listen to
	mustCall(t, old, "dispatch_turn", map[string]any{"target_agent_id": "idle", "turn_kind": "summarize", "input": map[string]any{}}, &d0)
	checkfor.Until(t, 10*time.Second, "the GET stream", func() bool { _, s := e.mcp.Waiting(); return s == 1 })
	got := claimAsync(old, 60)
	checkfor.Until(t, 10*time.Second, "the waiting claim", func() bool { c, _ := e.mcp.Waiting(); return c == 1 })
	ended := e.listen(context.Background(), "p1", "w", wTok, d0.TurnID)
	checkfor.Until(t, 10*time.Second, "the listen stream", func() bool { _, s := e.mcp.Waiting(); return s == 2 })

	e.mcp.StopWaiting()
	select {
	case c := <-got:
		if c.Claim != nil || c.Turn != nil {
			t.Errorf("claim_turn stopped by StopWaiting = %+v, want nothing claimed", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("claim_turn still waits after StopWaiting")
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscriptions/listen stream is still open after StopWaiting")
	}
	checkfor.Until(t, 10*time.Second, "no stream open", func() bool { c, s := e.mcp.Waiting(); return c == 0 && s == 0 })
}
