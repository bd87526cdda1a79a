package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleFeedOverSSE checks that the live feed reads serve's
// Server-Sent Events: it takes the stream instead of polling, and an event
// appended later arrives over it.
func TestConsoleFeedOverSSE(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	s := newConsoleScenario(t, base, dir)
	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	consoleSignInAdmin(t, ctx, base, strings.TrimPrefix(s.admin.headers["Authorization"], "Bearer "), "demo")
	// The feed reads the projection, which folds the scenario's events
	// after they are acknowledged: wait for it to hold the last one, so
	// the catch-up page is the whole scenario.
	s.admin.waitProjected(t, "/v3r1/projects/demo/projection/feed?limit=200", s.child)
	consoleDo(t, ctx, "open the live feed",
		chromedp.Navigate(base+"/console/#/p/demo/feed"),
		consoleSettled(),
		chromedp.WaitVisible(css(`#project-feed[data-mode=stream] li[data-type="turn.claimed"]`)),
	)
	// What was there when the feed opened came as one catch-up page: it
	// shows as history, not flashed as new arrivals.
	if n := consoleGet(t, ctx, "count the new items", chromedp.Evaluate[int](`document.querySelectorAll('#project-feed li.new').length`)); n != 0 {
		t.Errorf("%d items of the catch-up page are marked new", n)
	}
	s.admin.call("POST", "/v3r1/projects/demo/management/turns/"+s.other+":stop", map[string]any{
		"requested_by": agentRef("demo", "planner"), "meta": nil, "trace": nil}, 200)
	consoleDo(t, ctx, "see an event arrive over the stream",
		chromedp.WaitVisible(css(`#project-feed li.new[data-type="turn.stopped"]`)),
	)
	seqs := consoleGet(t, ctx, "read the feed", chromedp.Evaluate[[]int](`[...document.querySelectorAll('#project-feed li')].map(li => +li.dataset.seq)`))
	for i := 1; i < len(seqs); i++ {
		if seqs[i] >= seqs[i-1] {
			t.Fatalf("the feed shows ledger_seq %v: not newest first without repeats", seqs)
		}
	}
	mode := consoleGet(t, ctx, "read the feed's mode", chromedp.Evaluate[string](`document.querySelector('#project-feed').dataset.mode`))
	if mode != "stream" {
		t.Errorf("the live feed's mode = %q after events arrived, want stream (serve's SSE, not polling)", mode)
	}
}

// waitProjected reads a feed page until an item about the given id is in it.
func (c client) waitProjected(t *testing.T, path, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		json.Unmarshal(c.call("GET", path, nil, 200), &page)
		for _, it := range page.Items {
			if it.ID == id {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the feed %s has no item about %s after 10s", path, id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
