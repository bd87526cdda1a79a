package authn_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/turnledger/turnledger/authn"
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
	if status, _, _ := e.getFrom(attacker, "/api/v1/auth/me", good); status != http.StatusTooManyRequests {
		t.Errorf("a good token from the throttled address = %d, want 429 (not looked at)", status)
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
