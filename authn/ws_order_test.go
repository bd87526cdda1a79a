package authn_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
	"github.com/turnledger/turnledger/internal/jsonhttp"
)

const appOrigin = "https://app.example.test"

func withCORS(c *authn.Config) { c.CORSAllowedOrigins = []string{appOrigin} }

// TestWebSocketAuthenticatesFirst: the Origin (403) and the credential
// (401) are checked before any other query parameter (400); origins match
// by scheme, host and port.
func TestWebSocketAuthenticatesFirst(t *testing.T) {
	natsURL := authntest.StartNATS(t)
	idp := newEnv(t, envOpt{mode: authn.ModeIDP, natsURL: natsURL, mutate: withCORS})
	hosted := newEnv(t, envOpt{mode: authn.ModeHosted, natsURL: natsURL, mutate: withCORS})
	good := http.Header{"Authorization": {"Bearer " + idp.idpToken(tidActive, nil)}}
	from := func(h http.Header, origins ...string) http.Header {
		h = h.Clone()
		if h == nil {
			h = http.Header{}
		}
		for _, o := range origins {
			h.Add("Origin", o)
		}
		return h
	}
	forged := "ticket=wst_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	cases := []struct {
		name  string
		e     *env
		query string
		h     http.Header
		want  int
	}{
		{"no credential, no session_id", idp, "", nil, 401},
		{"no credential, workspace_id", idp, "session_id=s&workspace_id=w", nil, 401},
		{"no credential, user_id", idp, "user_id=u", nil, 401},
		{"no credential, unknown parameter", idp, "session_id=s&x=1", nil, 401},
		{"no credential, bad session_id", idp, "session_id=a.b", nil, 401},
		{"garbage bearer, workspace_id", idp, "workspace_id=w", http.Header{"Authorization": {"Bearer x"}}, 401},
		{"forged ticket, no session_id", hosted, forged, nil, 401},
		{"forged ticket, workspace_id", hosted, forged + "&session_id=s&workspace_id=w", nil, 401},
		{"suspended tenant, workspace_id", idp, "workspace_id=w", http.Header{"Authorization": {"Bearer " + idp.idpToken(tidSuspended, nil)}}, 403},

		{"cross origin, authenticated, workspace_id", idp, "session_id=s&workspace_id=w", from(good, "https://evil.example.test"), 403},
		{"cross origin, no credential", idp, "session_id=s", from(nil, "https://evil.example.test"), 403},
		{"allowed host over http instead of https", idp, "session_id=s", from(good, "http://app.example.test"), 403},
		{"allowed host on another port", idp, "session_id=s", from(good, "https://app.example.test:8443"), 403},
		{"allowed host with an explicit default port", idp, "session_id=s", from(good, "https://app.example.test:443"), 403},
		{"allowed origin with a path", idp, "session_id=s", from(good, appOrigin+"/app"), 403},
		{"null origin", idp, "session_id=s", from(good, "null"), 403},
		{"two Origin headers", idp, "session_id=s", from(good, appOrigin, "https://evil.example.test"), 403},

		{"allowed origin", idp, "session_id=s", from(good, appOrigin), 101},
		{"allowed origin in capitals", idp, "session_id=s", from(good, "HTTPS://APP.EXAMPLE.TEST"), 101},
		{"same origin", idp, "session_id=s", from(good, idp.http.URL), 101},
		{"no Origin", idp, "session_id=s", good, 101},
		{"authenticated, workspace_id", idp, "session_id=s&workspace_id=w", good, 400},
		{"authenticated, user_id", idp, "session_id=s&user_id=u", good, 400},
		{"authenticated, empty session_id", idp, "session_id=", good, 400},
	}
	for _, tc := range cases {
		status, eb := dial(t, tc.e.wsURL(tc.query), tc.h)
		if status != tc.want {
			t.Errorf("%s: dial = %d %+v, want %d", tc.name, status, eb, tc.want)
		}
	}
}

