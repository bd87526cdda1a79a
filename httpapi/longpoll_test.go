package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/natstest"
)

// claimOutcome is what a (long-poll) claim request answered.
type claimOutcome struct {
	status int
	body   []byte
	err    error
}

// claimWith sends a claim for who to the instance at url with the query q.
func claimWith(ctx context.Context, url string, who as, q string) claimOutcome {
	body, _ := json.Marshal(map[string]any{"agent": ref(who.project, who.agent), "meta": nil, "trace": nil})
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v3r1/projects/"+who.project+"/agents/"+who.agent+"/claims:claim"+q, bytes.NewReader(body))
	if err != nil {
		return claimOutcome{err: err}
	}
	req.Header.Set(httpapi.HeaderProject, who.project)
	req.Header.Set(httpapi.HeaderAgent, who.agent)
	req.Header.Set("Authorization", "Bearer "+who.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return claimOutcome{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return claimOutcome{status: resp.StatusCode, body: bytes.TrimSpace(data), err: err}
}

func TestClaimWaitValidation(t *testing.T) {
	e := newEnv(t)
	w := e.register("p", "w", 1)
	for _, q := range []string{"?wait=abc", "?wait=61s", "?wait=-1s", "?wait=1s&wait=2s", "?foo=1", "?wait"} {
		got := claimWith(context.Background(), e.url, w, q)
		if got.err != nil || got.status != 422 {
			t.Errorf("claim%s = %d %s %v, want 422", q, got.status, got.body, got.err)
		}
	}
	for _, q := range []string{"", "?wait=0s", "?wait=1ms"} {
		got := claimWith(context.Background(), e.url, w, q)
		if got.err != nil || got.status != 200 || string(got.body) != "null" {
			t.Errorf("claim%s with nothing queued = %d %s %v, want 200 null", q, got.status, got.body, got.err)
		}
	}
}

// TestClaimLongPollAcrossInstances: an agent waiting on instance B gets the
// Turn dispatched through instance A, woken by B's projection.
func TestClaimLongPollAcrossInstances(t *testing.T) {
	srv := natstest.Start(t)
	clk := &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	a := newEnvOn(t, srv.ClientURL(), clk)
	b := newEnvOn(t, srv.ClientURL(), clk)
	boss := a.register("p", "boss", 1, "turns:dispatch")
	w := a.register("p", "w", 1)

	done := make(chan claimOutcome, 1)
	go func() { done <- claimWith(context.Background(), b.url, w, "?wait=30s") }()
	checkfor.Until(t, 10*time.Second, "the claim to wait on instance B", func() bool {
		n, _ := b.api.Waiting()
		return n == 1
	})
	tv := a.dispatch(boss, "w", "k1")

	var got claimOutcome
	select {
	case got = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting claim did not answer after a dispatch through the other instance")
	}
	var c claimed
	if got.err != nil || got.status != 200 || json.Unmarshal(got.body, &c) != nil || c.Turn.TurnID != tv.TurnID {
		t.Fatalf("long-poll claim = %d %s %v, want the Turn %s", got.status, got.body, got.err, tv.TurnID)
	}
	if n, _ := b.api.Waiting(); n != 0 {
		t.Errorf("after answering, %d long polls are counted, want 0", n)
	}
}

// TestClaimLongPollWokenByResume: a suspended Turn resumed later wakes the
// waiting target; a finished Turn of the agent frees its capacity and wakes
// it too.
func TestClaimLongPollWokenByResume(t *testing.T) {
	e := newEnv(t)
	boss := e.register("p", "boss", 1, "turns:dispatch")
	w := e.register("p", "w", 1)
	e.dispatch(boss, "w", "k1")
	c := e.claim(w)
	if c == nil {
		t.Fatal("claim = null, want the Turn")
	}
	e.must(w, "POST", "/v3r1/projects/p/turns/"+c.Turn.TurnID+":suspend", map[string]any{"claim": c.Claim}, 200)

	done := make(chan claimOutcome, 1)
	go func() { done <- claimWith(context.Background(), e.url, w, "?wait=30s") }()
	checkfor.Until(t, 10*time.Second, "the claim to wait", func() bool { n, _ := e.api.Waiting(); return n == 1 })
	e.must(asAdmin, "POST", "/v3r1/projects/p/turns/"+c.Turn.TurnID+":resume", map[string]any{"requested_by": ref("p", "boss")}, 200)
	got := <-done
	var c2 claimed
	if got.status != 200 || json.Unmarshal(got.body, &c2) != nil || c2.Turn.TurnID != c.Turn.TurnID {
		t.Fatalf("long-poll claim after resume = %d %s %v, want Turn %s", got.status, got.body, got.err, c.Turn.TurnID)
	}
}

// TestClaimLongPollEnds: a wait ends with null when it passes, when the
// client goes away, and when the server stops waiting.
func TestClaimLongPollEnds(t *testing.T) {
	e := newEnv(t)
	w := e.register("p", "w", 1)

	if got := claimWith(context.Background(), e.url, w, "?wait=50ms"); got.status != 200 || string(got.body) != "null" {
		t.Errorf("claim?wait=50ms with nothing queued = %d %s %v, want 200 null", got.status, got.body, got.err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan claimOutcome, 1)
	go func() { done <- claimWith(ctx, e.url, w, "?wait=60s") }()
	checkfor.Until(t, 10*time.Second, "the claim to wait", func() bool { n, _ := e.api.Waiting(); return n == 1 })
	cancel()
	<-done
	checkfor.Until(t, 10*time.Second, "the server to drop the abandoned wait", func() bool { n, _ := e.api.Waiting(); return n == 0 })

	go func() { done <- claimWith(context.Background(), e.url, w, "?wait=60s") }()
	checkfor.Until(t, 10*time.Second, "the claim to wait", func() bool { n, _ := e.api.Waiting(); return n == 1 })
	e.api.StopWaiting()
	if got := <-done; got.status != 200 || string(got.body) != "null" {
		t.Errorf("waiting claim after StopWaiting = %d %s %v, want 200 null", got.status, got.body, got.err)
	}
}

// TestClaimLongPollWokenByAnExpiredClaimReleased: an agent whose only slot is
// held by an expired claim waits; the release of that claim — by
// claims:reconcile-expired, or by the background reaper's round — queues the
// Turn again and frees the slot, which wakes the waiting claim with the
// Turn. The clock is injected: the claim expires without sleeping.
func TestClaimLongPollWokenByAnExpiredClaimReleased(t *testing.T) {
	for _, release := range []struct {
		name string
		do   func(e *env)
	}{
		{"claims:reconcile-expired", func(e *env) {
			e.must(asAdmin, "POST", "/v3r1/projects/p/claims:reconcile-expired", nil, 200)
		}},
		{"the reaper", func(e *env) {
			r := engine.NewReaper(e.engine, e.store, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if n := r.Once(context.Background()); n != 1 {
				e.t.Errorf("reaper round released %d claims, want 1", n)
			}
		}},
	} {
		t.Run(release.name, func(t *testing.T) {
			e := newEnv(t)
			boss := e.register("p", "boss", 1, "turns:dispatch")
			w := e.register("p", "w", 1)
			tv := e.dispatch(boss, "w", "k1")
			if c := e.claim(w); c == nil || c.Turn.TurnID != tv.TurnID {
				t.Fatalf("claim = %+v, want Turn %s", c, tv.TurnID)
			}
			e.clock.Advance(engine.DefaultConfig().ClaimTTL + time.Second) // the claim has expired, but nobody released it

			done := make(chan claimOutcome, 1)
			go func() { done <- claimWith(context.Background(), e.url, w, "?wait=30s") }()
			checkfor.Until(t, 10*time.Second, "the claim to wait", func() bool { n, _ := e.api.Waiting(); return n == 1 })
			select {
			case got := <-done:
				t.Fatalf("the claim answered %d %s before the expired claim was released, want it to wait", got.status, got.body)
			default:
			}
			release.do(e)

			var got claimOutcome
			select {
			case got = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the waiting claim did not answer after the expired claim was released")
			}
			var c claimed
			if got.err != nil || got.status != 200 || json.Unmarshal(got.body, &c) != nil || c.Turn.TurnID != tv.TurnID {
				t.Fatalf("long-poll claim after the release = %d %s %v, want Turn %s again", got.status, got.body, got.err, tv.TurnID)
			}
		})
	}
}
