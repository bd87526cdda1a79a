package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/kernel"
)

// sseEvent is one event (or comment) read from a stream.
type sseEvent struct {
	ID, Event, Data string
	Comment         string
}

// stream is an open event stream.
type stream struct {
	resp   *http.Response
	cancel context.CancelFunc
	events chan sseEvent
	done   chan error // the read error that ended the stream (io.EOF at a clean end)
}

// openStream opens an event stream of path as who, with extra headers.
func openStream(t *testing.T, url string, who as, path string, hdr map[string]string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	switch {
	case who.admin:
		req.Header.Set("Authorization", "Bearer "+adminToken)
	case who.agent != "":
		req.Header.Set(httpapi.HeaderProject, who.project)
		req.Header.Set(httpapi.HeaderAgent, who.agent)
		req.Header.Set("Authorization", "Bearer "+who.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s (stream) = %v", path, err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s (stream) = %d %s %s, want 200 text/event-stream", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	s := &stream{resp: resp, cancel: cancel, events: make(chan sseEvent, 10000), done: make(chan error, 1)}
	go func() {
		defer close(s.events)
		br := bufio.NewReader(resp.Body)
		var ev sseEvent
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				s.done <- err
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if ev != (sseEvent{}) {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ev.Comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[6:]
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next event that is not a comment.
func (s *stream) next(t *testing.T) sseEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatal("the stream ended")
			}
			if ev.Comment != "" && ev.Event == "" {
				continue
			}
			return ev
		case <-timeout:
			t.Fatal("no event on the stream within 20s")
		}
	}
}

// feedEvent is what a test compares of a feed item or a stream event.
type feedEvent struct {
	Seq  uint64
	Type string
	Data string
}

// allFeed reads every page of a feed.
func (e *env) allFeed(who as, path string) []feedEvent {
	e.t.Helper()
	var out []feedEvent
	after := uint64(0)
	for {
		var pg struct {
			Items   []rawItem `json:"items"`
			HasMore bool      `json:"has_more"`
		}
		e.must(who, "GET", fmt.Sprintf("%s?after_ledger_seq=%d&limit=500", path, after), nil, 200).decode(e.t, &pg)
		for _, it := range pg.Items {
			out = append(out, feedEvent{Seq: it.LedgerSeq, Type: it.Type, Data: string(it.raw)})
			after = it.LedgerSeq
		}
		if !pg.HasMore {
			return out
		}
	}
}

// rawItem keeps a feed item's own bytes next to its cursor fields.
type rawItem struct {
	LedgerSeq uint64
	Type      string
	raw       []byte
}

func (r *rawItem) UnmarshalJSON(b []byte) error {
	var v struct {
		LedgerSeq uint64 `json:"ledger_seq"`
		Type      string `json:"type"`
	}
	if err := jsonUnmarshal(b, &v); err != nil {
		return err
	}
	r.LedgerSeq, r.Type, r.raw = v.LedgerSeq, v.Type, append([]byte(nil), b...)
	return nil
}

// TestStreamScenarioAcrossReconnect: a subscriber of the project feed sees
// every event of a random scenario exactly once and in order, with the same
// item JSON as the pages, across a forced reconnect with Last-Event-ID.
func TestStreamScenarioAcrossReconnect(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	e := newEnv(t)
	boss := e.register("p", "boss", 1, kernel.GrantDispatch, kernel.GrantManage)
	workers := []as{e.register("p", "w1", 2), e.register("p", "w2", 2)}

	var got []feedEvent
	s := openStream(t, e.url, asAdmin, "/v3r1/projects/p/projection/feed", nil)
	take := func(s *stream, upTo uint64) {
		for len(got) == 0 || got[len(got)-1].Seq < upTo {
			ev := s.next(t)
			seq, err := strconv.ParseUint(ev.ID, 10, 64)
			if err != nil {
				t.Fatalf("event id %q is not a ledger_seq", ev.ID)
			}
			got = append(got, feedEvent{Seq: seq, Type: ev.Event, Data: ev.Data})
		}
	}

	held := map[string]*claimed{}
	steps := 40 + rng.IntN(20)
	for i := range steps {
		if i == steps/2 {
			// Force a reconnect: read what is there, drop the connection,
			// and resume from the last id seen.
			take(s, e.engine.Folded("p")) // the last event of the project; answers may come before its commit
			s.close()
			last := got[len(got)-1].Seq
			// A few events while nobody listens.
			e.dispatch(boss, "w1", fmt.Sprintf("gap-%d", i))
			e.must(boss, "POST", "/v3r1/projects/p/management/agents/boss:heartbeat-presence", nil, 200)
			s = openStream(t, e.url, asAdmin, "/v3r1/projects/p/projection/feed?after_ledger_seq=1", map[string]string{"Last-Event-ID": strconv.FormatUint(last, 10)})
		}
		w := workers[rng.IntN(len(workers))]
		switch op := rng.IntN(4); {
		case op == 0 || len(held) == 0:
			e.dispatch(boss, w.agent, fmt.Sprintf("k%d", i))
			if c := e.claim(w); c != nil {
				held[c.Turn.TurnID] = c
			}
		default:
			for id, c := range held {
				who := workers[0]
				if c.Claim.AgentID == "w2" {
					who = workers[1]
				}
				switch op {
				case 1:
					e.must(who, "POST", "/v3r1/projects/p/turns/"+id+"/semantic-records",
						map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{"i": i}}, 200)
				case 2:
					e.must(who, "POST", "/v3r1/projects/p/turns/"+id+":finish",
						map[string]any{"claim": c.Claim, "outcome": "succeeded", "final_payload": map[string]any{"i": i}, "final_record_role": "final"}, 200)
					delete(held, id)
				case 3:
					e.must(who, "POST", "/v3r1/projects/p/turns/"+id+":suspend", map[string]any{"claim": c.Claim}, 200)
					delete(held, id)
				}
				break
			}
		}
	}
	take(s, e.engine.Folded("p")) // the last event of the project; answers may come before its commit
	want := e.allFeed(asAdmin, "/v3r1/projects/p/projection/feed")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stream events differ from the feed pages (-pages +stream):\n%s", diff)
	}
}