// TestWebSocketOriginScheme: the same-origin rule compares the scheme too
// (https on a TLS listener, http otherwise; X-Forwarded-Proto is not
// read), only http and https origins match, and a host and port that
// CORS_ALLOWED_ORIGINS lists under one scheme is refused under another,
// even when the Host header matches: behind a proxy that ends TLS and
// keeps Host, CORS_ALLOWED_ORIGINS=https://app.example.test must not admit
// http://app.example.test.
func TestWebSocketOriginScheme(t *testing.T) {
	natsURL := authntest.StartNATS(t)
	listed := newEnv(t, envOpt{mode: authn.ModeIDP, natsURL: natsURL, mutate: withCORS})
	open := newEnv(t, envOpt{mode: authn.ModeIDP, natsURL: natsURL})
	// The same servers on TLS listeners.
	tlsOf := func(e *env) *httptest.Server {
		s := httptest.NewTLSServer(e.srv)
		t.Cleanup(s.Close)
		return s
	}
	listedTLS, openTLS := tlsOf(listed), tlsOf(open)
	tok := listed.idpToken(tidActive, nil)
	const (
		plain = false
		tls   = true
	)
	cases := []struct {
		name        string
		e           *env
		tls         bool
		host        string
		origin      string
		forwardedTo string // X-Forwarded-Proto, ignored
		want        int
	}{
		// CORS_ALLOWED_ORIGINS=https://app.example.test, behind a proxy that
		// ends TLS and keeps Host (the runtime sees http).
		{"proxy: the listed origin", listed, plain, "app.example.test", "https://app.example.test", "", 101},
		{"proxy: listed host over http", listed, plain, "app.example.test", "http://app.example.test", "", 403},
		{"proxy: listed host over http, X-Forwarded-Proto http", listed, plain, "app.example.test", "http://app.example.test", "http", 403},
		{"proxy: listed host over http in capitals", listed, plain, "app.example.test", "HTTP://APP.EXAMPLE.TEST", "", 403},
		{"proxy: listed host with scheme foo", listed, plain, "app.example.test", "foo://app.example.test", "", 403},
		{"proxy: listed host with scheme ws", listed, plain, "app.example.test", "ws://app.example.test", "", 403},
		{"proxy: unlisted host, same origin", listed, plain, "other.example.test", "http://other.example.test", "", 101},
		{"proxy: listed host on an unlisted port, same origin", listed, plain, "app.example.test:8080", "http://app.example.test:8080", "", 101},
		{"TLS: the listed origin", listed, tls, "app.example.test", "https://app.example.test", "", 101},
		{"TLS: listed host over http", listed, tls, "app.example.test", "http://app.example.test", "", 403},

		// No CORS_ALLOWED_ORIGINS: only the request's own origin.
		{"plain: same origin", open, plain, "app.example.test", "http://app.example.test", "", 101},
		{"plain: same origin in capitals", open, plain, "app.example.test", "HTTP://App.Example.Test", "", 101},
		{"plain: same host over https", open, plain, "app.example.test", "https://app.example.test", "", 403},
		{"plain: same host over https, X-Forwarded-Proto https", open, plain, "app.example.test", "https://app.example.test", "https", 403},
		{"plain: same host with scheme ws", open, plain, "app.example.test", "ws://app.example.test", "", 403},
		{"plain: same host with scheme foo", open, plain, "app.example.test", "foo://app.example.test", "", 403},
		{"plain: explicit default port", open, plain, "app.example.test", "http://app.example.test:80", "", 403},
		{"plain: Host on another port", open, plain, "app.example.test:8080", "http://app.example.test", "", 403},
		{"plain: another host", open, plain, "app.example.test", "http://evil.example.test", "", 403},
		{"TLS: same origin", open, tls, "app.example.test", "https://app.example.test", "", 101},
		{"TLS: same host over http", open, tls, "app.example.test", "http://app.example.test", "", 403},
		{"TLS: explicit default port", open, tls, "app.example.test", "https://app.example.test:443", "", 403},
	}
	for _, tc := range cases {
		u, client := tc.e.wsURL("session_id=s"), http.DefaultClient
		if tc.tls {
			s := map[*env]*httptest.Server{listed: listedTLS, open: openTLS}[tc.e]
			u, client = "wss"+strings.TrimPrefix(s.URL, "https")+"/api/v1/ws/execution?session_id=s", s.Client()
		}
		h := http.Header{"Authorization": {"Bearer " + tok}, "Origin": {tc.origin}}
		if tc.forwardedTo != "" {
			h.Set("X-Forwarded-Proto", tc.forwardedTo)
		}
		if got := dialWith(t, u, &websocket.DialOptions{HTTPClient: client, HTTPHeader: h, Host: tc.host}); got != tc.want {
			t.Errorf("%s: dial with Host %s, Origin %s = %d, want %d", tc.name, tc.host, tc.origin, got, tc.want)
		}
	}
}

