package authn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
	"github.com/turnledger/turnledger/internal/jsonhttp"
)

// send makes a request with h as given (several values of one header
// included) and returns the response with its body read.
func send(t *testing.T, method, u string, h http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	for k, vs := range h {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// redirector answers every request with a redirect to target and counts them.
func redirector(t *testing.T, code int, target func(self string) string) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target(srv.URL), code)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestJWKSRedirectsAreNotFollowed: a key-set URL that redirects (to
// another origin, or even to its own) is a key-set failure: 503 with
// Retry-After, and no request reaches the redirect's target, so a token
// signed with the target's keys is never accepted.
func TestJWKSRedirectsAreNotFollowed(t *testing.T) {
	natsURL := authntest.StartNATS(t)
	store := authntest.OpenStore(t)
	attacker := authntest.NewJWKS(t)
	evilRSA, evilEd := authntest.RSAKey(t, 2), authntest.Ed25519Key(t)
	attacker.PutRSA(rsaKid, evilRSA)
	attacker.PutEd25519(edKid, evilEd)

	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, where := range []string{"other origin", "same origin"} {
			target := func(self string) string {
				if where == "same origin" {
					return self + "/elsewhere/keys"
				}
				return attacker.URL() + "/keys"
			}
			for _, mode := range []authn.Mode{authn.ModeIDP, authn.ModeHosted} {
				name := fmt.Sprintf("%s/%d to %s", mode, code, where)
				rd := redirector(t, code, target)
				e := newEnv(t, envOpt{mode: mode, natsURL: natsURL, store: store, mutate: func(c *authn.Config) {
					c.IDPJWKSURL = rd.URL + "/discovery/keys"
					c.HostedAuthURL = rd.URL + "/api/auth"
				}})
				var tok string
				if mode == authn.ModeIDP {
					tok = authntest.Sign(t, jwt.SigningMethodRS256, evilRSA, rsaKid, e.idpClaims(tidActive), nil)
				} else {
					c := e.hostedClaims("user-1")
					c["iss"], c["aud"] = rd.URL, rd.URL
					tok = authntest.Sign(t, jwt.SigningMethodEdDSA, evilEd, edKid, c, nil)
				}
				resp, body := send(t, "GET", e.http.URL+"/api/v1/auth/me", http.Header{"Authorization": {"Bearer " + tok}})
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("%s: GET /me = %d %s, want 503", name, resp.StatusCode, body)
				}
				if ra := resp.Header.Get("Retry-After"); ra == "" {
					t.Errorf("%s: 503 without Retry-After", name)
				}
				if status, _ := dial(t, e.wsURL("session_id=s"), http.Header{"Authorization": {"Bearer " + tok}}); status != http.StatusServiceUnavailable {
					t.Errorf("%s: websocket = %d, want 503", name, status)
				}
			}
		}
	}
	if n := attacker.Fetches(); n != 0 {
		t.Errorf("the redirect target was fetched %d times, want 0", n)
	}
}

// TestKeySetRedirect: the KeySet itself refuses a redirect whatever client
// it is given.
func TestKeySetRedirect(t *testing.T) {
	attacker := authntest.NewJWKS(t)
	attacker.PutRSA("k1", authntest.RSAKey(t, 0))
	rd := redirector(t, http.StatusFound, func(string) string { return attacker.URL() })
	clock := authntest.NewClock(t0)
	ks := authn.NewKeySet(authn.KeySetConfig{URL: rd.URL, Type: authn.KeyRSA, Client: &http.Client{Timeout: time.Second}, Now: clock.Now, TTL: 300 * time.Second, RefetchEvery: 10 * time.Second})
	if _, err := ks.Key(context.Background(), "k1"); !errors.Is(err, authn.ErrKeySetUnavailable) {
		t.Errorf("Key(k1) behind a redirect: error = %v, want ErrKeySetUnavailable", err)
	}
	if n := attacker.Fetches(); n != 0 {
		t.Errorf("redirect target fetched %d times, want 0", n)
	}
}