// TestStreamFeedsAndPolicy: the Turn and agent feeds stream too, with the
// read policy of their pages; errors before the stream starts are answered
// as for a page.
func TestStreamFeedsAndPolicy(t *testing.T) {
	e := newEnv(t)
	boss := e.register("p", "boss", 1, kernel.GrantDispatch)
	w := e.register("p", "w", 1)
	other := e.register("p", "other", 1)
	tv := e.dispatch(boss, "w", "k1")

	ts := openStream(t, e.url, w, "/v3r1/projects/p/turns/"+tv.TurnID+"/feed", nil)
	if ev := ts.next(t); ev.Event != kernel.EvTurnDispatched {
		t.Errorf("first event of the Turn stream = %q, want %s", ev.Event, kernel.EvTurnDispatched)
	}
	ags := openStream(t, e.url, w, "/v3r1/projects/p/agents/w/feed", nil)
	c := e.claim(w)
	if c == nil {
		t.Fatal("claim = null")
	}
	if ev := ts.next(t); ev.Event != kernel.EvTurnClaimed {
		t.Errorf("Turn stream after the claim = %q, want %s", ev.Event, kernel.EvTurnClaimed)
	}
	for {
		ev := ags.next(t)
		if ev.Event == kernel.EvTurnClaimed {
			break
		}
	}

	for _, tc := range []struct {
		who    as
		path   string
		hdr    string
		status int
	}{
		{other, "/v3r1/projects/p/turns/" + tv.TurnID + "/feed", "", 403},
		{other, "/v3r1/projects/p/agents/w/feed", "", 403},
		{w, "/v3r1/projects/p/projection/feed", "", 403},
		{asNobody, "/v3r1/projects/p/projection/feed", "", 401},
		{asAdmin, "/v3r1/projects/p/projection/feed?bogus=1", "", 422},
		{asAdmin, "/v3r1/projects/p/projection/feed", "x", 422},
		{asAdmin, "/v3r1/projects/p/turns/nope/feed", "", 404},
	} {
		req, _ := http.NewRequest("GET", e.url+tc.path, nil)
		req.Header.Set("Accept", "text/event-stream")
		if tc.hdr != "" {
			req.Header.Set("Last-Event-ID", tc.hdr)
		}
		switch {
		case tc.who.admin:
			req.Header.Set("Authorization", "Bearer "+adminToken)
		case tc.who.agent != "":
			req.Header.Set(httpapi.HeaderProject, tc.who.project)
			req.Header.Set(httpapi.HeaderAgent, tc.who.agent)
			req.Header.Set("Authorization", "Bearer "+tc.who.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("stream %s as %q (Last-Event-ID %q) = %d %s %s, want %d JSON", tc.path, tc.who.agent, tc.hdr, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status)
		}
	}
}

// pushEnv serves a second API over e's engine and store, with cfg's push
// settings.
func pushEnv(t *testing.T, e *env, push httpapi.PushConfig) (string, *httpapi.Server) {
	t.Helper()
	hcfg := httpapi.DefaultConfig()
	hcfg.AdminTokenHash = kernel.HashSecret(adminToken)
	hcfg.Now = e.clock.Now
	hcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	hcfg.Push = push
	api, err := httpapi.New(e.engine, e.store, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		api.StopWaiting()
		hs.Close()
	})
	return hs.URL, api
}

