package authn_test

import (
	"context"
	"encoding/json"
	"net/http"
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
