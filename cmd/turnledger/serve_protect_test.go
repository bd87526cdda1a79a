package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The protections of `serve` end to end: the flags of the in-flight bounds
// and of the failed-authentication throttle, against the whole binary.

// answer is what a protection test looks at in a response.
type answer struct {
	status     int
	retryAfter string
	errorName  string
}

// send sends one request of c through hc (http.DefaultClient when nil).
func (c client) send(hc *http.Client, method, path string, body any) answer {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		json.Unmarshal(data, &e)
	}
	return answer{resp.StatusCode, resp.Header.Get("Retry-After"), e.Error}
}

// heldRequest is a request that serve has admitted and that holds its
// in-flight slots: it was sent with "Expect: 100-continue" and no body, and
// serve answered "100 Continue" when its handler began to read the body,
// which it now waits for.
type heldRequest struct {
	conn net.Conn
	r    *bufio.Reader
	body []byte
}

// holdRequest sends a request of c and returns once serve holds it.
func holdRequest(t *testing.T, c client, method, path string, body any) *heldRequest {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	b, _ := json.Marshal(body)
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n", method, path, len(b))
	for k, v := range c.headers {
		fmt.Fprintf(conn, "%s: %s\r\n", k, v)
	}
	fmt.Fprintf(conn, "\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 ") {
		t.Fatalf("%s %s sent to be held: %q, %v; want 100 Continue (the request admitted)", method, path, status, err)
	}
	if blank, err := r.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after 100 Continue: %q, %v", blank, err)
	}
	conn.SetReadDeadline(time.Time{})
	return &heldRequest{conn: conn, r: r, body: b}
}

