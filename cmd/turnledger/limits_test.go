package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestServeCutsASlowBody: a client that trickles a request body past
// --read-timeout is cut off instead of holding a connection and a handler.
func TestServeCutsASlowBody(t *testing.T) {
	base, _ := startEngine(t, t.TempDir(), "127.0.0.1:0", "--read-timeout", "300ms")
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /admin/v1/projects/p/agent-join-invites HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	io.Copy(io.Discard, conn) // returns when the server closes the connection
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("a trickled body held its connection for %v; want it cut near --read-timeout 300ms", took)
	}
}

// TestServeCapsConnections: with --max-conns 2, a third connection is not
// served while two are open, and is served as soon as one closes.
func TestServeCapsConnections(t *testing.T) {
	base, _ := startEngine(t, t.TempDir(), "127.0.0.1:0", "--max-conns", "2")
	addr := strings.TrimPrefix(base, "http://")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Make sure both are accepted: each answers a request.
	for _, c := range held {
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		buf := make([]byte, 12)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "HTTP/1.1 200" {
			t.Fatalf("held connection: %q, %v", buf, err)
		}
	}
	third := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := third.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("a third connection was served while --max-conns 2 were open")
	}
	held[0].Close()
	third.Timeout = 10 * time.Second
	resp, err := third.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("after a connection closed: %v", err)
	}
	resp.Body.Close()
}

func TestByteSizeFlag(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1024", 1024, true}, {"512MiB", 512 << 20, true}, {"2GiB", 2 << 30, true}, {"64KiB", 64 << 10, true},
		{"1.5GiB", 0, false}, {"-1", 0, false}, {"GiB", 0, false}, {"1GB", 0, false}, {"99999999999GiB", 0, false},
	} {
		var b byteSize
		err := b.Set(tt.in)
		if (err == nil) != tt.ok || (tt.ok && int64(b) != tt.want) {
			t.Errorf("byteSize.Set(%q) = %d, %v; want %d, ok %v", tt.in, b, err, tt.want, tt.ok)
		}
	}
}

func TestServeSetsTheMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "")
	l := defaultLimits()
	l.setMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("memory limit after serve's default = %d, want %d (1GiB)", got, 1<<30)
	}
	if code := Main(t.Context(), []string{"serve", "--memory-limit", "lots"}, io.Discard, io.Discard); code == 0 {
		t.Errorf("serve --memory-limit lots exited 0, want a usage error")
	}
}
