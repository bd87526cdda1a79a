package main

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// debugHeaders authenticate a dev-mode runtime request as tenant acme.
var debugHeaders = map[string]string{"X-Debug-Tenant-Id": "acme", "X-Debug-User-Id": "u1"}

// TestRuntimeCutsASlowBody: --read-timeout cuts a request body trickled by
// an authenticated client.
func TestRuntimeCutsASlowBody(t *testing.T) {
	base := rtStart(t, []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "rt.db"), "--read-timeout", "300ms"}, nil)
	checkSlowBodyCut(t, base, "POST /api/v1/auth/ws-ticket", "X-Debug-Tenant-Id: acme\r\nX-Debug-User-Id: u1\r\n")
}

// TestRuntimeCapsConnections: --max-conns bounds the runtime's connections.
func TestRuntimeCapsConnections(t *testing.T) {
	base := rtStart(t, []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "rt.db"), "--max-conns", "2"}, nil)
	checkConnectionCap(t, base, "/health")
}

// TestRuntimeWebsocketOutlivesTheDeadlines: the read and write deadlines
// bound requests, not the execution websocket, which carries messages both
// ways after both have passed. No fixed sleep: a trickled request started
// after the socket opened is cut by the same read timeout, so once it is,
// the socket's deadlines (had they been kept) would have passed too.
func TestRuntimeWebsocketOutlivesTheDeadlines(t *testing.T) {
	base := rtStart(t, []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "rt.db"), "--read-timeout", "300ms", "--write-timeout", "300ms"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := http.Header{}
	for k, v := range debugHeaders {
		h.Set(k, v)
	}
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/v1/ws/execution?session_id=s1", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer ws.Close(websocket.StatusNormalClosure, "")

	checkSlowBodyCut(t, base, "POST /api/v1/auth/ws-ticket", "X-Debug-Tenant-Id: acme\r\nX-Debug-User-Id: u1\r\n")

	for i, msg := range []string{`{"n":1}`, `{"n":2}`} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatalf("write #%d past the deadlines: %v", i+1, err)
		}
		_, got, err := ws.Read(ctx)
		if err != nil || string(got) != msg {
			t.Fatalf("read #%d past the deadlines = %q, %v; want %s back", i+1, got, err, msg)
		}
	}
}

// TestRuntimeThrottlesFailedAuthentication: past --auth-failure-burst
// refused credentials an address gets 429 with Retry-After, while a client
// at another address that never failed keeps getting 200.
func TestRuntimeThrottlesFailedAuthentication(t *testing.T) {
	base := rtStart(t, []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "rt.db"), "--auth-failure-burst", "3", "--auth-failure-every", "1m"},
		map[string]string{"AUTH_REQUIRED": "true"})
	get := func(c *http.Client, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/api/v1/auth/me", nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	attacker := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	wrong := map[string]string{"Authorization": "Bearer wrong"}
	for i := range 3 {
		if status, _ := get(attacker, wrong); status != http.StatusUnauthorized {
			t.Fatalf("wrong token #%d = %d, want 401", i+1, status)
		}
	}
	if status, retry := get(attacker, wrong); status != http.StatusTooManyRequests || retry != "60" {
		t.Errorf("wrong token past the burst = %d, Retry-After %q; want 429, Retry-After 60", status, retry)
	}
	for range 3 {
		if status, _ := get(http.DefaultClient, debugHeaders); status != http.StatusOK {
			t.Fatalf("the real client from 127.0.0.1 = %d, want 200", status)
		}
	}
}
