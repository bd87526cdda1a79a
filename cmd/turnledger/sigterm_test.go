package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/checkfor"
)

// TestSIGTERMUnderLoad starts serve as a child process and, with requests in
// flight, sends it SIGTERM: three long-poll claims waiting, an event stream
// open, a dispatch whose body the server is reading (held back by the test
// with Expect: 100-continue), and three clients dispatching in a loop. Then
// the long polls answer null, the stream ends cleanly, new connections are
// refused while the held dispatch is still being served, the held dispatch
// answers 200 once its body arrives, no request answers 5xx, serve exits 0
// within a bound, and after a restart every acknowledged dispatch is there.
func TestSIGTERMUnderLoad(t *testing.T) {
	dir := t.TempDir()
	c := startServeChild(t, dir)
	admin := adminClient(t, c.base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	agentClient(t, admin, "p1", "busy", 1)
	var pollers []client
	for i := range 3 {
		pollers = append(pollers, agentClient(t, admin, "p1", fmt.Sprintf("idle%d", i), 1))
	}
	body := func(key string) map[string]any {
		return map[string]any{
			"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", "busy"), "input": map[string]any{"k": key},
			"turn_kind": "summarize", "dispatch_key": key, "authority": map[string]any{"mode": "root_request", "request_id": key},
		}
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	send := func(cl client, method, path string, b any, h map[string]string) (*http.Response, []byte, error) {
		data, _ := json.Marshal(b)
		r, _ := http.NewRequest(method, c.base+path, bytes.NewReader(data))
		for k, v := range cl.headers {
			r.Header.Set(k, v)
		}
		for k, v := range h {
			r.Header.Set(k, v)
		}
		resp, err := hc.Do(r)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		return resp, got, err
	}

	// Long polls: nothing is ever queued for the idle agents.
	type answer struct {
		status int
		body   string
		err    error
	}
	polls := make(chan answer, len(pollers))
	for i, p := range pollers {
		go func() {
			resp, b, err := send(p, "POST", fmt.Sprintf("/v3r1/projects/p1/agents/idle%d/claims:claim?wait=60s", i), map[string]any{"agent": agentRef("p1", fmt.Sprintf("idle%d", i))}, nil)
			a := answer{err: err, body: strings.TrimSpace(string(b))}
			if resp != nil {
				a.status = resp.StatusCode
			}
			polls <- a
		}()
	}
	// An event stream of the project's feed.
	streamEnd := make(chan error, 1)
	streamOpen := make(chan struct{})
	go func() {
		r, _ := http.NewRequest("GET", c.base+"/v3r1/projects/p1/projection/feed", nil)
		for k, v := range req.headers {
			r.Header.Set(k, v)
		}
		r.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			streamEnd <- err
			close(streamOpen)
			return
		}
		defer resp.Body.Close()
		close(streamOpen)
		_, err = io.Copy(io.Discard, resp.Body)
		streamEnd <- err // nil: the stream ended cleanly
	}()
	<-streamOpen
	checkfor.Until(t, 10*time.Second, "the long polls and the stream to show in /metrics", func() bool {
		_, m, err := send(client{}, "GET", "/metrics", nil, nil)
		return err == nil && strings.Contains(string(m), "turnledger_claim_long_polls_waiting 3") && strings.Contains(string(m), "turnledger_sse_subscribers 1")
	})

	// Dispatches in a loop from three clients, each answer recorded.
	var mu sync.Mutex
	acked := map[string]string{} // dispatch_key → turn_id
	var bad []string
	stopLoops := make(chan struct{})
	var loops sync.WaitGroup
	for w := range 3 {
		loops.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stopLoops:
					return
				default:
				}
				key := fmt.Sprintf("loop%d-%d", w, n)
				resp, b, err := send(req, "POST", "/v3r1/projects/p1/turns:dispatch", body(key), map[string]string{"Idempotency-Key": key})
				if err != nil {
					return // refused or cut: serve has stopped taking requests
				}
				var tv struct {
					TurnID string `json:"turn_id"`
				}
				mu.Lock()
				if resp.StatusCode == http.StatusOK && json.Unmarshal(b, &tv) == nil && tv.TurnID != "" {
					acked[key] = tv.TurnID
				} else {
					bad = append(bad, fmt.Sprintf("dispatch %s = %d %s", key, resp.StatusCode, b))
				}
				mu.Unlock()
			}
		})
	}
	nacked := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	checkfor.Until(t, 20*time.Second, "30 dispatches from the loops", func() bool { return nacked() >= 30 })

	// A dispatch in flight: its headers are sent with Expect: 100-continue,
	// and the server's "100 Continue" says its handler is reading the body,
	// which the test holds back until serve has stopped listening.
	u, _ := url.Parse(c.base)
	held, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldBody, _ := json.Marshal(body("held"))
	var head strings.Builder
	fmt.Fprintf(&head, "POST /v3r1/projects/p1/turns:dispatch HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\nIdempotency-Key: held\r\n", u.Host, len(heldBody))
	for k, v := range req.headers {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(held, head.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(held)
	held.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("held dispatch: first line %q, %v; want 100 Continue", line, err)
	}
	if line, err := br.ReadString('\n'); err != nil || line != "\r\n" {
		t.Fatalf("held dispatch: %q, %v after 100 Continue; want the blank line", line, err)
	}

	signalled := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The long polls answer null, the stream ends cleanly.
	for range pollers {
		select {
		case a := <-polls:
			if a.err != nil || a.status != http.StatusOK || a.body != "null" {
				t.Errorf("long-poll claim across SIGTERM = %d %q %v, want 200 null", a.status, a.body, a.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("a long-poll claim did not answer within 10s of SIGTERM")
		}
	}
	select {
	case err := <-streamEnd:
		if err != nil {
			t.Errorf("the event stream ended with %v across SIGTERM, want a clean end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the event stream did not end within 10s of SIGTERM")
	}
	// New connections are refused while the held dispatch is being served.
	checkfor.Until(t, 4*time.Second, "serve to refuse new connections", func() bool {
		conn, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err == nil {
			conn.Close()
			return false
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("a new connection after SIGTERM: %v, want connection refused", err)
		}
		return true
	})
	select {
	case <-c.done:
		t.Fatalf("serve exited (%v) before the held dispatch was answered", c.err)
	default:
	}
	// The held dispatch finishes with a proper answer.
	if _, err := held.Write(heldBody); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("held dispatch: %v", err)
	}
	hb, _ := io.ReadAll(resp.Body)
	var tv struct {
		TurnID string `json:"turn_id"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(hb, &tv) != nil || tv.TurnID == "" {
		t.Errorf("held dispatch across SIGTERM = %d %s, want 200 and its Turn", resp.StatusCode, hb)
	}
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not exit within 15s of SIGTERM:\n%s", c.out.String())
	}
	exited := time.Since(signalled)
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("serve exited with %d on SIGTERM under load, want 0:\n%s", code, c.out.String())
	}
	close(stopLoops)
	loops.Wait()
	for _, b := range bad {
		t.Errorf("%s, want 200 (a request serve took must be answered properly)", b)
	}
	acked["held"] = tv.TurnID

	// Every acknowledged dispatch is on the ledger, once.
	c = startServeChild(t, dir)
	req.base = c.base
	for key, id := range acked {
		var got struct {
			Input map[string]any `json:"input"`
		}
		json.Unmarshal(req.call("GET", "/v3r1/projects/p1/turns/"+id, nil, 200), &got)
		if got.Input["k"] != key {
			t.Errorf("Turn %s after the restart has input %v, want the dispatch %s", id, got.Input, key)
		}
	}
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	json.Unmarshal(req.call("GET", "/v3r1/projects/p1/projection/turns?limit=500", nil, 200), &page)
	if len(page.Items) < len(acked) {
		t.Errorf("after the restart %d Turns, want at least the %d acknowledged", len(page.Items), len(acked))
	}
	t.Logf("SIGTERM with 3 long polls, a stream, a held dispatch and 3 dispatch loops in flight: exit 0 in %v; %d acknowledged dispatches all kept", exited.Round(time.Millisecond), len(acked))
}