// finish sends the body and returns the status.
func (h *heldRequest) finish(t *testing.T) int {
	t.Helper()
	if _, err := h.conn.Write(h.body); err != nil {
		t.Fatal(err)
	}
	h.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(h.r, nil)
	if err != nil {
		t.Fatalf("read the held response: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// plannerAndWorker registers in project a "planner" that may dispatch and
// a worker "w" of the capacity given, and returns their clients.
func plannerAndWorker(t *testing.T, admin client, project string, capacity int) (planner, worker client) {
	t.Helper()
	return agentClient(t, admin, project, "planner", 0, "turns:dispatch"), agentClient(t, admin, project, "w", capacity)
}

func dispatchOf(project, from, to, key string) map[string]any {
	return map[string]any{"requested_by": agentRef(project, from), "target_agent": agentRef(project, to),
		"input": map[string]any{"k": key}, "turn_kind": "k", "dispatch_key": key,
		"authority": map[string]any{"mode": "root_request", "request_id": key}}
}

// checkShed checks a refusal of a request beyond a bound.
func checkShed(t *testing.T, what string, a answer) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable || a.errorName != "ServiceUnavailableError" || a.retryAfter != "1" {
		t.Errorf("%s = %+v, want 503 ServiceUnavailableError with Retry-After 1", what, a)
	}
}

// TestServeShedsBeyondTheProjectBound: with --max-project-in-flight 2 and
// two requests of p1 in flight, a third request of p1 is answered 503 with
// Retry-After at once, another project is served, the admitted requests
// complete, and p1 is served again as soon as they have.
func TestServeShedsBeyondTheProjectBound(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--max-project-in-flight", "2", "--reap-interval", "0")
	admin := adminClient(t, base, dir)
	p1, _ := plannerAndWorker(t, admin, "p1", 4)
	p2, _ := plannerAndWorker(t, admin, "p2", 4)

	held := []*heldRequest{
		holdRequest(t, p1, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchOf("p1", "planner", "w", "held-1")),
		holdRequest(t, p1, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchOf("p1", "planner", "w", "held-2")),
	}
	checkShed(t, "a read of p1 at its bound", p1.send(nil, "GET", "/v3r1/projects/p1/projection/turns", nil))
	checkShed(t, "a dispatch of p1 at its bound", p1.send(nil, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchOf("p1", "planner", "w", "shed")))
	if a := p2.send(nil, "POST", "/v3r1/projects/p2/turns:dispatch", dispatchOf("p2", "planner", "w", "free")); a.status != http.StatusOK {
		t.Errorf("a dispatch of p2 while p1 is at its bound = %+v, want 200", a)
	}
	for i, h := range held {
		if got := h.finish(t); got != http.StatusOK {
			t.Errorf("held dispatch %d = %d, want 200 (admitted requests are served)", i+1, got)
		}
	}
	// Recovery is immediate: the very next request is served.
	if a := p1.send(nil, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchOf("p1", "planner", "w", "after")); a.status != http.StatusOK {
		t.Errorf("a dispatch of p1 once the held ones completed = %+v, want 200", a)
	}
	// The shed dispatch appended nothing: p1 holds the two held Turns and the last.
	var page struct {
		Items []struct {
			DispatchKey string `json:"dispatch_key"`
		} `json:"items"`
	}
	json.Unmarshal(admin.call("GET", "/v3r1/projects/p1/projection/turns?limit=500", nil, 200), &page)
	var keys []string
	for _, it := range page.Items {
		keys = append(keys, it.DispatchKey)
	}
	if strings.Join(keys, ",") != "held-1,held-2,after" && strings.Join(keys, ",") != "held-2,held-1,after" {
		t.Errorf("Turns of p1 = %v, want held-1, held-2 (either order) and after; the shed one appended nothing", keys)
	}
}

// TestServeShedsBeyondTheInstanceBound: with --max-in-flight 2 and two
// requests in flight, any other request but /healthz and /readyz is
// answered 503 with Retry-After at once, and served again as soon as a
// held one completes.
func TestServeShedsBeyondTheInstanceBound(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--max-in-flight", "2", "--reap-interval", "0")
	admin := adminClient(t, base, dir)
	p1, _ := plannerAndWorker(t, admin, "p1", 4)
	p2, _ := plannerAndWorker(t, admin, "p2", 4)

	held := []*heldRequest{
		holdRequest(t, p1, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchOf("p1", "planner", "w", "held-1")),
		holdRequest(t, admin, "POST", "/v3r1/projects/p1/agents:register", map[string]any{
			"spec": map[string]any{"agent_id": "late", "role": "worker", "description": "", "enabled": true, "accepts_work": true,
				"capacity": 1, "capabilities": []string{}, "grants": []string{}, "public_metadata": map[string]any{}},
			"provenance": map[string]any{"kind": "test", "external_ref": "", "payload_hash": nil}}),
	}
	for _, path := range []string{"/v3r1/projects/p2/projection/feed", "/metrics", "/v3r1/projects/p1/agents/w"} {
		checkShed(t, "GET "+path+" at the instance bound", admin.send(nil, "GET", path, nil))
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if a := admin.send(nil, "GET", path, nil); a.status != http.StatusOK {
			t.Errorf("GET %s at the instance bound = %+v, want 200 (never shed)", path, a)
		}
	}
	if got := held[0].finish(t); got != http.StatusOK {
		t.Errorf("held dispatch = %d, want 200", got)
	}
	if a := p2.send(nil, "POST", "/v3r1/projects/p2/turns:dispatch", dispatchOf("p2", "planner", "w", "after")); a.status != http.StatusOK {
		t.Errorf("a dispatch once a slot came back = %+v, want 200", a)
	}
	if got := held[1].finish(t); got != http.StatusOK {
		t.Errorf("held registration = %d, want 200", got)
	}
}

// TestServeShedsABurst: of 40 dispatches sent at once to a project bound to
// 1 request in flight, each is answered 200 or 503 with Retry-After
// (nothing else, no failed connection), and exactly the 200s are in the
// ledger: a shed command appends nothing.
func TestServeShedsABurst(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--max-project-in-flight", "1", "--reap-interval", "0")
	admin := adminClient(t, base, dir)
	p1, _ := plannerAndWorker(t, admin, "p1", 4)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const n = 40
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = p1.send(hc, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchOf("p1", "planner", "w", fmt.Sprintf("b%d", i)))
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, a := range answers {
		switch {
		case a.status == http.StatusOK:
			ok++
		case a.status == http.StatusServiceUnavailable && a.retryAfter == "1" && a.errorName == "ServiceUnavailableError":
		default:
			t.Errorf("dispatch %d of the burst = %+v, want 200 or 503 with Retry-After 1", i, a)
		}
	}
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	json.Unmarshal(admin.call("GET", "/v3r1/projects/p1/projection/turns?limit=500", nil, 200), &page)
	if ok == 0 || len(page.Items) != ok {
		t.Errorf("burst of %d at a bound of 1: %d answered 200, %d Turns in the ledger; want at least one, and the same", n, ok, len(page.Items))
	}
	t.Logf("burst of %d dispatches at --max-project-in-flight 1: %d served, %d shed", n, ok, n-ok)
}

// fromAddr sends requests from a given loopback address (127.0.0.0/8 is
// all loopback on Linux), as another remote host.
func fromAddr(addr string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
}

// TestServeThrottlesAWrongTokenFlood: with --auth-failure-burst 5, a flood
// of wrong tokens naming an agent is answered 429 with Retry-After once the
// burst is spent, while the agent's own client keeps getting 200 all along;
// another address that fails for that agent is throttled after one failure,
// and the admin surface is throttled the same way.
func TestServeThrottlesAWrongTokenFlood(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--auth-failure-burst", "5", "--auth-failure-every", "1m", "--reap-interval", "0")
	admin := adminClient(t, base, dir)
	real := agentClient(t, admin, "p", "w", 1)
	forged := client{t: t, base: base, headers: map[string]string{"X-Svc-Project-Id": "p", "X-Svc-Agent-Id": "w", "Authorization": "Bearer tla_forged"}}

	attacker := fromAddr("127.0.0.2")
	var mu sync.Mutex
	counts := map[int]int{}
	var badRetry []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				select {
				case <-stop:
					return
				default:
				}
				a := forged.send(attacker, "GET", "/v3r1/projects/p/agents/w", nil)
				mu.Lock()
				counts[a.status]++
				if n, err := strconv.Atoi(a.retryAfter); a.status == http.StatusTooManyRequests && (err != nil || n < 1 || n > 60 || a.errorName != "TooManyRequestsError") {
					badRetry = append(badRetry, fmt.Sprintf("%+v", a))
				}
				mu.Unlock()
			}
		}()
	}
	// The real agent, from its own address, while the flood runs.
	realRefused := 0
	for range 50 {
		if a := real.send(nil, "GET", "/v3r1/projects/p/agents/w", nil); a.status != http.StatusOK {
			realRefused++
		}
	}
	close(stop)
	wg.Wait()
	if realRefused > 0 {
		t.Errorf("the real agent was refused %d of 50 times during the flood, want never", realRefused)
	}
	// Up to 8 requests are checked at once, each before the failures of
	// the others are counted: 5 to 12 get to the look-up.
	if n := counts[http.StatusUnauthorized]; n < 5 || n > 5+8-1 || counts[http.StatusTooManyRequests] == 0 || len(counts) != 2 {
		t.Errorf("answers to the flood of 8 × 25 = %v, want the burst of 5 (up to 7 more checked at the same time) 401, the rest 429", counts)
	}
	if len(badRetry) > 0 {
		t.Errorf("429s without a Retry-After of 1–60 s and TooManyRequestsError: %v", badRetry[:min(3, len(badRetry))])
	}
	// The right token is served from the flooding address too (whoever
	// else fails there), while the flood keeps getting 429…
	if a := real.send(attacker, "GET", "/v3r1/projects/p/agents/w", nil); a.status != http.StatusOK {
		t.Errorf("the right token from the flooding address = %+v, want 200", a)
	}
	if a := forged.send(attacker, "GET", "/v3r1/projects/p/agents/w", nil); a.status != http.StatusTooManyRequests {
		t.Errorf("a wrong token from the flooding address = %+v, want 429", a)
	}
	// …a new address that fails for the exhausted agent gets one failure…
	bystander := fromAddr("127.0.0.3")
	if a := forged.send(bystander, "GET", "/v3r1/projects/p/agents/w", nil); a.status != http.StatusUnauthorized {
		t.Errorf("a first wrong token from a new address = %+v, want 401", a)
	}
	if a := forged.send(bystander, "GET", "/v3r1/projects/p/agents/w", nil); a.status != http.StatusTooManyRequests {
		t.Errorf("a second wrong token for the exhausted agent = %+v, want 429", a)
	}
	// …and the agent's own client still gets in.
	if a := real.send(nil, "GET", "/v3r1/projects/p/agents/w", nil); a.status != http.StatusOK {
		t.Errorf("the real agent after the flood = %+v, want 200", a)
	}
	// The admin surface: wrong admin bearers from one address.
	wrongAdmin := client{t: t, base: base, headers: map[string]string{"Authorization": "Bearer tladm_wrong"}}
	adminAttacker := fromAddr("127.0.0.4")
	for i := range 5 {
		if a := wrongAdmin.send(adminAttacker, "POST", "/admin/v1/projects/p/agent-join-invites", map[string]any{}); a.status != http.StatusUnauthorized {
			t.Fatalf("wrong admin bearer #%d = %+v, want 401", i+1, a)
		}
	}
	if a := wrongAdmin.send(adminAttacker, "POST", "/admin/v1/projects/p/agent-join-invites", map[string]any{}); a.status != http.StatusTooManyRequests || a.retryAfter == "" {
		t.Errorf("wrong admin bearer past the burst = %+v, want 429 with Retry-After", a)
	}
	if a := admin.send(nil, "GET", "/v3r1/projects/p/agents/w", nil); a.status != http.StatusOK {
		t.Errorf("the admin from its own address = %+v, want 200", a)
	}
}

