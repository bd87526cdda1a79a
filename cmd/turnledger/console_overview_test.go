package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/kernel"
)

// knownSeries is an hour of trends whose charts the test knows: the first
// half unsampled (the instance had not started), then a minute i with i%5
// dispatches, 2 succeeded and 1 failed in the last minute, a queue that
// grows by one a minute, claim waits of i/100 s (p50) and i/50 s (p95),
// and 2 commands shed and 1 throttled two minutes ago.
func knownSeries(now time.Time) httpapi.Trends {
	start := now.Truncate(time.Minute).Add(-59 * time.Minute)
	tr := httpapi.Trends{Now: now, MinuteS: 60}
	for i := range 60 {
		p := httpapi.TrendPoint{At: start.Add(time.Duration(i) * time.Minute), Finished: map[string]float64{}}
		for _, o := range kernel.AllOutcomes {
			p.Finished[o] = 0
		}
		if i >= 30 {
			v := func(x float64) *float64 { return &x }
			p.Sampled = true
			p.Dispatched = float64(i % 5)
			p.Queued, p.AwaitingInput, p.ProjectionLagEvents = v(float64(i-30)), v(1), v(0)
			p.ClaimWaitP50S, p.ClaimWaitP95S = v(float64(i)/100), v(float64(i)/50)
		}
		if i == 59 {
			p.Finished["succeeded"], p.Finished["failed"] = 2, 1
		}
		if i == 57 {
			p.Shed, p.Throttled = 2, 1
		}
		tr.Points = append(tr.Points, p)
	}
	return tr
}

// chartBar is a bar as the page draws it.
type chartBar struct {
	Series string
	I      int
	V      float64
	Height float64
}

