package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/turnledger/turnledger/internal/testclock"
)

// TestConsoleFeedBelowTheHorizon opens, in the console, the page of a Turn
// whose dispatch a retention run moved to the archive (it was stopped
// since): its feed, which starts at 0, says so and goes on live from the
// horizon instead of retrying for ever; the project page shows the
// retention's horizon.
func TestConsoleFeedBelowTheHorizon(t *testing.T) {
	dir := t.TempDir()
	clock := &testclock.Offset{}
	s := startRetentionService(t, dir, clock.Now)
	t.Cleanup(func() { s.Close() })
	base := s.URL()
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch")
	agentClient(t, admin, "p1", "worker", 1)
	turn := dispatchIn(req, "worker", "k1")
	clock.Advance(48 * time.Hour)
	admin.call("POST", "/v3r1/projects/p1/management/turns/"+turn+":stop", map[string]any{
		"requested_by": agentRef("p1", "req"), "meta": nil, "trace": nil}, 200)
	runRetention(t, s)
	horizon := s.Retention().Status().HorizonLedgerSeq

	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	consoleSignInAdmin(t, ctx, base, strings.TrimPrefix(admin.headers["Authorization"], "Bearer "), "p1")
	consoleDo(t, ctx, "open the Turn",
		chromedp.Navigate(base+"/console/#/p/p1/turns/"+turn),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turn-feed-gone`)),
		chromedp.WaitVisible(css(`#turn-feed li[data-type="turn.stopped"]`)),
	)
	note := consoleGet(t, ctx, "read the note", chromedp.Evaluate[string](`document.querySelector('#turn-feed-gone').textContent`))
	if !strings.Contains(note, "#"+strconv.FormatUint(horizon, 10)) {
		t.Errorf("the feed's note = %q, want it to name the horizon #%d", note, horizon)
	}
	seqs := consoleGet(t, ctx, "read the feed", chromedp.Evaluate[[]int](`[...document.querySelectorAll('#turn-feed li')].map(li => Number(li.dataset.seq))`))
	for _, seq := range seqs {
		if uint64(seq) < horizon {
			t.Errorf("the feed shows #%d, below the horizon %d", seq, horizon)
		}
	}
	consoleDo(t, ctx, "open the project",
		chromedp.Navigate(base+"/console/#/p/p1"),
		consoleSettled(),
		chromedp.WaitVisible(css(`#retention`)),
	)
	if text := consoleGet(t, ctx, "read the retention", chromedp.Evaluate[string](`document.querySelector('#retention').textContent`)); !strings.Contains(text, "the feeds begin at #"+strconv.FormatUint(horizon, 10)) {
		t.Errorf("the project page's retention = %q, want the horizon #%d", text, horizon)
	}
}