// TestServeFacesShareOneFailedAuthThrottle: the HTTP API, the MCP endpoint
// and the A2A endpoint of one serve count failed authentications in one
// throttle, so that an address spends one burst of wrong tokens whichever
// face it tries them on, not a burst on each; a valid credential is served
// on every face from the throttled address all the same.
func TestServeFacesShareOneFailedAuthThrottle(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--auth-failure-burst", "3", "--auth-failure-every", "1h", "--reap-interval", "0")
	admin := adminClient(t, base, dir)
	real := agentClient(t, admin, "p", "w", 1)
	token := strings.TrimPrefix(real.headers["Authorization"], "Bearer ")
	attacker := fromAddr("127.0.0.3")

	// One request of each face with a token, from the attacker's address.
	faces := map[string]func(token string) int{
		"HTTP": func(token string) int {
			c := client{t: t, base: base, headers: map[string]string{"X-Svc-Project-Id": "p", "X-Svc-Agent-Id": "w", "Authorization": "Bearer " + token}}
			return c.send(attacker, "GET", "/v3r1/projects/p/agents/w", nil).status
		},
		"MCP": func(token string) int {
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
			req, _ := http.NewRequest("POST", base+"/mcp/projects/p/agents/w", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/list")
			req.Header.Set("Authorization", "Bearer "+token)
			return statusOf(t, attacker, req)
		},
		"A2A": func(token string) int {
			req, _ := http.NewRequest("GET", base+"/a2a/projects/p/agents/w/.well-known/agent-card.json", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			return statusOf(t, attacker, req)
		},
	}
	order := []string{"HTTP", "MCP", "A2A"}
	// The burst of three, one wrong token on each face: each is 401.
	for _, face := range order {
		if got := faces[face]("tla_wrong"); got != http.StatusUnauthorized {
			t.Errorf("the first wrong token on %s = %d, want 401", face, got)
		}
	}
	// The burst is spent on every face, not only on the one that spent it.
	for _, face := range order {
		if got := faces[face]("tla_wrong"); got != http.StatusTooManyRequests {
			t.Errorf("a wrong token on %s after three on the three faces = %d, want 429", face, got)
		}
		if got := faces[face](token); got != http.StatusOK {
			t.Errorf("the agent's own token on %s from the throttled address = %d, want 200", face, got)
		}
	}
}

// statusOf sends req through hc and returns its status.
func statusOf(t *testing.T, hc *http.Client, req *http.Request) int {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
