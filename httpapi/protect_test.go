package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/natstest"
)

func newEnvWith(t *testing.T, configure func(*httpapi.Config)) *env {
	t.Helper()
	srv := natstest.Start(t)
	return newEnvOn(t, srv.ClientURL(), &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}, configure)
}

// heldRequest sends the headers of a request and part of its body over a
// raw connection, then holds it: the server has admitted and authenticated
// it and waits for the rest of the body. finish sends the rest and returns
// the status.
type heldRequest struct {
	conn net.Conn
	rest string
}

func holdRequest(t *testing.T, e *env, who as, method, path, body string) *heldRequest {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	half := len(body) / 2
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, len(body))
	if who.admin {
		fmt.Fprintf(conn, "Authorization: Bearer %s\r\n", adminToken)
	} else {
		fmt.Fprintf(conn, "%s: %s\r\n%s: %s\r\nAuthorization: Bearer %s\r\n", httpapi.HeaderProject, who.project, httpapi.HeaderAgent, who.agent, who.token)
	}
	fmt.Fprintf(conn, "\r\n%s", body[:half])
	return &heldRequest{conn: conn, rest: body[half:]}
}

func (h *heldRequest) finish(t *testing.T) int {
	t.Helper()
	if _, err := io.WriteString(h.conn, h.rest); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(h.conn), nil)
	if err != nil {
		t.Fatalf("read held response: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitInFlight waits until the server serves n requests of project ("" for
// the instance).
func waitInFlight(t *testing.T, e *env, project string, n int) {
	t.Helper()
	checkfor.Until(t, 10*time.Second, fmt.Sprintf("%d requests in flight", n), func() bool { return e.api.InFlight(project) == n })
}

func TestLoadSheddingPerProject(t *testing.T) {
	e := newEnvWith(t, func(c *httpapi.Config) { c.MaxProjectInFlight = 2 })
	planner := e.register("p1", "planner", 0, "turns:dispatch")
	e.register("p1", "w", 4)
	other := e.register("p2", "planner", 0, "turns:dispatch")
	e.register("p2", "w", 4)

	body := func(key string) string {
		return fmt.Sprintf(`{"requested_by":{"project_id":"p1","agent_id":"planner"},"target_agent":{"project_id":"p1","agent_id":"w"},"input":{"q":%q},"turn_kind":"summarize","dispatch_key":%q,"authority":{"mode":"root_request","request_id":"r-%s"},"meta":null,"trace":null}`, key, key, key)
	}
	h1 := holdRequest(t, e, planner, "POST", "/v3r1/projects/p1/turns:dispatch", body("held-1"))
	h2 := holdRequest(t, e, planner, "POST", "/v3r1/projects/p1/turns:dispatch", body("held-2"))

	waitInFlight(t, e, "p1", 2)
	r := e.do(planner, "GET", "/v3r1/projects/p1/projection/turns", nil)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("GET beyond the project bound = %d %s, want 503", r.status, r.body)
	}
	if got := r.errorName(); got != "ServiceUnavailableError" {
		t.Errorf("shed request error = %q, want ServiceUnavailableError", got)
	}
	// Another project is not held up by p1's load.
	e.dispatch(other, "w", "p2-free")

	for i, h := range []*heldRequest{h1, h2} {
		if got := h.finish(t); got != 200 {
			t.Errorf("held dispatch %d = %d, want 200 (admitted requests are served)", i+1, got)
		}
	}
	// Recovery is immediate.
	e.dispatch(planner, "w", "after")
}

func TestLoadSheddingPerInstanceSaysRetryAfter(t *testing.T) {
	obs := &observed{}
	e := newEnvWith(t, func(c *httpapi.Config) { c.MaxInFlight, c.Metrics.Observer = 1, obs })
	planner := e.register("p1", "planner", 0, "turns:dispatch")
	e.register("p1", "w", 4)
	h := holdRequest(t, e, planner, "POST", "/v3r1/projects/p1/turns:dispatch",
		`{"requested_by":{"project_id":"p1","agent_id":"planner"},"target_agent":{"project_id":"p1","agent_id":"w"},"input":{},"turn_kind":"k","dispatch_key":"held","authority":{"mode":"root_request","request_id":"r"},"meta":null,"trace":null}`)

	waitInFlight(t, e, "", 1)
	resp, err := http.Get(e.url + "/v3r1/projects/p1/projection/feed")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("request beyond the instance bound = %d with Retry-After %q, want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// The observer (the metrics, the overview's shed commands) sees it.
	obs.mu.Lock()
	seen := slices.Clone(obs.seen)
	obs.mu.Unlock()
	if !slices.Contains(seen, httpapi.OperationShed+" "+http.StatusText(http.StatusServiceUnavailable)) {
		t.Errorf("the observer saw %q; want the shed request as %s", seen, httpapi.OperationShed)
	}
	// Health and readiness are never shed.
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(e.url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s while at the bound = %d, want 200", p, resp.StatusCode)
		}
	}
	if got := h.finish(t); got != 200 {
		t.Errorf("held dispatch = %d, want 200", got)
	}
	e.must(asAdmin, "GET", "/v3r1/projects/p1/projection/feed", nil, 200)
}

// from sends requests from a given loopback address (127.0.0.0/8 is all
// loopback on Linux), as different remote hosts.
func from(addr string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

func doFrom(t *testing.T, c *http.Client, e *env, who as) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), "GET", e.url+"/v3r1/projects/"+who.project+"/agents/"+who.agent, nil)
	req.Header.Set(httpapi.HeaderProject, who.project)
	req.Header.Set(httpapi.HeaderAgent, who.agent)
	req.Header.Set("Authorization", "Bearer "+who.token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestFailedAuthenticationIsThrottled(t *testing.T) {
	e := newEnvWith(t, func(c *httpapi.Config) { c.AuthFailures = httpapi.Rate{Burst: 5, Every: time.Second} })
	real := e.register("p1", "w", 1)
	forged := real
	forged.token = "tla_forged"
	attacker, bystander, owner := from("127.0.0.2"), from("127.0.0.3"), from("127.0.0.1")

	for i := range 5 {
		if got := doFrom(t, attacker, e, forged).StatusCode; got != 401 {
			t.Fatalf("wrong token #%d = %d, want 401", i+1, got)
		}
	}
	resp := doFrom(t, attacker, e, forged)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("wrong token past the burst = %d Retry-After %q, want 429 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// A valid credential is served from the throttled address all the same
	// (a laptop, a NAT, a proxy: whoever else fails there), while the
	// flood keeps getting 429…
	for range 3 {
		if got := doFrom(t, attacker, e, real).StatusCode; got != 200 {
			t.Errorf("right token from the throttled address = %d, want 200", got)
		}
		if got := doFrom(t, attacker, e, forged).StatusCode; got != 429 {
			t.Errorf("wrong token from the throttled address = %d, want 429", got)
		}
	}
	// …and the agent's own client, which never failed, is not locked out.
	for range 3 {
		if got := doFrom(t, owner, e, real).StatusCode; got != 200 {
			t.Fatalf("the real agent from its own address = %d, want 200", got)
		}
	}
	// Another address that fails for the exhausted agent is throttled after
	// its first failure: the agent's bucket is empty.
	if got := doFrom(t, bystander, e, forged).StatusCode; got != 401 {
		t.Errorf("first wrong token from a new address = %d, want 401", got)
	}
	if got := doFrom(t, bystander, e, forged).StatusCode; got != 429 {
		t.Errorf("second wrong token for the exhausted agent = %d, want 429", got)
	}
	// Tokens come back with time (the injected clock).
	e.clock.Advance(5 * time.Second)
	if got := doFrom(t, attacker, e, forged).StatusCode; got != 401 {
		t.Errorf("wrong token after the bucket refilled = %d, want 401", got)
	}
}

func TestFailedAdminAuthenticationIsThrottled(t *testing.T) {
	e := newEnvWith(t, func(c *httpapi.Config) { c.AuthFailures = httpapi.Rate{Burst: 3, Every: time.Minute} })
	post := func(token string) int {
		req, _ := http.NewRequest("POST", e.url+"/admin/v1/projects/p1/agent-join-invites", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := from("127.0.0.4").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 3 {
		if got := post("wrong"); got != 401 {
			t.Fatalf("wrong admin bearer = %d, want 401", got)
		}
	}
	if got := post("wrong"); got != 429 {
		t.Errorf("wrong admin bearer past the burst = %d, want 429", got)
	}
}

// TestLongPollsAndStreamsDoNotHoldSlots: a waiting long-poll claim and an
// open event stream give back their in-flight slots, so that with bounds of
// one request per project (and two per instance) commands still get in.
func TestLongPollsAndStreamsDoNotHoldSlots(t *testing.T) {
	e := newEnvWith(t, func(c *httpapi.Config) { c.MaxProjectInFlight, c.MaxInFlight = 1, 2 })
	planner := e.register("p1", "planner", 0, "turns:dispatch")
	w := e.register("p1", "w", 1)

	got := make(chan response, 1)
	go func() {
		got <- e.do(w, "POST", "/v3r1/projects/p1/agents/w/claims:claim?wait=30s", map[string]any{"agent": ref("p1", "w")})
	}()
	checkfor.Until(t, 10*time.Second, "the long poll to wait", func() bool { lp, _ := e.api.Waiting(); return lp == 1 })

	req, _ := http.NewRequest("GET", e.url+"/v3r1/projects/p1/projection/feed", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("event stream = %d, want 200", resp.StatusCode)
	}
	checkfor.Until(t, 10*time.Second, "the stream to start", func() bool { _, subs := e.api.Waiting(); return subs == 1 })
	if n := e.api.InFlight("p1"); n != 0 {
		t.Errorf("in flight in p1 with a long poll waiting and a stream open = %d, want 0", n)
	}
	// The dispatch gets in, and wakes the long poll with its Turn.
	tv := e.dispatch(planner, "w", "k1")
	r := <-got
	var c claimed
	r.decode(t, &c)
	if r.status != 200 || c.Turn.TurnID != tv.TurnID {
		t.Errorf("long poll = %d %s, want the dispatched Turn %s", r.status, r.body, tv.TurnID)
	}
}

// TestFeedPagesAreBoundInBytes: over HTTP, a feed page of limit 500 with
// 200 KiB records stops at the byte budget with has_more, and the cursor
// reads every record exactly once.
func TestFeedPagesAreBoundInBytes(t *testing.T) {
	e := newEnv(t)
	planner := e.register("p1", "planner", 0, "turns:dispatch")
	w := e.register("p1", "w", 1)
	tv := e.dispatch(planner, "w", "big")
	c := e.claim(w)
	big := strings.Repeat("x", 200<<10)
	const records = 25 // 5 MiB
	for i := range records {
		e.must(w, "POST", "/v3r1/projects/p1/turns/"+tv.TurnID+"/semantic-records",
			map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{"i": i, "text": big}}, 200)
	}
	items, pages := allPagesOf[struct {
		LedgerSeq uint64 `json:"ledger_seq"`
	}](t, e, "feed", "/v3r1/projects/p1/turns/"+tv.TurnID+"/feed")
	var seen []uint64
	for _, it := range items {
		seen = append(seen, it.LedgerSeq)
	}
	if pages < 2 || len(seen) != records+2 { // dispatched, claimed, the records
		t.Errorf("read %d items in %d pages, want %d items in at least 2 pages", len(seen), pages, records+2)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("feed pages gave ledger_seq %v: not increasing", seen)
		}
	}
}

// TestTurnListPagesAreBoundInBytes: over HTTP, a Turn list page of limit
// 500 whose Turns carry 200 KiB inputs stops at the byte budget with
// has_more, and the cursor lists every Turn exactly once.
func TestTurnListPagesAreBoundInBytes(t *testing.T) {
	e := newEnv(t)
	planner := e.register("p1", "planner", 0, "turns:dispatch")
	e.register("p1", "w", 1)
	big := strings.Repeat("x", 200<<10)
	const turns = 25 // 5 MiB of inputs
	var want []string
	for i := range turns {
		var tv turn
		e.must(planner, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchBody("p1", "planner", "w", fmt.Sprintf("big-%d", i), map[string]any{"text": big}), 200).decode(t, &tv)
		want = append(want, tv.TurnID)
	}
	items, pages := allPagesOf[struct {
		TurnID string `json:"turn_id"`
	}](t, e, "Turn list", "/v3r1/projects/p1/projection/turns")
	var got []string
	for _, it := range items {
		got = append(got, it.TurnID)
	}
	if pages < 2 {
		t.Errorf("listed %d Turns of 200 KiB in %d page(s), want at least 2", len(got), pages)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Turns listed through the pages (-want +got):\n%s", diff)
	}
}

// allPagesOf reads every page of limit 500 of the list at path, following
// after_ledger_seq until has_more is false (at most 100 pages), as the
// admin. Each page must stay under about 4 MiB (what names the list in the
// failure).
func allPagesOf[T any](t *testing.T, e *env, what, path string) (items []T, pages int) {
	t.Helper()
	after := uint64(0)
	for pages < 100 {
		var p struct {
			Items   []T    `json:"items"`
			Next    uint64 `json:"next_after_ledger_seq"`
			HasMore bool   `json:"has_more"`
		}
		r := e.must(asAdmin, "GET", fmt.Sprintf("%s?limit=500&after_ledger_seq=%d", path, after), nil, 200)
		if len(r.body) > 5<<20 {
			t.Fatalf("%s page of %d bytes, want at most about 4 MiB", what, len(r.body))
		}
		r.decode(t, &p)
		pages++
		items = append(items, p.Items...)
		after = p.Next
		if !p.HasMore {
			break
		}
	}
	return items, pages
}

// A mount with Project counts its requests against the project's in-flight
// bound, shared with the API's routes: beyond it, 503 with Retry-After.
func TestMountedRequestsCountAgainstTheProjectBound(t *testing.T) {
	entered, unblock := make(chan struct{}, 1), make(chan struct{})
	stub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/block") {
			entered <- struct{}{}
			<-unblock
		}
		w.WriteHeader(200)
	})
	projectOf := func(path string) (string, bool) {
		rest, _ := strings.CutPrefix(path, "/stub/")
		p, _, ok := strings.Cut(rest, "/")
		return p, ok && p != ""
	}
	e := newEnvWith(t, func(c *httpapi.Config) {
		c.MaxProjectInFlight = 1
		c.Mounts = []httpapi.Mount{{Prefix: "/stub/", Handler: stub, Project: projectOf}}
	})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release) // before the server closes, should the test fail
	planner := e.register("p1", "planner", 0, "turns:dispatch")
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := http.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	held := make(chan int, 1)
	go func() {
		resp, err := http.Get(e.url + "/stub/p1/block")
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	<-entered
	waitInFlight(t, e, "p1", 1)

	if resp := get("/stub/p1/other"); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("mounted request beyond the project bound = %d with Retry-After %q, want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if r := e.do(planner, "GET", "/v3r1/projects/p1/projection/turns", nil); r.status != http.StatusServiceUnavailable {
		t.Errorf("API request while a mounted one holds the project's bound = %d %s, want 503", r.status, r.body)
	}
	// Another project, and a path the mount names no project of, are not held up.
	for _, p := range []string{"/stub/p2/other", "/stub/"} {
		if resp := get(p); resp.StatusCode != 200 {
			t.Errorf("GET %s while p1 is at its bound = %d, want 200", p, resp.StatusCode)
		}
	}

	release()
	if got := <-held; got != 200 {
		t.Errorf("held mounted request = %d, want 200 (admitted requests are served)", got)
	}
	waitInFlight(t, e, "p1", 0)
	if resp := get("/stub/p1/other"); resp.StatusCode != 200 {
		t.Errorf("mounted request after the held one ended = %d, want 200", resp.StatusCode)
	}
}