// TestKeySetTroubleCarriesRetryAfter: every 503 for the key set says when
// to come back (the refetch interval, 10 s).
func TestKeySetTroubleCarriesRetryAfter(t *testing.T) {
	natsURL := authntest.StartNATS(t)
	store := authntest.OpenStore(t)
	for _, tc := range []struct {
		name      string
		mode      authn.Mode
		behaviour authntest.Behaviour
		noURL     bool
	}{
		{"idp/down", authn.ModeIDP, authntest.Down, false},
		{"idp/garbage", authn.ModeIDP, authntest.Garbage, false},
		{"idp/empty", authn.ModeIDP, authntest.Empty, false},
		{"idp/slow", authn.ModeIDP, authntest.Slow, false},
		{"idp/not configured", authn.ModeIDP, authntest.Serve, true},
		{"hosted/down", authn.ModeHosted, authntest.Down, false},
		{"hosted/not configured", authn.ModeHosted, authntest.Serve, true},
	} {
		e := newEnv(t, envOpt{mode: tc.mode, natsURL: natsURL, store: store, mutate: func(c *authn.Config) {
			if tc.noURL {
				c.IDPJWKSURL, c.HostedAuthURL = "", ""
			}
		}})
		e.jwks.Set(tc.behaviour)
		tok := e.idpToken(tidActive, nil)
		if tc.mode == authn.ModeHosted {
			tok = e.hostedToken("user-1", nil)
		}
		for _, path := range []string{"/api/v1/auth/me", "/api/v1/auth/ws-ticket"} {
			method := "GET"
			if strings.HasSuffix(path, "ws-ticket") {
				method = "POST"
			}
			resp, body := send(t, method, e.http.URL+path, http.Header{"Authorization": {"Bearer " + tok}})
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "10" {
				t.Errorf("%s: %s %s = %d, Retry-After %q (%s), want 503 with Retry-After 10", tc.name, method, path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
		}
	}
}

// TestAmbiguousCredentials: a request with more than one credential is
// refused with 401 (RFC 6750 §2), never resolved by picking one, and in
// dev mode never passed as the anonymous user either.
func TestAmbiguousCredentials(t *testing.T) {
	natsURL := authntest.StartNATS(t)
	idp := newEnv(t, envOpt{mode: authn.ModeIDP, natsURL: natsURL, mutate: func(c *authn.Config) { c.AllowQueryAuthTokens = true }})
	hosted := newEnv(t, envOpt{mode: authn.ModeHosted, natsURL: natsURL})
	dev := newEnv(t, envOpt{mode: authn.ModeDev, natsURL: natsURL}) // local defaults: debug and query auth on, AUTH_REQUIRED=false
	good, other := idp.idpToken(tidActive, nil), idp.idpToken(tidOther, nil)
	hostedTok := hosted.hostedToken("user-1", nil)
	devTok := dev.devToken("acme", "u1")
	debugH := http.Header{"X-Debug-Tenant-Id": {"acme"}, "X-Debug-User-Id": {"u1"}}
	plus := func(h http.Header, k, v string) http.Header {
		h = h.Clone()
		h.Add(k, v)
		return h
	}
	authz := func(toks ...string) http.Header {
		h := http.Header{}
		for _, tok := range toks {
			h.Add("Authorization", tok)
		}
		return h
	}

	type request struct {
		name  string
		e     *env
		ws    bool // dial the websocket; else GET /me (or POST ws-ticket with ticket)
		post  bool
		query string
		h     http.Header
		want  int
	}
	cases := []request{
		// Controls: one credential is fine.
		{"idp/me one header", idp, false, false, "", authz("Bearer " + good), 200},
		{"idp/ws one header", idp, true, false, "session_id=s", authz("Bearer " + good), 101},
		{"idp/ws one query token", idp, true, false, "session_id=s&access_token=" + url.QueryEscape(good), nil, 101},
		{"dev/me debug headers", dev, false, false, "", debugH, 200},

		{"idp/me two Authorization headers", idp, false, false, "", authz("Bearer "+good, "Bearer garbage"), 401},
		{"idp/me two valid Authorization headers", idp, false, false, "", authz("Bearer "+good, "Bearer "+other), 401},
		{"idp/ws-ticket two Authorization headers", idp, false, true, "", authz("Bearer "+good, "Bearer garbage"), 401},
		{"hosted/me two Authorization headers", hosted, false, false, "", authz("Bearer "+hostedTok, "Basic x"), 401},
		{"idp/ws two Authorization headers", idp, true, false, "session_id=s", authz("Bearer "+good, "Bearer garbage"), 401},
		{"idp/ws garbage header and a query token", idp, true, false, "session_id=s&access_token=" + url.QueryEscape(good), authz("Bearer garbage"), 401},
		{"idp/ws header and query token, both valid", idp, true, false, "session_id=s&access_token=" + url.QueryEscape(good), authz("Bearer " + good), 401},
		{"idp/ws access_token twice", idp, true, false, "session_id=s&access_token=" + url.QueryEscape(good) + "&access_token=x", nil, 401},
		{"idp/me header and a query token", idp, false, false, "access_token=" + url.QueryEscape(other), authz("Bearer " + good), 401},
		{"hosted/ws header and a ticket", hosted, true, false, "session_id=s&ticket=wst_x", authz("Bearer " + hostedTok), 401},
		{"dev/me debug headers and a bearer token", dev, false, false, "", plus(debugH, "Authorization", "Bearer "+devTok), 401},
		{"dev/me debug headers and a garbage bearer", dev, false, false, "", plus(debugH, "Authorization", "Bearer garbage"), 401},
		{"dev/me debug tenant header twice", dev, false, false, "", plus(debugH, "X-Debug-Tenant-Id", "other"), 401},
		{"dev/ws debug query and a bearer header", dev, true, false, "session_id=s&debug_tenant_id=acme&debug_user_id=u1", authz("Bearer garbage"), 401},
		{"dev/ws debug headers and a query token", dev, true, false, "session_id=s&access_token=" + devTok, debugH, 401},
		{"dev/ws debug query and a query token", dev, true, false, "session_id=s&debug_tenant_id=acme&debug_user_id=u1&access_token=" + devTok, nil, 401},
	}
	for _, tc := range cases {
		var (
			status int
			eb     jsonhttp.ErrorBody
		)
		switch {
		case tc.ws:
			status, eb = dial(t, tc.e.wsURL(tc.query), tc.h)
		default:
			method, path := "GET", "/api/v1/auth/me"
			if tc.post {
				method, path = "POST", "/api/v1/auth/ws-ticket"
			}
			if tc.query != "" {
				path += "?" + tc.query
			}
			resp, body := send(t, method, tc.e.http.URL+path, tc.h)
			status = resp.StatusCode
			json.Unmarshal(body, &eb)
		}
		if status != tc.want {
			t.Errorf("%s = %d %+v, want %d", tc.name, status, eb, tc.want)
			continue
		}
		if status == 401 && eb.Error != "UnauthorizedError" {
			t.Errorf("%s: error %+v, want UnauthorizedError", tc.name, eb)
		}
	}
}
