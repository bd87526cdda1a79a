package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/testclock"
	"github.com/turnledger/turnledger/serve"
)

// startConsoleService runs serve's service in the test's process on dir with
// the clock now and the reaper off, and returns its base URL. The admin
// token is in dir/admin-token.
func startConsoleService(t *testing.T, dir string, now func() time.Time) string {
	t.Helper()
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", dir
	cfg.ReapInterval = 0
	cfg.Kernel.Now = now
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := serve.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("startService = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s.URL()
}

// consoleStuckRow is what a row of a stuck-work table shows: the Turn it
// links to, the agent it links to, and its reason(s).
type consoleStuckRow struct {
	TurnHref  string `json:"turn_href"`
	AgentHref string `json:"agent_href"`
	Why       string `json:"why"`
}

// TestConsoleStuckReasons lists each reason a queued Turn cannot start, each
// for a Turn whose target is in that state: drained, disabled (registered
// again with enabled false), not accepting work (registered again with
// accepts_work false), at capacity (both its claims held), offline (last
// seen longer ago than the presence window: serve's clock is set ten
// minutes back for its heartbeat, past kernel.PresenceWindow) and never seen; a claim past its expiry
// (taken on that earlier clock with the default 60 s lease, the reaper off);
// and two stops requested of claimed Turns, not yet stopped. Every row names
// its reason and links to its Turn and its agent. Then, with the lists read
// one Turn a page and one page each, a note names every list cut short.
func TestConsoleStuckReasons(t *testing.T) {
	dir := t.TempDir()
	clock := &testclock.Offset{}
	clock.Set(-10 * time.Minute)
	base := startConsoleService(t, dir, clock.Now)
	admin := adminClient(t, base, dir)
	const project = "ops"
	planner := agentClient(t, admin, project, "planner", 0, "turns:dispatch")
	agentClient(t, admin, project, "drained-a", 1)
	agentClient(t, admin, project, "disabled-a", 1)
	agentClient(t, admin, project, "closed-a", 1)
	full := agentClient(t, admin, project, "full-a", 2)
	agentClient(t, admin, project, "gone-a", 1)
	agentClient(t, admin, project, "never-a", 1)
	late := agentClient(t, admin, project, "late-a", 1)
	dispatch := func(to, key string) string {
		var v struct {
			TurnID string `json:"turn_id"`
		}
		json.Unmarshal(planner.call("POST", "/v3r1/projects/"+project+"/turns:dispatch", map[string]any{
			"requested_by": agentRef(project, "planner"), "target_agent": agentRef(project, to),
			"input": map[string]any{"k": key}, "turn_kind": "summarize", "dispatch_key": key,
			"authority": map[string]any{"mode": "root_request", "request_id": key}, "meta": nil, "trace": nil,
		}, 200), &v)
		return v.TurnID
	}
	claim := func(c client, agent, want string) {
		var won struct {
			Claim map[string]any `json:"claim"`
		}
		json.Unmarshal(c.call("POST", "/v3r1/projects/"+project+"/agents/"+agent+"/claims:claim", map[string]any{"agent": agentRef(project, agent)}, 200), &won)
		if won.Claim["turn_id"] != want {
			t.Fatalf("%s claimed %v, want %s", agent, won.Claim["turn_id"], want)
		}
	}
	heartbeat := func(agent string) {
		admin.call("POST", "/v3r1/projects/"+project+"/management/agents/"+agent+":heartbeat-presence", map[string]any{
			"agent": agentRef(project, agent), "meta": nil, "trace": nil}, 200)
	}
	reregister := func(agent string, enabled, acceptsWork bool) {
		admin.call("POST", "/v3r1/projects/"+project+"/agents:register", map[string]any{
			"spec": map[string]any{"agent_id": agent, "role": "worker", "description": "", "enabled": enabled, "accepts_work": acceptsWork,
				"capacity": 1, "capabilities": []string{"summarize"}, "grants": []string{}, "public_metadata": map[string]any{}},
			"provenance": map[string]any{"kind": "test", "external_ref": "", "payload_hash": nil},
		}, 200)
	}

	// Ten minutes ago: gone-a was last seen, and late-a took a claim whose
	// 60 s lease ran out nine minutes ago.
	heartbeat("gone-a")
	expiredTurn := dispatch("late-a", "k-late")
	claim(late, "late-a", expiredTurn)
	clock.Set(0)

	drained, disabled, closed := dispatch("drained-a", "k-drained"), dispatch("disabled-a", "k-disabled"), dispatch("closed-a", "k-closed")
	held1, held2, waiting := dispatch("full-a", "k-held1"), dispatch("full-a", "k-held2"), dispatch("full-a", "k-waiting")
	offline, never := dispatch("gone-a", "k-offline"), dispatch("never-a", "k-never")
	claim(full, "full-a", held1)
	claim(full, "full-a", held2)
	for _, id := range []string{held1, held2} {
		admin.call("POST", "/v3r1/projects/"+project+"/management/turns/"+id+":stop", map[string]any{
			"requested_by": agentRef(project, "planner"), "meta": nil, "trace": nil}, 200)
	}
	admin.call("POST", "/v3r1/projects/"+project+"/management/agents/drained-a:drain", map[string]any{
		"agent": agentRef(project, "drained-a"), "requested_by": agentRef(project, "planner"), "meta": nil, "trace": nil}, 200)
	reregister("disabled-a", false, true)
	reregister("closed-a", true, false)
	for _, a := range []string{"drained-a", "disabled-a", "closed-a"} {
		heartbeat(a) // online: each is stuck for its one reason only
	}

	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	consoleSignInAdmin(t, ctx, base, strings.TrimPrefix(admin.headers["Authorization"], "Bearer "), project)
	consoleDo(t, ctx, "open the stuck work",
		chromedp.Click(css(`#projects a[href="#/p/`+project+`"]`)),
		consoleSettled(),
		chromedp.WaitVisible(css(`#blocked table`)),
	)
	// rows reads a stuck-work table: per Turn linked, the agent linked and
	// the reasons.
	rows := func(section string) map[string]consoleStuckRow {
		t.Helper()
		js := `JSON.stringify(Object.fromEntries([...document.querySelectorAll('#` + section + ` tbody tr')].map(tr => {
			const turn = tr.querySelector('a[href*="/turns/"]'), agent = tr.querySelector('a[href*="/agents/"]'), why = tr.querySelector('.why');
			return [turn ? turn.textContent : '', {turn_href: turn ? turn.getAttribute('href') : '', agent_href: agent ? agent.getAttribute('href') : '',
				why: why ? [...why.children].map(b => b.textContent).join(', ') : ''}];
		})))`
		var got map[string]consoleStuckRow
		if err := json.Unmarshal([]byte(consoleGet(t, ctx, "read #"+section, chromedp.Evaluate[string](js))), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	row := func(turn, agent, why string) consoleStuckRow {
		return consoleStuckRow{TurnHref: "#/p/" + project + "/turns/" + turn, AgentHref: "#/p/" + project + "/agents/" + agent, Why: why}
	}
	want := map[string]consoleStuckRow{
		drained:  row(drained, "drained-a", "drained"),
		disabled: row(disabled, "disabled-a", "disabled"),
		closed:   row(closed, "closed-a", "not accepting work"),
		waiting:  row(waiting, "full-a", "at capacity"),
		offline:  row(offline, "gone-a", "offline"),
		never:    row(never, "never-a", "never seen"),
	}
	if diff := cmp.Diff(want, rows("blocked")); diff != "" {
		t.Errorf("queued Turns that cannot start (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]consoleStuckRow{expiredTurn: row(expiredTurn, "late-a", "")}, rows("expired")); diff != "" {
		t.Errorf("claims past their expiry (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]consoleStuckRow{held1: row(held1, "full-a", ""), held2: row(held2, "full-a", "")}, rows("stops")); diff != "" {
		t.Errorf("stops requested, not yet stopped (-want +got):\n%s", diff)
	}
	summary := consoleGet(t, ctx, "read the summary", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#stuck-summary .n')].map(n => n.textContent)`))
	if diff := cmp.Diff([]string{"6", "1", "2"}, summary[:3]); diff != "" {
		t.Errorf("the summary's counts (-want +got):\n%s", diff)
	}
	if consoleGet(t, ctx, "look for the note", chromedp.Evaluate[bool](`!!document.querySelector('#stuck-cut')`)) {
		t.Errorf("every list was read whole, yet the page says some were cut:\n%s", consolePageText(ctx))
	}
	consoleShot(t, ctx, "stuck-reasons.png")

	// One Turn a page, one page a list: the queued, claimed and pending
	// stop lists all go on, and the note names each with a link to the rest.
	consoleDo(t, ctx, "read one Turn of each list",
		chromedp.Navigate(base+"/console/#/p/"+project+"?limit=1&pages=1"),
		consoleSettled(),
		chromedp.WaitVisible(css(`#stuck-cut`)),
	)
	cut := consoleGet(t, ctx, "read the note", chromedp.Evaluate[[]map[string]string](
		`[...document.querySelectorAll('#stuck-cut li')].map(li => ({List: li.dataset.list, Href: (li.querySelector('a') || {getAttribute: () => ''}).getAttribute('href')}))`))
	var lists []string
	for _, c := range cut {
		lists = append(lists, c["List"])
		if !strings.HasPrefix(c["Href"], "#/p/"+project+"/turns?") || !strings.Contains(c["Href"], "after=") {
			t.Errorf("the note's link for the %s list is %q, want the Turns list from where the reading stopped", c["List"], c["Href"])
		}
	}
	if diff := cmp.Diff([]string{"queued", "claimed", "stops"}, lists); diff != "" {
		t.Errorf("the lists the note names as cut (-want +got):\n%s", diff)
	}
	summary = consoleGet(t, ctx, "read the summary", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#stuck-summary .n')].map(n => n.textContent)`))
	if diff := cmp.Diff([]string{"1+", "1+", "1+"}, summary[:3]); diff != "" {
		t.Errorf("the summary's counts of lists read in part (-want +got):\n%s", diff)
	}
	consoleShot(t, ctx, "stuck-cut.png")
	// The note's link to the rest of the pending stops lists the other one.
	consoleDo(t, ctx, "follow the note to the rest of the stops",
		chromedp.Click(css(`#stuck-cut li[data-list=stops] a`)),
		chromedp.Poll[chromedp.Void](`location.hash.includes('stop_requested_only=true')`),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turns-table a.turn-link`)),
	)
	rest := consoleGet(t, ctx, "read the list", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#turns-table a.turn-link')].map(a => a.textContent)`))
	if diff := cmp.Diff([]string{held2}, rest); diff != "" {
		t.Errorf("the rest of the pending stops (-want +got):\n%s", diff)
	}
}
