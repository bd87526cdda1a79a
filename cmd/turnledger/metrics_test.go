package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tl "github.com/turnledger/turnledger/client"
)

// offsetClock is the real clock moved forward by what a test advances it.
type offsetClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *offsetClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// gauge reads the value of an unlabelled sample from /metrics.
func gauge(t *testing.T, c *tl.Client, name string) float64 {
	t.Helper()
	text, err := c.Metrics(context.Background())
	if err != nil {
		t.Fatalf("GET /metrics = %v", err)
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics line %q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// TestServeMetricsCountLiveAndExpiredClaims: serve's gauges of claims follow
// the claims: live while claimed, expired-but-unreleased once the clock has
// passed their expiry (the reaper off), and neither once the reaper's round
// released them. The clock is injected: nothing sleeps for an expiry.
func TestServeMetricsCountLiveAndExpiredClaims(t *testing.T) {
	clk := &offsetClock{}
	cfg := defaultServiceConfig()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	cfg.ReapInterval = 0 // rounds run by the test
	cfg.Kernel.Now = clk.Now
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := startService(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	adm, err := tl.New(s.URL(), tl.WithAdminToken(engineAdminToken(t, cfg.DataDir)))
	if err != nil {
		t.Fatal(err)
	}
	capacity := 2
	mat, err := adm.RequestAgentCredentialTokens(ctx, "demo", tl.TokensRequest{AgentID: "w", Spec: &tl.ProfileSpec{Capacity: &capacity}})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := tl.New(s.URL(), tl.WithAgent("demo", "w", mat.AgentCredentialToken))
	for _, key := range []string{"a", "b"} {
		if _, err := adm.DispatchTurn(ctx, "demo", tl.DispatchRequest{
			RequestedBy: tl.AgentRef{ProjectID: "demo", AgentID: "w"}, TargetAgent: tl.AgentRef{ProjectID: "demo", AgentID: "w"},
			TurnKind: "summarize", DispatchKey: key, Authority: tl.Root("r-" + key),
		}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func() {
		t.Helper()
		if res, err := w.ClaimTurn(ctx, "demo", "w", 0); err != nil || res == nil {
			t.Fatalf("ClaimTurn = %+v, %v; want a claim", res, err)
		}
	}
	want := func(when string, live, expired float64) {
		t.Helper()
		if got := gauge(t, adm, "turnledger_claims_live"); got != live {
			t.Errorf("%s: turnledger_claims_live = %v, want %v", when, got, live)
		}
		if got := gauge(t, adm, "turnledger_claims_expired_unreleased"); got != expired {
			t.Errorf("%s: turnledger_claims_expired_unreleased = %v, want %v", when, got, expired)
		}
	}
	want("before any claim", 0, 0)
	claim()
	claim()
	want("with two claims", 2, 0)
	clk.Advance(cfg.Kernel.ClaimTTL + time.Second)
	want("past the claims' expiry", 0, 2)
	if n := s.reaper.Once(ctx); n != 2 {
		t.Errorf("reaper round released %d claims, want 2", n)
	}
	want("after the reaper's round", 0, 0)
	claim()
	want("with a new claim", 1, 0)
}

// nonLoopbackDialer dials from an address of this machine that is not a
// loopback one: a connection to 127.0.0.1 made with it reaches a server that
// listens on loopback only, yet the server sees a non-loopback peer.
func nonLoopbackDialer(t *testing.T) *http.Client {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: n.IP}}
			return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
		}
	}
	t.Fatalf("this machine has no IPv4 address but loopback ones (%v): the test needs one to make a request that serve does not see as from loopback", addrs)
	return nil
}

// TestServeMetricsPublic: /metrics is served to loopback clients, and to
// others only with serve --metrics-public. serve listens on 127.0.0.1 only;
// the other client connects to it from this machine's non-loopback address.
func TestServeMetricsPublic(t *testing.T) {
	far := nonLoopbackDialer(t)
	for _, tc := range []struct {
		flags   []string
		farWant int
	}{
		{nil, http.StatusForbidden},
		{[]string{"--metrics-public"}, http.StatusOK},
	} {
		base, _ := startEngine(t, t.TempDir(), "127.0.0.1:0", tc.flags...)
		for _, c := range []struct {
			name string
			hc   *http.Client
			want int
		}{
			{"a loopback client", http.DefaultClient, http.StatusOK},
			{"a non-loopback address", far, tc.farWant},
		} {
			resp, err := c.hc.Get(base + "/metrics")
			if err != nil {
				t.Fatalf("serve %v: GET /metrics from %s: %v", tc.flags, c.name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("serve %v: GET /metrics from %s = %d %s, want %d", tc.flags, c.name, resp.StatusCode, body, c.want)
			}
			if c.want == http.StatusOK && !strings.Contains(string(body), "turnledger_claims_live") {
				t.Errorf("serve %v: /metrics from %s holds no turnledger_claims_live:\n%.300s", tc.flags, c.name, body)
			}
		}
		// Requests other than /metrics are not refused for the address.
		resp, err := far.Get(base + "/healthz")
		if err != nil {
			t.Fatalf("serve %v: GET /healthz from a non-loopback address: %v", tc.flags, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("serve %v: GET /healthz from a non-loopback address = %d, want 200", tc.flags, resp.StatusCode)
		}
	}
}
