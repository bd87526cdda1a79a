package authn_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/internal/throttle"
)

// from sends requests from a given loopback address (127.0.0.0/8 is all
// loopback on Linux), as different remote hosts.
func from(addr string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// get sends GET path with a bearer token through c; it returns the status,
// Retry-After and the error name.
func (e *env) getFrom(c *http.Client, path, token string) (int, string, string) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.http.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb jsonhttp.ErrorBody
	json.Unmarshal(b, &eb)
	return resp.StatusCode, resp.Header.Get("Retry-After"), eb.Error
}

// TestFailedAuthenticationIsThrottled: an address that sent a burst of
// refused credentials gets 429 with Retry-After, on every authenticated
// route and the websocket, before its credential is looked at; a client
// that never failed is not locked out; tokens come back with time.
func TestFailedAuthenticationIsThrottled(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeHosted, mutate: func(c *authn.Config) {
		c.AuthFailures = throttle.Rate{Burst: 3, Every: 2 * time.Second}
	}})
	good, forged := e.hostedToken("user-1", nil), "not-a-token"
	attacker, owner := from("127.0.0.2"), from("127.0.0.1")

	for i := range 3 {
		if status, _, _ := e.getFrom(attacker, "/api/v1/auth/me", forged); status != http.StatusUnauthorized {
			t.Fatalf("wrong token #%d = %d, want 401", i+1, status)
		}
	}
	for _, path := range []string{"/api/v1/auth/me", "/api/v1/provider-profiles", "/api/v1/ws/execution"} {
		status, retry, name := e.getFrom(attacker, path, forged)
		if status != http.StatusTooManyRequests || retry != "2" || name != "TooManyRequestsError" {
			t.Errorf("GET %s with a wrong token past the burst = %d %s, Retry-After %q; want 429 TooManyRequestsError, Retry-After 2", path, status, name, retry)
		}
	}
	if status, _, _ := e.getFrom(attacker, "/api/v1/auth/me", good); status != http.StatusOK {
		t.Errorf("a good token from the throttled address = %d, want 200 (its signature holds)", status)
	}
	for range 5 {
		if status, _, _ := e.getFrom(owner, "/api/v1/auth/me", good); status != http.StatusOK {
			t.Fatalf("a good token from another address = %d, want 200", status)
		}
	}
	e.clock.Advance(2 * time.Second) // one token back
	if status, _, _ := e.getFrom(attacker, "/api/v1/auth/me", good); status != http.StatusOK {
		t.Errorf("a good token from the address once a token came back = %d, want 200", status)
	}
	if status, _, _ := e.getFrom(attacker, "/api/v1/auth/me", forged); status != http.StatusUnauthorized {
		t.Errorf("a wrong token once a token came back = %d, want 401", status)
	}
	if status, _, _ := e.getFrom(attacker, "/api/v1/auth/me", forged); status != http.StatusTooManyRequests {
		t.Errorf("the next wrong token = %d, want 429", status)
	}
}

// TestOnlyRefusedCredentialsAreCounted: a 403 of admission (a suspended
// tenant's valid token) is not a failed authentication.
func TestOnlyRefusedCredentialsAreCounted(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeIDP, mutate: func(c *authn.Config) {
		c.AuthFailures = throttle.Rate{Burst: 2, Every: time.Minute}
	}})
	suspended := e.idpToken(tidSuspended, nil)
	c := from("127.0.0.3")
	for i := range 5 {
		if status, _, _ := e.getFrom(c, "/api/v1/auth/me", suspended); status != http.StatusForbidden {
			t.Fatalf("a suspended tenant's token #%d = %d, want 403 every time", i+1, status)
		}
	}
}

