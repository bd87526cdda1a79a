package authn_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
	"github.com/turnledger/turnledger/authn/natsbus"
	"github.com/turnledger/turnledger/internal/checkfor"
)

func TestCORS(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeIDP, mutate: func(c *authn.Config) {
		c.CORSAllowedOrigins = []string{"https://app.example.test"}
	}})
	cases := []struct {
		origin    string
		wantAllow string
	}{
		{"https://app.example.test", "https://app.example.test"},
		{"https://evil.example.test", ""},
		{"http://app.example.test", ""},
		{"https://app.example.test:8443", ""},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest("OPTIONS", e.http.URL+"/api/v1/auth/me", nil)
		req.Header.Set("Origin", tc.origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != tc.wantAllow {
			t.Errorf("preflight from %s: Access-Control-Allow-Origin = %q, want %q", tc.origin, got, tc.wantAllow)
		}
	}
	// The websocket checks Origin against the same list.
	tok := e.idpToken(tidActive, nil)
	for _, tc := range []struct {
		origin string
		want   int
	}{{"https://app.example.test", 101}, {"https://evil.example.test", 403}} {
		status, _ := dial(t, e.wsURL("session_id=s"), http.Header{"Authorization": {"Bearer " + tok}, "Origin": {tc.origin}})
		if status != tc.want {
			t.Errorf("websocket from origin %s = %d, want %d", tc.origin, status, tc.want)
		}
	}
}

// TestReadyWithoutDatabase: a server with no store (dev, DATABASE_REQUIRED
// false, file unusable) is not ready when the database is required, and
// tickets answer 503.
func TestReadyWithoutDatabase(t *testing.T) {
	for _, required := range []bool{false, true} {
		cfg := authn.DefaultConfig()
		cfg.DatabaseRequired = required
		srv, err := authn.NewServer(cfg, authn.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		resp, err := http.Get(hs.URL + "/ready")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// No bus either: never ready.
		if resp.StatusCode != 503 {
			t.Errorf("GET /ready without bus (database required %v) = %d, want 503", required, resp.StatusCode)
		}
		req, _ := http.NewRequest("POST", hs.URL+"/api/v1/auth/ws-ticket", nil)
		req.Header.Set("X-Debug-Tenant-Id", "acme")
		req.Header.Set("X-Debug-User-Id", "u")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 {
			t.Errorf("POST ws-ticket without a store = %d, want 503", resp.StatusCode)
		}
		hs.Close()
	}
}

func TestBadSecretEncryptionKeyRefused(t *testing.T) {
	cfg := authn.Defaults(authn.EnvLocal, authn.ModeHosted)
	cfg.SecretEncryptionKey = "bm90IDMyIGJ5dGVz"
	if _, err := authn.NewServer(cfg, authn.Deps{Store: authntest.OpenStore(t)}); err == nil {
		t.Errorf("NewServer with a 12-byte SECRET_ENCRYPTION_KEY succeeded, want an error")
	}
}

// BenchmarkMeIDP measures one authenticated, admitted GET /api/v1/auth/me in
// idp mode (RS256 verification with cached keys, allowlist lookup, user
// upsert) over loopback HTTP.
func BenchmarkMeIDP(b *testing.B) {
	e := newEnv(b, envOpt{mode: authn.ModeIDP})
	h := bearerH(e.idpToken(tidActive, nil))
	b.ResetTimer()
	for b.Loop() {
		if status, _ := e.do("GET", "/api/v1/auth/me", h, ""); status != 200 {
			b.Fatalf("GET /me = %d", status)
		}
	}
}

// TestReadyFollowsTheBus: /ready turns 503 when the NATS server goes away.
func TestReadyFollowsTheBus(t *testing.T) {
	ns, err := natsbus.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	e := newEnv(t, envOpt{mode: authn.ModeDev, natsURL: ns.ClientURL()})
	if status, body := e.do("GET", "/ready", nil, ""); status != 200 {
		t.Fatalf("GET /ready = %d %s, want 200", status, body)
	}
	ns.Shutdown()
	checkfor.Until(t, 5*time.Second, "/ready to report the bus down", func() bool {
		status, _ := e.do("GET", "/ready", nil, "")
		return status == http.StatusServiceUnavailable
	})
	if status, body := e.do("GET", "/health", nil, ""); status != 200 {
		t.Errorf("GET /health with the bus down = %d %s, want 200", status, body)
	}
}
