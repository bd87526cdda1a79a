package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnledger/turnledger/serve"
)

// TestServeCutsASlowBody: a client that trickles a request body past
// --read-timeout is cut off instead of holding a connection and a handler.
func TestServeCutsASlowBody(t *testing.T) {
	base, _ := startEngine(t, t.TempDir(), "127.0.0.1:0", "--read-timeout", "300ms")
	checkSlowBodyCut(t, base, "POST /admin/v1/projects/p/agent-join-invites", "")
}

// checkSlowBodyCut sends the headers of a request with a body of 1000 bytes
// and one byte of it, and waits for the server to close the connection:
// well before 15 s, so near a read timeout of a fraction of a second.
func checkSlowBodyCut(t *testing.T, base, request, headers string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 1000\r\n\r\n{", request, headers)
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	io.Copy(io.Discard, conn) // returns when the server closes the connection
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("a trickled body held its connection for %v; want it cut near the read timeout", took)
	}
}

// TestServeCapsConnections: with --max-conns 2, a third connection is not
// served while two are open, and is served as soon as one closes.
func TestServeCapsConnections(t *testing.T) {
	base, _ := startEngine(t, t.TempDir(), "127.0.0.1:0", "--max-conns", "2")
	checkConnectionCap(t, base, "/healthz")
}

// checkConnectionCap checks a server started with a cap of 2 connections:
// a third is not served while two are open, and is served as soon as one
// closes. health is a path answered 200 without credentials.
func checkConnectionCap(t *testing.T, base, health string) {
	t.Helper()
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
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", health)
		buf := make([]byte, 12)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "HTTP/1.1 200" {
			t.Fatalf("held connection: %q, %v", buf, err)
		}
	}
	third := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := third.Get(base + health); err == nil {
		resp.Body.Close()
		t.Fatalf("a third connection was served while 2 were open, the cap")
	}
	held[0].Close()
	third.Timeout = 10 * time.Second
	resp, err := third.Get(base + health)
	if err != nil {
		t.Fatalf("after a connection closed: %v", err)
	}
	resp.Body.Close()
}

func TestServeSetsTheMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "")
	l := serve.DefaultLimits()
	l.SetMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("memory limit after serve's default = %d, want %d (1GiB)", got, 1<<30)
	}
	if code := Main(t.Context(), []string{"serve", "--memory-limit", "lots"}, io.Discard, io.Discard); code == 0 {
		t.Errorf("serve --memory-limit lots exited 0, want a usage error")
	}
}

// TestLongPollsAndStreamsOutliveTheWriteTimeout: a long-poll claim and an
// event stream extend their own write deadlines, so a wait longer than
// --write-timeout still answers, and a stream still delivers.
func TestLongPollsAndStreamsOutliveTheWriteTimeout(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--write-timeout", "500ms", "--reap-interval", "0")
	admin := adminClient(t, base, dir)
	planner, w := plannerAndWorker(t, admin, "p", 1)

	// A long poll that ends empty after 1.5 s answers null, not a cut connection.
	start := time.Now()
	body := w.call("POST", "/v3r1/projects/p/agents/w/claims:claim?wait=1500ms", map[string]any{"agent": agentRef("p", "w")}, 200)
	if got := strings.TrimSpace(string(body)); got != "null" || time.Since(start) < 1500*time.Millisecond {
		t.Fatalf("long poll past the write timeout = %q after %v, want null after the wait", got, time.Since(start))
	}

	// A stream open for longer than the write timeout still delivers.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/v3r1/projects/p/projection/feed", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", admin.headers["Authorization"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		buf := make([]byte, 64<<10)
		var acc string
		for {
			n, err := resp.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n")
				if i < 0 {
					break
				}
				lines <- acc[:i]
				acc = acc[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	time.Sleep(time.Second) // past --write-timeout
	planner.call("POST", "/v3r1/projects/p/turns:dispatch", map[string]any{"requested_by": agentRef("p", "planner"), "target_agent": agentRef("p", "w"),
		"input": map[string]any{}, "turn_kind": "k", "dispatch_key": "late", "authority": map[string]any{"mode": "root_request", "request_id": "r"}}, 200)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended before the late dispatch arrived")
			}
			if l == "event: turn.dispatched" {
				return
			}
		case <-deadline:
			t.Fatalf("no turn.dispatched event on a stream open past the write timeout")
		}
	}
}

// TestServeMaxPageBytes: --max-page-bytes is the byte budget of the pages
// serve answers (here the Turn list and the project feed), and a budget out
// of range is a usage error.
func TestServeMaxPageBytes(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--max-page-bytes", "64KiB", "--reap-interval", "0")
	admin := adminClient(t, base, dir)
	planner, _ := plannerAndWorker(t, admin, "p", 1)
	text := strings.Repeat("x", 30<<10)
	for i := range 4 {
		planner.call("POST", "/v3r1/projects/p/turns:dispatch", map[string]any{"requested_by": agentRef("p", "planner"), "target_agent": agentRef("p", "w"),
			"input": map[string]any{"text": text}, "turn_kind": "k", "dispatch_key": fmt.Sprintf("d%d", i), "authority": map[string]any{"mode": "root_request", "request_id": fmt.Sprintf("r%d", i)}}, 200)
	}
	type page struct {
		Items   []json.RawMessage `json:"items"`
		Next    uint64            `json:"next_after_ledger_seq"`
		HasMore bool              `json:"has_more"`
	}
	for _, path := range []string{"/v3r1/projects/p/projection/turns", "/v3r1/projects/p/projection/feed"} {
		var sizes []int
		total, after := 0, uint64(0)
		for range 20 {
			var p page
			if err := json.Unmarshal(admin.call("GET", fmt.Sprintf("%s?limit=500&after_ledger_seq=%d", path, after), nil, 200), &p); err != nil {
				t.Fatal(err)
			}
			large := 0 // items that carry an input of 30 KiB
			for _, it := range p.Items {
				if len(it) > 30<<10 {
					large++
				}
			}
			sizes = append(sizes, large)
			total += large
			after = p.Next
			if !p.HasMore {
				break
			}
		}
		if len(sizes) < 2 || slices.Max(sizes) > 2 || total != 4 {
			t.Errorf("GET %s?limit=500 with --max-page-bytes 64KiB: pages with %v items of 30 KiB; want the 4 in pages of at most 2", path, sizes)
		}
	}
	for _, bad := range []string{"0", "512", "2GiB"} {
		if code := Main(t.Context(), []string{"serve", "--data", t.TempDir(), "--max-page-bytes", bad}, io.Discard, io.Discard); code != 2 {
			t.Errorf("serve --max-page-bytes %s exited %d, want 2 (usage)", bad, code)
		}
	}
}