// sendFrom sends method path with headers h through c; it returns the
// status and Retry-After.
func (e *env) sendFrom(c *http.Client, method, path string, h map[string]string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.http.URL+path, nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// flood sends wrong tokens from c until its address is throttled, and
// checks that the next ones are answered 429 with Retry-After.
func (e *env) flood(c *http.Client, burst int) {
	e.t.Helper()
	for i := range burst {
		if status, _, _ := e.getFrom(c, "/api/v1/auth/me", "not-a-token"); status != http.StatusUnauthorized {
			e.t.Fatalf("wrong token #%d = %d, want 401", i+1, status)
		}
	}
	for range 20 {
		if status, retry, _ := e.getFrom(c, "/api/v1/auth/me", "not-a-token"); status != http.StatusTooManyRequests || retry == "" {
			e.t.Fatalf("wrong token past the burst = %d, Retry-After %q; want 429 with Retry-After", status, retry)
		}
	}
}

// TestValidCredentialSkipsTheThrottle: a client at the address of a flood
// of wrong tokens is served with the token it authenticated with before
// (on every route, and its websocket ticket), until the token expires; the
// flood is still answered 429. A good token never seen is served too (its
// signature is checked), while a forged or expired one is answered 429.
func TestValidCredentialSkipsTheThrottle(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeHosted, mutate: func(c *authn.Config) {
		c.AuthFailures = throttle.Rate{Burst: 3, Every: time.Hour} // no token comes back during the test
	}})
	addr := from("127.0.0.2")
	good := e.hostedToken("user-1", nil)
	short := e.hostedToken("user-2", func(c jwt.MapClaims) { c["exp"] = e.clock.Now().Add(time.Minute).Unix() })
	for _, tok := range []string{good, short} {
		if status, _, _ := e.getFrom(addr, "/api/v1/auth/me", tok); status != http.StatusOK {
			t.Fatalf("a good token before the flood = %d, want 200", status)
		}
	}
	e.flood(addr, 3)

	for _, path := range []string{"/api/v1/auth/me", "/api/v1/provider-profiles", "/api/v1/auth/me"} {
		if status, _, _ := e.getFrom(addr, path, good); status != http.StatusOK {
			t.Errorf("GET %s with a token that authenticated before, from the flooded address = %d, want 200", path, status)
		}
	}
	if status, _ := e.sendFrom(addr, "POST", "/api/v1/auth/ws-ticket", bearerH(good)); status != http.StatusOK {
		t.Fatalf("POST ws-ticket from the flooded address = %d, want 200", status)
	}
	tr := e.ticket(good)
	// A plain GET with the ticket: it passes the throttle and the ticket,
	// and is then refused as no websocket handshake (not spent).
	ws := "/api/v1/ws/execution?session_id=s&ticket=" + url.QueryEscape(tr.Ticket)
	if status, _ := e.sendFrom(addr, "GET", ws, nil); status == http.StatusTooManyRequests || status == http.StatusUnauthorized {
		t.Errorf("websocket dial with a fresh ticket from the flooded address = %d, want past authentication", status)
	}
	if status, _, _ := e.getFrom(addr, "/api/v1/ws/execution?session_id=s", good); status == http.StatusTooManyRequests {
		t.Errorf("websocket dial with the good token from the flooded address = 429, want past the throttle")
	}
	if status, retry, _ := e.getFrom(addr, "/api/v1/auth/me", "not-a-token"); status != http.StatusTooManyRequests || retry == "" {
		t.Errorf("the flood after the good requests = %d, Retry-After %q; want 429 with Retry-After", status, retry)
	}
	if status, _, _ := e.getFrom(addr, "/api/v1/auth/me", e.hostedToken("user-3", nil)); status != http.StatusOK {
		t.Errorf("a good token never seen, from the flooded address = %d, want 200 (its signature holds)", status)
	}
	forged := authntest.Sign(t, jwt.SigningMethodEdDSA, authntest.Ed25519Key(t), edKid, e.hostedClaims("user-1"), nil)
	if status, retry, _ := e.getFrom(addr, "/api/v1/auth/me", forged); status != http.StatusTooManyRequests || retry == "" {
		t.Errorf("a token signed with another key, from the flooded address = %d, Retry-After %q; want 429 with Retry-After", status, retry)
	}

	if status, _, _ := e.getFrom(addr, "/api/v1/auth/me", short); status != http.StatusOK {
		t.Errorf("a short-lived token before its expiry = %d, want 200", status)
	}
	e.clock.Advance(time.Minute + e.cfg.Leeway) // short's exp plus the leeway
	if status, _, _ := e.getFrom(addr, "/api/v1/auth/me", short); status != http.StatusTooManyRequests {
		t.Errorf("a token past its expiry, from the flooded address = %d, want 429 (no longer remembered)", status)
	}
	if status, _, _ := e.getFrom(addr, "/api/v1/auth/me", good); status != http.StatusOK {
		t.Errorf("the good token after the short one expired = %d, want 200", status)
	}
}