// dialWith dials with opts and returns the status (101 when upgraded).
func dialWith(t *testing.T, u string, opts *websocket.DialOptions) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, u, opts)
	if err == nil {
		c.Close(websocket.StatusNormalClosure, "")
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	return resp.StatusCode
}

// handshake is a websocket handshake's headers, to send with send().
func handshake(extra http.Header) http.Header {
	h := http.Header{
		"Connection":            {"Upgrade"},
		"Upgrade":               {"websocket"},
		"Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key":     {"dGhlIHNhbXBsZSBub25jZQ=="},
	}
	for k, vs := range extra {
		h[k] = vs
	}
	return h
}

// TestTicketSpentOnlyByAnUpgradedDial: a dial refused for its Origin, its
// query or its handshake leaves the ticket for the next one.
func TestTicketSpentOnlyByAnUpgradedDial(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeHosted, mutate: withCORS})
	tok := e.hostedToken("user-1", nil)
	tr := e.ticket(tok)
	q := "ticket=" + url.QueryEscape(tr.Ticket)
	attempts := []struct {
		name string
		do   func() int
		want int
	}{
		{"cross origin", func() int {
			s, _ := dial(t, e.wsURL("session_id=s&"+q), http.Header{"Origin": {"https://evil.example.test"}})
			return s
		}, 403},
		{"allowed host over http", func() int {
			s, _ := dial(t, e.wsURL("session_id=s&"+q), http.Header{"Origin": {"http://app.example.test"}})
			return s
		}, 403},
		{"workspace_id", func() int { s, _ := dial(t, e.wsURL("session_id=s&workspace_id=w&"+q), nil); return s }, 400},
		{"plain GET, no upgrade", func() int {
			resp, _ := send(t, "GET", e.http.URL+"/api/v1/ws/execution?session_id=s&"+q, nil)
			return resp.StatusCode
		}, 426},
		{"websocket version 12", func() int {
			resp, _ := send(t, "GET", e.http.URL+"/api/v1/ws/execution?session_id=s&"+q, handshake(http.Header{"Sec-Websocket-Version": {"12"}}))
			return resp.StatusCode
		}, 400},
		{"bad Sec-WebSocket-Key", func() int {
			resp, _ := send(t, "GET", e.http.URL+"/api/v1/ws/execution?session_id=s&"+q, handshake(http.Header{"Sec-Websocket-Key": {"short"}}))
			return resp.StatusCode
		}, 400},
		{"the dial that is upgraded", func() int { s, _ := dial(t, e.wsURL("session_id=s&"+q), http.Header{"Origin": {appOrigin}}); return s }, 101},
		{"the ticket is spent", func() int { s, _ := dial(t, e.wsURL("session_id=s&"+q), nil); return s }, 401},
	}
	for _, a := range attempts {
		if got := a.do(); got != a.want {
			t.Errorf("%s: status %d, want %d", a.name, got, a.want)
		}
	}
}

// raceDial dials and reports the status (101 when upgraded), for use off
// the test goroutine.
func raceDial(u string, h http.Header) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h})
	if err == nil {
		c.Close(websocket.StatusNormalClosure, "")
		return http.StatusSwitchingProtocols, nil
	}
	if resp == nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// TestTicketRace: of two dials racing with one ticket, exactly one is