// TestConsoleOverview: the overview draws the server's own last hour (the
// scenario's three dispatches are in its dispatch chart), then, with the
// trends answered from a known series (the browser's request intercepted),
// each bar at its minute with its height to scale, the stacked outcomes of
// a minute on each other, each line through its minutes with a value and
// broken where there is none, and the legends' totals and last values; at
// 1280×800 and 390×844 without sideways scrolling.
func TestConsoleOverview(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	s := newConsoleScenario(t, base, dir)
	token := strings.TrimPrefix(s.admin.headers["Authorization"], "Bearer ")
	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	consoleSignInAdmin(t, ctx, base, token, "demo")

	const bars = `(id) => [...document.querySelectorAll('#' + id + ' rect[data-series]')].map(r => ({
		Series: r.dataset.series, I: +r.dataset.i, V: +r.dataset.v, Height: +r.getAttribute('height')}))`
	consoleDo(t, ctx, "open the overview from the header",
		chromedp.Click(css(`#overview-link`)),
		consoleSettled(),
		chromedp.WaitVisible(css(`#chart-dispatched svg`)),
	)
	real := consoleGet(t, ctx, "read the dispatch chart", chromedp.Evaluate[[]chartBar](`(`+bars+`)('chart-dispatched')`))
	n := 0.0
	for _, b := range real {
		n += b.V
	}
	if n != 3 {
		t.Errorf("the overview's dispatch chart of the server's own trends counts %v dispatches, want the scenario's 3: %+v", n, real)
	}

	// From here the trends are the known series.
	now := time.Now().UTC()
	body, _ := json.Marshal(knownSeries(now))
	chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			go chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: e.RequestID, ResponseCode: 200,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}}, Body: body})
		}
	})
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/admin/v1/trends*"}}}); err != nil {
		t.Fatalf("intercept the trends: %v", err)
	}

	for _, size := range [][2]int64{{1280, 800}, {390, 844}} {
		consoleDo(t, ctx, fmt.Sprintf("the overview of the known series at %d×%d", size[0], size[1]),
			chromedp.EmulateViewport(size[0], size[1]),
			chromedp.Navigate(base+"/console/#/"),
			consoleSettled(),
			chromedp.Navigate(base+"/console/#/overview"),
			consoleSettled(),
			chromedp.WaitVisible(css(`#chart-refused svg`)),
		)
		// Bars: at their minute, their height v/top of the 140-unit plot.
		var want []chartBar
		for i := 30; i < 60; i++ {
			if v := float64(i % 5); v > 0 {
				want = append(want, chartBar{"dispatched", i, v, v / 5 * 140})
			}
		}
		got := consoleGet(t, ctx, "read the dispatch chart", chromedp.Evaluate[[]chartBar](`(`+bars+`)('chart-dispatched')`))
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 0.01 })); diff != "" {
			t.Errorf("at %d px the dispatch bars (-want +got):\n%s", size[0], diff)
		}
		// Stacked: the failed bar of the last minute stands on the
		// succeeded one (top 5: 2 → 56 units, 1 → 28).
		stack := consoleGet(t, ctx, "read the outcome chart", chromedp.Evaluate[[]map[string]float64](`[...document.querySelectorAll('#chart-finished rect[data-series]')].map(r => ({
			i: +r.dataset.i, v: +r.dataset.v, y: +r.getAttribute('y'), h: +r.getAttribute('height'), failed: r.dataset.series === 'failed' ? 1 : 0}))`))
		wantStack := []map[string]float64{{"i": 59, "v": 2, "y": 84, "h": 56, "failed": 0}, {"i": 59, "v": 1, "y": 56, "h": 28, "failed": 1}}
		if diff := cmp.Diff(wantStack, stack); diff != "" {
			t.Errorf("at %d px the outcome bars (-want +got):\n%s", size[0], diff)
		}
		// Lines: through the 30 sampled minutes, none before.
		lines := consoleGet(t, ctx, "read the lines", chromedp.Evaluate[map[string]int](`Object.fromEntries([...document.querySelectorAll('#overview polyline[data-series]')].map(l => [l.dataset.series, l.getAttribute('points').split(' ').length]))`))
		wantLines := map[string]int{"queued": 30, "awaiting_input": 30, "claim_wait_p50": 30, "claim_wait_p95": 30, "projection_lag": 30}
		if diff := cmp.Diff(wantLines, lines); diff != "" {
			t.Errorf("at %d px the lines and their points (-want +got):\n%s", size[0], diff)
		}
		legend := consoleGet(t, ctx, "read the legends", chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelectorAll('#overview .legend li')].map(li => [li.closest('section').id + '/' + li.dataset.series, li.querySelector('strong').textContent]))`))
		for k, v := range map[string]string{
			"chart-dispatched/dispatched": "60 in the hour", "chart-finished/succeeded": "2 in the hour", "chart-finished/failed": "1 in the hour",
			"chart-waiting/queued": "29 now", "chart-claim-wait/claim_wait_p50": "590 ms now", "chart-claim-wait/claim_wait_p95": "1.2 s now",
			"chart-run/run_p50": "— now", "chart-refused/shed": "2 in the hour", "chart-refused/throttled": "1 in the hour",
		} {
			if legend[k] != v {
				t.Errorf("at %d px the legend %s reads %q, want %q", size[0], k, legend[k], v)
			}
		}
		consoleShot(t, ctx, fmt.Sprintf("overview-known-%d.png", size[0]))
		consoleDocsCopy(t, fmt.Sprintf("overview-known-%d.png", size[0]), fmt.Sprintf("overview-%d.png", size[0]))
	}
}

// consoleDocsCopy copies the screenshot shot to docs/console/ as name when
// TURNLEDGER_CONSOLE_DOCS=1 (how the documentation's are made: see
// docs/console.md).
func consoleDocsCopy(t *testing.T, shot, name string) {
	t.Helper()
	if os.Getenv("TURNLEDGER_CONSOLE_DOCS") != "1" {
		return
	}
	buf, err := os.ReadFile(filepath.Join(consoleShotsDir(t), shot))
	if err == nil {
		err = os.WriteFile(filepath.Join("..", "..", "docs", "console", name), buf, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestConsolePagesAtBothWidths opens every page of the console at 1280×800
// and 390×844 — sign-in, projects, overview, stuck work, Turns, a finished
// Turn with a final payload, agents, an agent, the live feed — and checks
// that none scrolls sideways or shows an object as text (consoleShot). With
// TURNLEDGER_CONSOLE_DOCS=1 the screenshots are copied to docs/console/ (how
// the documentation's are made: see docs/console.md).
func TestConsolePagesAtBothWidths(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	s := newConsoleScenario(t, base, dir)
	s.writer.call("POST", "/v3r1/projects/demo/turns/"+s.root+":finish", map[string]any{"claim": s.claim, "outcome": "succeeded",
		"final_payload": map[string]any{"summary": "Three fixes and one feature."}, "final_record_role": "summary", "meta": nil, "trace": nil}, 200)
	token := strings.TrimPrefix(s.admin.headers["Authorization"], "Bearer ")
	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	// The documentation's overview is TestConsoleOverview's, of a known
	// series; this one's is of the scenario's few minutes.
	shoot := func(t *testing.T, ctx context.Context, name string) {
		t.Helper()
		consoleShot(t, ctx, name)
		if !strings.HasPrefix(name, "overview-") {
			consoleDocsCopy(t, name, name)
		}
	}
	pages := []struct{ name, route, ready string }{
		{"projects", "#/", `#projects li`},
		{"overview", "#/overview", `#chart-refused svg`},
		{"stuck", "#/p/demo", `#stuck-summary`},
		{"turns", "#/p/demo/turns", `#turns-table a.turn-link`},
		{"turn", "#/p/demo/turns/" + s.root, `#turn-snapshot pre.json`},
		{"agents", "#/p/demo/agents", `#agents-table`},
		{"agent", "#/p/demo/agents/writer", `#agent-feed li`},
		{"feed", "#/p/demo/feed", `#project-feed li`},
	}
	for _, size := range [][2]int64{{1280, 800}, {390, 844}} {
		consoleDo(t, ctx, fmt.Sprintf("a %d×%d viewport", size[0], size[1]), chromedp.EmulateViewport(size[0], size[1]))
		consoleDo(t, ctx, "open the sign-in page", chromedp.Navigate(base+"/console/"), consoleSettled(), chromedp.WaitVisible(css(`#signin-form`)))
		shoot(t, ctx, fmt.Sprintf("signin-%d.png", size[0]))
		consoleSignInAdmin(t, ctx, base, token, "demo")
		for _, pg := range pages {
			consoleDo(t, ctx, "open "+pg.route,
				chromedp.Navigate(base+"/console/"+pg.route),
				consoleSettled(),
				chromedp.WaitVisible(css(pg.ready)),
			)
			shoot(t, ctx, fmt.Sprintf("%s-%d.png", pg.name, size[0]))
		}
		consoleDo(t, ctx, "sign out", chromedp.Click(css(`#signout`)), chromedp.WaitVisible(css(`#signin-form`)))
	}
}