// TestRefusedCredentialIsForgotten: a remembered token whose tenant is
// suspended is answered 403, and again 403 (not served from the cache, and
// not 429: a 403 is not a failed authentication and its signature holds).
func TestRefusedCredentialIsForgotten(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeIDP, mutate: func(c *authn.Config) {
		c.AuthFailures = throttle.Rate{Burst: 3, Every: time.Hour}
	}})
	addr := from("127.0.0.4")
	tok := e.idpToken(tidOther, nil)
	if status, _, _ := e.getFrom(addr, "/api/v1/auth/me", tok); status != http.StatusOK {
		t.Fatalf("a good token = %d, want 200", status)
	}
	e.flood(addr, 3)
	if status, _, _ := e.getFrom(addr, "/api/v1/auth/me", tok); status != http.StatusOK {
		t.Fatalf("the remembered token from the flooded address = %d, want 200", status)
	}
	if _, err := e.store.SetTenantStatus(context.Background(), e.tenant[tidOther].ID, authn.StatusSuspended, t0); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := e.getFrom(addr, "/api/v1/auth/me", tok); status != http.StatusForbidden {
		t.Errorf("the remembered token of a tenant just suspended = %d, want 403", status)
	}
	if status, _, _ := e.getFrom(addr, "/api/v1/auth/me", tok); status != http.StatusForbidden {
		t.Errorf("the same token once refused = %d, want 403", status)
	}
}

// TestDebugCredentialsSkipTheThrottle: dev mode's debug headers are checked
// before the throttle (a few string comparisons); wrong ones are not.
func TestDebugCredentialsSkipTheThrottle(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeDev, mutate: func(c *authn.Config) {
		c.AuthRequired = true
		c.AuthFailures = throttle.Rate{Burst: 3, Every: time.Hour}
	}})
	addr := from("127.0.0.5")
	e.flood(addr, 3)
	if status, _ := e.sendFrom(addr, "GET", "/api/v1/auth/me", map[string]string{"X-Debug-Tenant-Id": "acme", "X-Debug-User-Id": "u"}); status != http.StatusOK {
		t.Errorf("debug headers from the flooded address = %d, want 200", status)
	}
	if status, _ := e.sendFrom(addr, "GET", "/api/v1/auth/me", map[string]string{"X-Debug-Tenant-Id": "-bad-", "X-Debug-User-Id": "u"}); status != http.StatusTooManyRequests {
		t.Errorf("wrong debug headers from the flooded address = %d, want 429", status)
	}
}

// BenchmarkThrottledRequest: what one request from a throttled address
// costs the server (the handler alone, no network), by what it carries:
// garbage is answered 429 before any crypto; a well-formed token signed with
// a key of the key set but the wrong private key costs a signature check
// (Ed25519 in hosted mode, RS256 in idp mode) and is answered 429; a valid
// token is served in full (its admission in the database included).
//
//	go test ./authn -run '^$' -bench ThrottledRequest
func BenchmarkThrottledRequest(b *testing.B) {
	for _, mode := range []authn.Mode{authn.ModeHosted, authn.ModeIDP} {
		e := newEnv(b, envOpt{mode: mode, mutate: func(c *authn.Config) {
			c.AuthFailures = throttle.Rate{Burst: 1, Every: time.Hour}
		}})
		good := e.hostedToken("user-1", nil)
		forged := authntest.Sign(b, jwt.SigningMethodEdDSA, authntest.Ed25519Key(b), edKid, e.hostedClaims("user-1"), nil)
		if mode == authn.ModeIDP {
			good = e.idpToken(tidActive, nil)
			forged = authntest.Sign(b, jwt.SigningMethodRS256, authntest.RSAKey(b, 1), rsaKid, e.idpClaims(tidActive), nil)
		}
		serve := func(tok string) int {
			req := httptest.NewRequest("GET", "/api/v1/auth/me", nil)
			req.RemoteAddr = "127.0.0.9:1234"
			req.Header.Set("Authorization", "Bearer "+tok)
			rec := httptest.NewRecorder()
			e.srv.ServeHTTP(rec, req)
			return rec.Code
		}
		serve("not-a-token") // empties the bucket
		for _, c := range []struct {
			name, tok string
			want      int
		}{
			{"garbage", "not-a-token", http.StatusTooManyRequests},
			{"forged", forged, http.StatusTooManyRequests},
			{"valid", good, http.StatusOK},
		} {
			b.Run(string(mode)+"/"+c.name, func(b *testing.B) {
				for b.Loop() {
					if got := serve(c.tok); got != c.want {
						b.Fatalf("status %d, want %d", got, c.want)
					}
				}
			})
		}
	}
}
