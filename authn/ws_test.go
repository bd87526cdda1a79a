package authn_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
)

type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
	in   chan string
}

// connect opens a websocket and reads its messages into a channel.
func connect(t *testing.T, u string, header http.Header) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", u, err, status)
	}
	w := &wsClient{t: t, conn: c, in: make(chan string, 64)}
	go func() {
		defer close(w.in)
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				return
			}
			w.in <- string(data)
		}
	}()
	t.Cleanup(func() { c.Close(websocket.StatusNormalClosure, "") })
	return w
}

func (w *wsClient) send(msg string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.conn.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		w.t.Fatalf("write: %v", err)
	}
}

// next waits (bounded) for the next message.
func (w *wsClient) next(what string) string {
	w.t.Helper()
	select {
	case m, ok := <-w.in:
		if !ok {
			w.t.Fatalf("%s: connection closed", what)
		}
		return m
	case <-time.After(5 * time.Second):
		w.t.Fatalf("%s: no message within 5s", what)
	}
	return ""
}

// TestSessionsAcrossProcessesAndTenants runs two runtime servers on one
// NATS server and one store: a message sent on a session reaches every
// socket of that tenant and session on both servers, and no socket of
// another tenant or session.
func TestSessionsAcrossProcessesAndTenants(t *testing.T) {
	natsURL := authntest.StartNATS(t)
	store := authntest.OpenStore(t)
	jwks := authntest.NewJWKS(t)
	clock := authntest.NewClock(t0)
	s1 := newEnv(t, envOpt{mode: authn.ModeIDP, natsURL: natsURL, store: store, jwks: jwks, clock: clock})
	s2 := newEnv(t, envOpt{mode: authn.ModeIDP, natsURL: natsURL, store: store, jwks: jwks, clock: clock})

	hdr := func(e *env, tid string) http.Header {
		return http.Header{"Authorization": {"Bearer " + e.idpToken(tid, nil)}}
	}
	a1 := connect(t, s1.wsURL("session_id=run-1"), hdr(s1, tidActive))
	a2 := connect(t, s2.wsURL("session_id=run-1"), hdr(s2, tidActive))
	aOther := connect(t, s2.wsURL("session_id=run-2"), hdr(s2, tidActive))
	// Another tenant using the same session id, on the receiving server.
	b := connect(t, s2.wsURL("session_id=run-1"), hdr(s2, tidOther))
	// Query-token bootstrap (allowed in idp mode by default).
	a3 := connect(t, s2.wsURL("session_id=run-1&access_token="+url.QueryEscape(s2.idpToken(tidActive, nil))), nil)

	msg := `{"kind":"step","n":1}`
	a1.send(msg)
	for name, c := range map[string]*wsClient{"sender": a1, "same session, other process": a2, "query-token socket": a3} {
		if got := c.next(name); got != msg {
			t.Errorf("%s received %q, want %q", name, got, msg)
		}
	}
	// b and aOther were subscribed on s2 before a2 received the message; if
	// they could see it, it would arrive before their own.
	own := `{"kind":"mine"}`
	b.send(own)
	if got := b.next("other tenant"); got != own {
		t.Errorf("socket of tenant %s on session run-1 received %q first, want only its own %q", tidOther, got, own)
	}
	aOther.send(own)
	if got := aOther.next("other session"); got != own {
		t.Errorf("socket on session run-2 received %q first, want only its own %q", got, own)
	}
	// b's message did not reach tenant contoso's sockets either.
	a1.send(msg)
	if got := a2.next("same session after the other tenant wrote"); got != msg {
		t.Errorf("a2 received %q, want %q (not the other tenant's message)", got, msg)
	}
}

func TestMessagesWithWorkspaceOrUserAreRefused(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeDev})
	h := http.Header{"X-Debug-Tenant-Id": {"acme"}, "X-Debug-User-Id": {"u1"}}
	c := connect(t, e.wsURL("session_id=s"), h)
	peer := connect(t, e.wsURL("session_id=s"), h)
	for _, m := range []string{`{"workspace_id":"w","x":1}`, `{"user_id":"someone"}`, `not json`, `[1,2]`} {
		c.send(m)
		var got struct{ Error, Message string }
		if err := json.Unmarshal([]byte(c.next("refusal of "+m)), &got); err != nil || got.Error != "ValidationError" {
			t.Errorf("sending %s: reply %+v (%v), want a ValidationError frame", m, got, err)
		}
	}
	ok := `{"kind":"ok"}`
	c.send(ok)
	if got := peer.next("peer"); got != ok {
		t.Errorf("peer received %q first, want %q (no refused message delivered)", got, ok)
	}
}

func TestHostedTicketFlow(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeHosted})
	tok := e.hostedToken("user-1", nil)
	tr := e.ticket(tok)
	exp, err := time.Parse(time.RFC3339, tr.ExpiresAt)
	if err != nil || !exp.Equal(t0.Add(30*time.Second)) {
		t.Errorf("expires_at = %q, want %s", tr.ExpiresAt, t0.Add(30*time.Second).Format(time.RFC3339))
	}
	c := connect(t, e.wsURL("session_id=s&ticket="+url.QueryEscape(tr.Ticket)), nil)
	c.send(`{"hello":1}`)
	if got := c.next("echo"); got != `{"hello":1}` {
		t.Errorf("echo = %q", got)
	}
	// The ticket is stored hashed: the raw ticket is nowhere in the file.
	// (Read through a second ticket, unused, so it is still stored.)
	tr2 := e.ticket(tok)
	if raw := dbBytes(t, e); containsBytes(raw, tr2.Ticket) {
		t.Errorf("database file contains the plaintext ticket")
	}
	// A bearer header on the websocket works in hosted mode too.
	connect(t, e.wsURL("session_id=s"), http.Header{"Authorization": {"Bearer " + tok}})

	// A ticket issued before the tenant was suspended cannot be used after.
	tr3 := e.ticket(tok)
	if _, err := e.store.SetTenantStatus(context.Background(), tidActive, authn.StatusSuspended, t0); err != nil {
		t.Fatal(err)
	}
	if status, eb := dial(t, e.wsURL("session_id=s&ticket="+url.QueryEscape(tr3.Ticket)), nil); status != 403 || eb.Message != authn.MsgSuspended {
		t.Errorf("ticket of a suspended tenant = %d %+v, want 403 %q", status, eb, authn.MsgSuspended)
	}
	if _, status, eb := e.me(bearerH(tok)); status != 403 || eb.Message != authn.MsgSuspended {
		t.Errorf("GET /me of the suspended hosted tenant = %d %+v, want 403 %q", status, eb, authn.MsgSuspended)
	}
}

func TestDevQueryBootstrap(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeDev})
	connect(t, e.wsURL("session_id=s&debug_tenant_id=acme&debug_user_id=u"), nil)
	connect(t, e.wsURL("session_id=s&access_token="+e.devToken("acme", "u")), nil)
	// AUTH_REQUIRED=false: an unauthenticated dev socket is the anonymous user.
	open := newEnv(t, envOpt{mode: authn.ModeDev, mutate: func(c *authn.Config) { c.AuthRequired = false }})
	connect(t, open.wsURL("session_id=s"), nil)
	if status, _ := dial(t, e.wsURL("session_id=s"), nil); status != 101 {
		// dev local defaults: AUTH_REQUIRED=false as well
		t.Errorf("dev local websocket without credentials = %d, want 101 (AUTH_REQUIRED defaults to false)", status)
	}
}