// TestStreamHeartbeatRechecksAccess: an idle stream gets heartbeats, and a
// credential revoked meanwhile ends it with an error event.
func TestStreamHeartbeatRechecksAccess(t *testing.T) {
	e := newEnv(t)
	w := e.register("p", "w", 1)
	url, api := pushEnv(t, e, httpapi.PushConfig{HeartbeatInterval: 20 * time.Millisecond})
	s := openStream(t, url, w, "/v3r1/projects/p/agents/w/feed", nil)
	var sawHeartbeat bool
	for !sawHeartbeat {
		select {
		case ev := <-s.events:
			sawHeartbeat = ev.Comment == "heartbeat"
		case <-time.After(20 * time.Second):
			t.Fatal("no heartbeat within 20s")
		}
	}
	var creds struct {
		Items []struct {
			CredentialID string `json:"credential_id"`
		} `json:"items"`
	}
	e.must(asAdmin, "GET", "/v3r1/projects/p/agents/w/credentials", nil, 200).decode(t, &creds)
	e.must(asAdmin, "POST", "/v3r1/projects/p/agents/w/credentials/"+creds.Items[0].CredentialID+":revoke", nil, 200)
	for {
		ev := s.next(t)
		if ev.Event == "error" {
			if !strings.Contains(ev.Data, `"error":"UnauthorizedError"`) {
				t.Errorf("error event data = %s, want an UnauthorizedError body", ev.Data)
			}
			break
		}
	}
	select {
	case err := <-s.done:
		if err != io.EOF {
			t.Errorf("stream ended with %v, want EOF", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end after the error event")
	}
	checkfor.Until(t, 10*time.Second, "no subscriber counted", func() bool { _, n := api.Waiting(); return n == 0 })
}

// TestStreamSlowClientCut: a client that stops reading is disconnected
// once a write waits longer than the write timeout.
func TestStreamSlowClientCut(t *testing.T) {
	e := newEnv(t)
	boss := e.register("p", "boss", 1, kernel.GrantDispatch)
	w := e.register("p", "w", 1)
	url, api := pushEnv(t, e, httpapi.PushConfig{WriteTimeout: 50 * time.Millisecond})
	tv := e.dispatch(boss, "w", "k1")
	c := e.claim(w)
	if c == nil || c.Turn.TurnID != tv.TurnID {
		t.Fatal("claim did not return the Turn")
	}
	// The client opens the stream and never reads it.
	req, _ := http.NewRequest("GET", url+"/v3r1/projects/p/projection/feed", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Up to 30 MB of records fill the socket buffers on both sides.
	big := strings.Repeat("x", 250_000)
	for i := 0; i < 120; i++ {
		e.must(w, "POST", "/v3r1/projects/p/turns/"+tv.TurnID+"/semantic-records",
			map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{"blob": big}}, 200)
		if _, n := api.Waiting(); n == 0 {
			break
		}
	}
	checkfor.Until(t, 20*time.Second, "the slow subscriber to be cut", func() bool { _, n := api.Waiting(); return n == 0 })
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestStreamSaysWhenItCaughtUp: a stream writes a ": caught up" comment
// after every item the feed held when it opened (over several pages)
// and before the items that come later, so that a client tells history
// from new arrivals however the bytes reach it.
func TestStreamSaysWhenItCaughtUp(t *testing.T) {
	e := newEnv(t)
	boss := e.register("p", "boss", 1, kernel.GrantDispatch)
	e.register("p", "w", 8)
	for i := range 5 {
		e.dispatch(boss, "w", fmt.Sprintf("k%d", i))
	}
	held := len(e.allFeed(asAdmin, "/v3r1/projects/p/projection/feed"))
	s := openStream(t, e.url, asAdmin, "/v3r1/projects/p/projection/feed?limit=2", nil)
	var before []string
	timeout := time.After(20 * time.Second)
read:
	for {
		select {
		case ev, ok := <-s.events:
			switch {
			case !ok:
				t.Fatal("the stream ended")
			case ev.Comment == "caught up":
				break read
			case ev.Event != "":
				before = append(before, ev.ID)
			}
		case <-timeout:
			t.Fatalf("no \": caught up\" within 20s, after %d items", len(before))
		}
	}
	if len(before) != held {
		t.Fatalf("the stream sent %d items before it said it caught up, want the %d the feed held", len(before), held)
	}
	e.dispatch(boss, "w", "later")
	if ev := s.next(t); ev.Event != kernel.EvTurnDispatched {
		t.Errorf("after the catch-up the stream sent %q, want the later dispatch", ev.Event)
	}
}