// upgraded and the other gets 401; a racing cross-origin dial never takes
// the ticket from a good one.
func TestTicketRace(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeHosted, mutate: withCORS})
	tok := e.hostedToken("user-1", nil)
	for round := range 20 {
		tr := e.ticket(tok)
		u := e.wsURL("session_id=s&ticket=" + url.QueryEscape(tr.Ticket))
		// Rounds alternate: two good dials, or a good and a cross-origin one.
		headers := []http.Header{{"Origin": {appOrigin}}, {"Origin": {appOrigin}}}
		if round%2 == 1 {
			headers[1] = http.Header{"Origin": {"https://evil.example.test"}}
		}
		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			statuses = make([]int, 2)
			errs     = make([]error, 2)
		)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[i], errs[i] = raceDial(u, headers[i])
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d dial %d: %v", round, i, err)
			}
		}
		want := []int{101, 401}
		if round%2 == 1 {
			want = []int{101, 403}
		} else if statuses[0] != 101 {
			want = []int{401, 101}
		}
		if statuses[0] != want[0] || statuses[1] != want[1] {
			t.Errorf("round %d: statuses %v, want %v (exactly one upgraded)", round, statuses, want)
		}
	}
}

var madeSessionID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// TestSessionIDOptional: a dial without session_id is upgraded; the
// server makes a session id and sends it as the first message, and the
// session works like any other.
func TestSessionIDOptional(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeHosted})
	tok := e.hostedToken("user-1", nil)
	seen := map[string]bool{}
	for _, how := range []struct {
		name  string
		query string
		h     http.Header
	}{
		{"bearer", "", http.Header{"Authorization": {"Bearer " + tok}}},
		{"ticket", "ticket=" + url.QueryEscape(e.ticket(tok).Ticket), nil},
	} {
		c := connect(t, e.wsURL(how.query), how.h)
		var first struct {
			Kind      string `json:"kind"`
			SessionID string `json:"session_id"`
		}
		raw := c.next(how.name + ": first message")
		if err := json.Unmarshal([]byte(raw), &first); err != nil || first.Kind != "session" || !madeSessionID.MatchString(first.SessionID) {
			t.Fatalf("%s: first message %s, want {\"kind\":\"session\",\"session_id\":…}", how.name, raw)
		}
		if seen[first.SessionID] {
			t.Errorf("%s: session id %q made twice", how.name, first.SessionID)
		}
		seen[first.SessionID] = true
		// Another socket joins the made session by its id; a message reaches both.
		peer := connect(t, e.wsURL("session_id="+first.SessionID), http.Header{"Authorization": {"Bearer " + tok}})
		msg := `{"kind":"step"}`
		c.send(msg)
		for name, w := range map[string]*wsClient{"sender": c, "peer": peer} {
			if got := w.next(how.name + ": " + name); got != msg {
				t.Errorf("%s: %s received %q, want %q", how.name, name, got, msg)
			}
		}
	}
}

// TestPlainRequestToTheWebSocket: a request without an upgrade gets 426 in
// the runtime's JSON error shape, with Upgrade: websocket.
func TestPlainRequestToTheWebSocket(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeDev})
	resp, body := send(t, "GET", e.http.URL+"/api/v1/ws/execution?session_id=s", http.Header{"X-Debug-Tenant-Id": {"acme"}, "X-Debug-User-Id": {"u"}})
	var eb jsonhttp.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Fatalf("body %q is not JSON: %v", body, err)
	}
	if resp.StatusCode != http.StatusUpgradeRequired || eb.Error != "UpgradeRequiredError" || eb.Message == "" {
		t.Errorf("plain GET = %d %+v, want 426 UpgradeRequiredError with a message", resp.StatusCode, eb)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if u := resp.Header.Get("Upgrade"); u != "websocket" {
		t.Errorf("Upgrade = %q, want websocket", u)
	}
	// A bad version is a ValidationError in the same shape.
	resp, body = send(t, "GET", e.http.URL+"/api/v1/ws/execution?session_id=s", handshake(http.Header{"Sec-Websocket-Version": {"8"}}))
	if err := json.Unmarshal(body, &eb); err != nil || resp.StatusCode != 400 || eb.Error != "ValidationError" {
		t.Errorf("handshake version 8 = %d %s, want 400 ValidationError", resp.StatusCode, body)
	}
}
