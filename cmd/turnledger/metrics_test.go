package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	tl "github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/testclock"
	"github.com/turnledger/turnledger/serve"
)

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
	clk := &testclock.Offset{}
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	cfg.ReapInterval = 0 // rounds run by the test
	cfg.Kernel.Now = clk.Now
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := serve.Start(t.Context(), cfg)
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
	if n := s.Reaper().Once(ctx); n != 2 {
		t.Errorf("reaper round released %d claims, want 2", n)
	}
	want("after the reaper's round", 0, 0)
	claim()
	want("with a new claim", 1, 0)
}

// nonLoopbackDialer dials from an address of this machine that is not a
// loopback one: a connection to 127.0.0.1 made with it reaches a server that
// listens on loopback only, yet the server sees a non-loopback peer.
// TestServeMetricsPublic: /metrics is served to loopback clients, and to
// others only with serve --metrics-public. Tests use loopback addresses
// only, so the other client is a request handed to serve's own handler with
// a documentation address (192.0.2.10, RFC 5737) as its peer: no packet
// leaves the machine. The loopback client goes over TCP.
func TestServeMetricsPublic(t *testing.T) {
	for _, open := range []bool{false, true} {
		cfg := serve.DefaultConfig()
		cfg.Addr, cfg.DataDir, cfg.MetricsOpen = "127.0.0.1:0", t.TempDir(), open
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		s, err := serve.Start(t.Context(), cfg)
		if err != nil {
			t.Fatalf("startService = %v", err)
		}
		t.Cleanup(func() { s.Close() })
		far := func(path string) (int, string) {
			req := httptest.NewRequest("GET", path, nil)
			req.RemoteAddr = "192.0.2.10:40000"
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			return rec.Code, rec.Body.String()
		}
		resp, err := http.Get(s.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "turnledger_claims_live") {
			t.Errorf("metrics-public %v: GET /metrics from loopback = %d %.200s, want 200 with turnledger_claims_live", open, resp.StatusCode, body)
		}
		want := http.StatusForbidden
		if open {
			want = http.StatusOK
		}
		if code, body := far("/metrics"); code != want {
			t.Errorf("metrics-public %v: GET /metrics from 192.0.2.10 = %d %.200s, want %d", open, code, body, want)
		}
		// Requests other than /metrics are not refused for the address.
		if code, body := far("/healthz"); code != http.StatusOK {
			t.Errorf("metrics-public %v: GET /healthz from 192.0.2.10 = %d %.200s, want 200", open, code, body)
		}
	}
	// serve takes it as a flag.
	if code, out, _ := runTurnledger(t, "serve", "--help"); code != 0 || !strings.Contains(out, "-metrics-public") {
		t.Errorf("serve --help = %d, does not document --metrics-public:\n%s", code, out)
	}
}
