package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// The web console's browser tests drive Debian's headless Chromium through
// chromedp against the whole binary's `serve`. `.ci/test` installs chromium
// when it is missing (.ci/chromium.sh). They save screenshots of the pages
// under consoleShotsDir.

// consoleChromium is the browser: $TURNLEDGER_CHROMIUM, else chromium on the
// PATH, else /usr/bin/chromium.
func consoleChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TURNLEDGER_CHROMIUM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	t.Fatal("the console's browser tests need Chromium: run `bash .ci/test` (it installs Debian's chromium), or `apt-get install -y chromium`, or set TURNLEDGER_CHROMIUM")
	return ""
}

// consoleShotsDir is where the screenshots go: $TURNLEDGER_TEST_OUTPUT/console,
// by default .test-output/console at the repository's root (ignored by git).
func consoleShotsDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("TURNLEDGER_TEST_OUTPUT")
	if base == "" {
		base = filepath.Join("..", "..", ".test-output")
	}
	dir := filepath.Join(base, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot folder: %v", err)
	}
	return dir
}

// consoleBrowser starts a fresh headless Chromium (its own profile in a
// temporary directory) with a 1280×800 viewport and returns a tab's context.
// Every request the page makes is recorded in requests.
func consoleBrowser(t *testing.T, requests *consoleRequests) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(consoleChromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first call starts the browser; it must not carry a timeout.
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the runtime domain: %v", err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			requests.add(e.Request.URL)
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			desc := d.Text
			if d.Exception != nil {
				desc += " " + d.Exception.Description
			}
			t.Logf("page exception at %s:%d: %s", d.URL, d.LineNumber+1, desc)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value))
				}
				t.Logf("console.%s: %s", e.Type, strings.Join(args, " "))
			}
		}
	})
	if err != nil {
		t.Fatalf("listen to the tab: %v", err)
	}
	// The window's 1280×800 holds the browser's own frame too: the page
	// itself gets 1280×800 only by emulation.
	consoleDo(t, ctx, "set a 1280×800 viewport", chromedp.EmulateViewport(1280, 800))
	return ctx
}

type consoleRequests struct {
	mu   sync.Mutex
	urls []string
}

func (r *consoleRequests) add(u string) {
	r.mu.Lock()
	r.urls = append(r.urls, u)
	r.mu.Unlock()
}

func (r *consoleRequests) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.urls...)
}

// consoleStepTimeout bounds one step of a browser test.
const consoleStepTimeout = 20 * time.Second

// consoleDo runs browser steps, failing the test with what was being done.
func consoleDo(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, consoleStepTimeout)
	defer cancel()
	for i, step := range steps {
		if _, err := chromedp.Run(ctx, step); err != nil {
			t.Fatalf("%s, step %d of %d: %v\n%s", what, i+1, len(steps), err, consolePageText(ctx))
		}
	}
}

// consolePageText is what the page shows, for a failure message.
func consolePageText(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		return "(the page cannot be read: " + err.Error() + ")"
	}
	return "the page shows:\n" + text
}

// consoleGet runs one browser action that returns a value.
func consoleGet[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, consoleStepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// consoleShot saves a screenshot of the whole page as name, after checking
// that the page is no wider than the viewport (no sideways scrolling) and
// shows no value rendered as "[object …]".
func consoleShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if text := consoleGet(t, ctx, "read the page", chromedp.Evaluate[string](`document.body.innerText`)); strings.Contains(text, "[object ") {
		t.Errorf("the page of %s shows an object as text:\n%s", name, text)
	}
	width := consoleGet(t, ctx, "measure the viewport", chromedp.Evaluate[int](`document.documentElement.clientWidth`))
	if overflow := consoleGet(t, ctx, "measure the page", chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`)); overflow > 0 {
		t.Errorf("at %d px wide the page of %s is %d px wider than the screen", width, name, overflow)
	}
	buf := consoleGet(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(consoleShotsDir(t), name), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// consoleSettled waits until the console has rendered the page of the
// current URL (route() marks #main with the hash it rendered and aria-busy).
func consoleSettled() chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`(() => { const m = document.getElementById('main');
		return m.dataset.rendered === location.hash && m.getAttribute('aria-busy') === 'false'; })()`,
		chromedp.WithPollingInterval(20*time.Millisecond))
}

// css is a CSS selector of the first matching element.
type css = chromedp.CSS

// consoleScenario is a project with a requester, a worker holding a claim
// on a root Turn that has one child Turn, and a second root Turn of another
// kind, all made over the API.
type consoleScenario struct {
	admin, planner, writer client
	root, child, other     string
	claim                  map[string]any
}

func newConsoleScenario(t *testing.T, base, dir string) consoleScenario {
	t.Helper()
	var s consoleScenario
	s.admin = adminClient(t, base, dir)
	s.planner = agentClient(t, s.admin, "demo", "planner", 0, "turns:dispatch")
	s.writer = agentClient(t, s.admin, "demo", "writer", 2)
	agentClient(t, s.admin, "demo", "helper", 1)
	dispatch := func(c client, from, to, kind, key string, authority map[string]any) string {
		var v struct {
			TurnID string `json:"turn_id"`
		}
		json.Unmarshal(c.call("POST", "/v3r1/projects/demo/turns:dispatch", map[string]any{
			"requested_by": agentRef("demo", from), "target_agent": agentRef("demo", to),
			"input": map[string]any{"text": "Summarise the release notes."}, "turn_kind": kind,
			"dispatch_key": key, "authority": authority, "meta": nil, "trace": nil,
		}, 200), &v)
		return v.TurnID
	}
	s.other = dispatch(s.planner, "planner", "helper", "translate", "k-other", map[string]any{"mode": "root_request", "request_id": "r0"})
	s.root = dispatch(s.planner, "planner", "writer", "summarize", "k-root", map[string]any{"mode": "root_request", "request_id": "r1"})
	var won struct {
		Claim map[string]any `json:"claim"`
	}
	json.Unmarshal(s.writer.call("POST", "/v3r1/projects/demo/agents/writer/claims:claim", map[string]any{"agent": agentRef("demo", "writer")}, 200), &won)
	if won.Claim["turn_id"] != s.root {
		t.Fatalf("the writer claimed %v, want the root Turn %s", won.Claim["turn_id"], s.root)
	}
	s.claim = won.Claim
	s.writer.call("POST", "/v3r1/projects/demo/turns/"+s.root+"/semantic-records", map[string]any{
		"claim": s.claim, "role": "progress", "payload": map[string]any{"note": "read the notes; asking helper for research"}, "meta": nil, "trace": nil}, 200)
	s.child = dispatch(s.writer, "writer", "helper", "research", "k-child", map[string]any{"mode": "child_derivation", "parent_claim": s.claim})
	return s
}

// TestConsoleInBrowser signs in as the admin, finds a Turn by filter, opens
// it, sees its lineage tree with its child, stops it through the
// confirmation, sees the stop arrive in the live feed, and sees the state
// change when the worker then finishes it — all in headless Chromium against
// a real serve.
func TestConsoleInBrowser(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	s := newConsoleScenario(t, base, dir)
	token := strings.TrimPrefix(s.admin.headers["Authorization"], "Bearer ")

	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)

	consoleSignInAdmin(t, ctx, base, token, "demo")
	consoleShot(t, ctx, "projects.png")

	// The first page of a project: stuck work. The child and the other
	// Turn wait for helper, which was never seen.
	consoleDo(t, ctx, "open the project",
		chromedp.Click(css(`#projects a[href="#/p/demo"]`)),
		chromedp.WaitVisible(css(`#stuck-summary`)),
	)
	stuck := consoleGet(t, ctx, "read the stuck work", chromedp.Text(css(`#blocked`)))
	for _, want := range []string{s.child, s.other, "never seen"} {
		if !strings.Contains(stuck, want) {
			t.Errorf("the stuck-work list lacks %q:\n%s", want, stuck)
		}
	}
	consoleShot(t, ctx, "stuck.png")

	// Filter the Turns list to claimed summarize Turns: only the root.
	consoleDo(t, ctx, "filter the Turns",
		chromedp.Click(css(`#nav a[data-nav=turns]`)),
		chromedp.WaitVisible(css(`#turn-filters`)),
		consoleSettled(),
		chromedp.SetValue(css(`#turn-filters select[name=state]`), "claimed"),
		chromedp.SendKeys(css(`#turn-filters input[name=turn_kind]`), "summarize"),
		chromedp.Click(css(`#turn-filters button[type=submit]`)),
		chromedp.Poll[chromedp.Void](`location.hash.includes('state=claimed')`),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turns-table a.turn-link`)),
	)
	const listed = `[...document.querySelectorAll('#turns-table a.turn-link')].map(a => a.textContent)`
	if rows := consoleGet(t, ctx, "read the list", chromedp.Evaluate[[]string](listed)); len(rows) != 1 || rows[0] != s.root {
		t.Fatalf("the filtered list shows %v, want only the root Turn %s", rows, s.root)
	}
	if hash := consoleGet(t, ctx, "read the URL", chromedp.Evaluate[string](`location.hash`)); !strings.Contains(hash, "state=claimed") || !strings.Contains(hash, "turn_kind=summarize") {
		t.Errorf("the filters are not in the URL: %s", hash)
	}
	consoleShot(t, ctx, "turns.png")

	// Open it: snapshot, claim countdown, lineage tree with the child.
	childSel := `#lineage li[data-turn="` + s.child + `"]`
	consoleDo(t, ctx, "open the Turn",
		chromedp.Click(css(`#turns-table a.turn-link`)),
		chromedp.WaitVisible(css(`#turn-state`)),
		chromedp.WaitVisible(css(childSel)),
		chromedp.WaitVisible(css(`#turn-feed li[data-type="turn.claimed"]`)),
		chromedp.WaitVisible(css(`#turn-context li[data-turn-seq="1"]`)),
	)
	state := consoleGet(t, ctx, "read the state", chromedp.Text(css(`#turn-state`)))
	countdown := consoleGet(t, ctx, "read the countdown", chromedp.Text(css(`#turn-claim .countdown`)))
	rel := consoleGet(t, ctx, "read the child", chromedp.AttributeValue(css(childSel), "data-relation"))
	if state != "claimed" || !strings.HasPrefix(countdown, "expires in ") || rel.Value != "descendant" {
		t.Errorf("the Turn page shows state %q, countdown %q, child relation %q; want claimed, expires in …, descendant", state, countdown, rel.Value)
	}
	nested := `!!document.querySelector('#lineage li[data-turn="` + s.root + `"] > ul > li[data-turn="` + s.child + `"]')`
	if !consoleGet(t, ctx, "read the tree", chromedp.Evaluate[bool](nested)) {
		t.Errorf("the child is not drawn under the root in the lineage tree")
	}
	consoleShot(t, ctx, "turn.png")

	// By keyboard: Space on Stop opens the confirmation with Cancel
	// focused; Escape closes it and nothing is asked of the server. (Space,
	// not Enter: chromedp's Enter sends a second keypress, which would
	// press Cancel at once.)
	consoleDo(t, ctx, "cancel a stop by keyboard",
		chromedp.Focus(css(`#stop-turn`)),
		chromedp.KeyEvent(" "),
		chromedp.WaitVisible(css(`#confirm-ok`)),
	)
	if focused := consoleGet(t, ctx, "read the focus", chromedp.Evaluate[string](`document.activeElement.id`)); focused != "confirm-cancel" {
		t.Errorf("the confirmation opens with %q focused, want confirm-cancel", focused)
	}
	consoleDo(t, ctx, "press Escape",
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotVisible(css(`#confirm`)),
	)
	var snap struct {
		StopRequested bool `json:"stop_requested"`
	}
	json.Unmarshal(s.admin.call("GET", "/v3r1/projects/demo/turns/"+s.root, nil, 200), &snap)
	if snap.StopRequested {
		t.Fatalf("Escape on the confirmation stopped the Turn")
	}

	// Stop it through the confirmation dialog: the stop request arrives
	// in the live feed and the snapshot shows it.
	consoleDo(t, ctx, "stop the Turn",
		chromedp.Click(css(`#stop-turn`)),
		chromedp.WaitVisible(css(`#confirm-ok`)),
		chromedp.Click(css(`#confirm-ok`)),
		chromedp.WaitVisible(css(`#turn-feed li[data-type="turn.stop_requested"]`)),
		chromedp.WaitVisible(css(`#turn-snapshot .badge.stop`)),
		chromedp.WaitNotPresent(css(`#stop-turn`)),
		// The Stop button is gone: the keyboard focus goes to the
		// page's content, not back to the document's start.
		chromedp.Poll[chromedp.Void](`document.activeElement && document.activeElement.id === 'main'`),
	)
	// The worker sees the stop and finishes with outcome stopped, outside
	// the browser: the page follows live.
	s.writer.call("POST", "/v3r1/projects/demo/turns/"+s.root+":finish", map[string]any{
		"claim": s.claim, "outcome": "stopped", "final_payload": nil, "final_record_role": "final", "meta": nil, "trace": nil}, 200)
	consoleDo(t, ctx, "see the Turn finish",
		chromedp.WaitVisible(css(`#turn-feed li[data-type="turn.finished"]`)),
		chromedp.WaitVisible(css(`#turn-state.finished`)),
	)
	if outcome := consoleGet(t, ctx, "read the outcome", chromedp.Text(css(`#turn-outcome`))); outcome != "stopped" {
		t.Errorf("outcome shown = %q, want stopped", outcome)
	}
	consoleShot(t, ctx, "turn-stopped.png")

	// The live project feed, paused and resumed: what was appended while
	// paused arrives on resume.
	consoleDo(t, ctx, "open the live feed",
		chromedp.Click(css(`#nav a[data-nav=feed]`)),
		chromedp.WaitVisible(css(`#project-feed li[data-type="turn.finished"]`)),
		chromedp.Click(css(`#project-feed-pause`)),
		chromedp.WaitVisible(css(`#project-feed-pause[aria-pressed=true]`)),
	)
	s.admin.call("POST", "/v3r1/projects/demo/management/agents/helper:drain", map[string]any{
		"agent": agentRef("demo", "helper"), "requested_by": agentRef("demo", "planner"), "meta": nil, "trace": nil}, 200)
	consoleDo(t, ctx, "resume the live feed",
		chromedp.Click(css(`#project-feed-pause`)),
		chromedp.WaitVisible(css(`#project-feed li[data-type="agent.drained"]`)),
	)
	consoleShot(t, ctx, "feed.png")

	// The agents directory, and an agent resumed from its page.
	consoleDo(t, ctx, "open the agents",
		chromedp.Click(css(`#nav a[data-nav=agents]`)),
		chromedp.WaitVisible(css(`#agents-table a[href="#/p/demo/agents/helper"]`)),
	)
	consoleShot(t, ctx, "agents.png")
	consoleDo(t, ctx, "resume an agent",
		chromedp.Click(css(`#agents-table a[href="#/p/demo/agents/helper"]`)),
		chromedp.WaitVisible(css(`#resume-agent`)),
		chromedp.Click(css(`#resume-agent`)),
		chromedp.WaitVisible(css(`#confirm-ok`)),
		chromedp.Click(css(`#confirm-ok`)),
		chromedp.WaitVisible(css(`#drain-agent`)),
		chromedp.WaitVisible(css(`#agent-feed li[data-type="agent.resumed"]`)),
		chromedp.Click(css(`#drain-agent`)),
		chromedp.WaitVisible(css(`#confirm-ok`)),
		chromedp.Click(css(`#confirm-ok`)),
		chromedp.WaitVisible(css(`#resume-agent`)),
		chromedp.WaitVisible(css(`#agent-feed li[data-seq]:first-child[data-type="agent.drained"]`)),
	)
	consoleShot(t, ctx, "agent.png")

	// Cursor paging: one Turn a page, newest dispatch first; the order
	// control flips it to oldest first, and the pages follow that order.
	consoleDo(t, ctx, "page through the Turns",
		chromedp.Navigate(base+"/console/#/p/demo/turns?limit=1"),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turns-table a.turn-link`)),
	)
	pageAll := func() []string {
		var paged []string
		for i := 0; ; i++ {
			rows := consoleGet(t, ctx, "read the page", chromedp.Evaluate[[]string](listed))
			paged = append(paged, rows...)
			more := consoleGet(t, ctx, "look for the next page", chromedp.Evaluate[bool](`!!document.querySelector('#next-page')`))
			if !more || i == 5 {
				return paged
			}
			first := rows[0]
			consoleDo(t, ctx, "go to the next page",
				chromedp.Click(css(`#next-page`)),
				chromedp.WaitNotPresent(css(`#turns-table a.turn-link[href$="`+first+`"]`)),
				consoleSettled(),
				chromedp.WaitVisible(css(`#turns-table a.turn-link`)),
			)
		}
	}
	if diff := cmp.Diff([]string{s.child, s.root, s.other}, pageAll()); diff != "" {
		t.Errorf("the Turns paged one by one, newest first (-want +got):\n%s", diff)
	}
	consoleDo(t, ctx, "sort oldest first",
		chromedp.Click(css(`#sort-order`)),
		chromedp.Poll[chromedp.Void](`location.hash.includes('order=oldest')`),
		consoleSettled(),
		chromedp.WaitVisible(css(`#sort-order[data-order=oldest]`)),
	)
	if diff := cmp.Diff([]string{s.other, s.root, s.child}, pageAll()); diff != "" {
		t.Errorf("the Turns paged one by one, oldest first (-want +got):\n%s", diff)
	}

	// Phone width: every page reads without sideways scrolling (consoleShot
	// checks it, as it does at 1280 px).
	consoleDo(t, ctx, "phone width", chromedp.EmulateViewport(390, 844))
	for _, pg := range []struct{ route, ready, shot string }{
		{"#/p/demo/turns/" + s.root, childSel, "turn-phone.png"},
		{"#/p/demo", `#stuck-summary`, "stuck-phone.png"},
		{"#/p/demo/turns", `#turns-table`, "turns-phone.png"},
		{"#/p/demo/agents", `#agents-table`, "agents-phone.png"},
		{"#/p/demo/agents/helper", `#agent-feed li`, "agent-phone.png"},
		{"#/", `#projects`, "projects-phone.png"},
		{"#/p/demo/feed", `#project-feed li`, "feed-phone.png"},
	} {
		consoleDo(t, ctx, "open "+pg.route+" at phone width",
			chromedp.Navigate(base+"/console/"+pg.route),
			consoleSettled(),
			chromedp.WaitVisible(css(pg.ready)),
		)
		consoleShot(t, ctx, pg.shot)
	}

	// The token never reached a URL, and no request left the server.
	for _, u := range reqs.all() {
		if strings.Contains(u, token) {
			t.Errorf("a request URL carries the admin token: %s", u)
		}
		if !strings.HasPrefix(u, base+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the console requested another origin: %s", u)
		}
	}
	if len(reqs.all()) == 0 {
		t.Errorf("no request was recorded")
	}
}

// TestConsoleAgentSignIn signs in as an agent: a wrong token is refused with
// the API's error, the credential is kept in sessionStorage (never in the
// URL), the agent sees only what its read policy allows, resumes a Turn as
// itself, and sign-out forgets the credential.
func TestConsoleAgentSignIn(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	s := newConsoleScenario(t, base, dir)
	token := strings.TrimPrefix(s.writer.headers["Authorization"], "Bearer ")

	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	signIn := func(tok string) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			chromedp.WaitVisible(css(`#signin-form input[name=token]`)),
			chromedp.Click(css(`#signin-form input[value=agent]`)),
			chromedp.WaitVisible(css(`#signin-form input[name=project]`)),
			chromedp.SetValue(css(`#signin-form input[name=project]`), "demo"),
			chromedp.SetValue(css(`#signin-form input[name=agent]`), "writer"),
			chromedp.SetValue(css(`#signin-form input[name=token]`), tok),
			chromedp.Click(css(`#signin-form button[type=submit]`)),
		}
	}
	consoleDo(t, ctx, "open the console", chromedp.Navigate(base+"/console/"))
	consoleDo(t, ctx, "sign in with a wrong token", append(signIn("tla_wrong"), chromedp.WaitVisible(css(`#signin-error:not(:empty)`)))...)
	if refused := consoleGet(t, ctx, "read the error", chromedp.Text(css(`#signin-error`))); !strings.Contains(refused, "401 UnauthorizedError") {
		t.Errorf("a wrong token shows %q, want the API's 401 UnauthorizedError", refused)
	}
	consoleDo(t, ctx, "sign in as the writer", append(signIn(token), chromedp.WaitVisible(css(`#stuck-summary`)))...)
	if who := consoleGet(t, ctx, "read who", chromedp.Text(css(`#who`))); who != "signed in as agent writer of demo" {
		t.Errorf("who = %q", who)
	}
	kept := consoleGet(t, ctx, "read sessionStorage", chromedp.Evaluate[string](`String(sessionStorage.getItem('turnledger.console.auth'))`))
	href := consoleGet(t, ctx, "read the URL", chromedp.Evaluate[string](`location.href`))
	if !strings.Contains(kept, token) || strings.Contains(href, token) {
		t.Errorf("the token is in sessionStorage: %v; in the URL %q: %v", strings.Contains(kept, token), href, strings.Contains(href, token))
	}
	// The skip link takes the keyboard to the page's content and leaves
	// the route alone.
	hashBefore := consoleGet(t, ctx, "read the URL", chromedp.Evaluate[string](`location.hash`))
	consoleDo(t, ctx, "skip to the content",
		chromedp.Focus(css(`a.skip`)),
		chromedp.KeyEvent("\r"),
		chromedp.Poll[chromedp.Void](`document.activeElement && document.activeElement.id === 'main'`),
	)
	if hash := consoleGet(t, ctx, "read the URL", chromedp.Evaluate[string](`location.hash`)); hash != hashBefore {
		t.Errorf("the skip link changed the route from %q to %q", hashBefore, hash)
	}

	// The project feed needs the read grant the writer lacks: the page
	// shows the API's refusal and stops asking.
	consoleDo(t, ctx, "open the live feed without the read grant",
		chromedp.Click(css(`#nav a[data-nav=feed]`)),
		chromedp.WaitVisible(css(`#project-feed[data-mode=refused]`)),
	)
	if refused := consoleGet(t, ctx, "read the feed's status", chromedp.Text(css(`#project-feed-status`))); !strings.HasPrefix(refused, "403 ForbiddenError") {
		t.Errorf("the live feed refused to the writer shows %q, want the API's 403 ForbiddenError", refused)
	}
	if disabled := consoleGet(t, ctx, "read the pause button", chromedp.Evaluate[bool](`document.getElementById('project-feed-pause').disabled`)); !disabled {
		t.Errorf("the pause button of a refused feed is enabled")
	}

	// The writer reads only its own Turns: the root it received and the
	// child it dispatched, not the planner's Turn to helper.
	consoleDo(t, ctx, "list the writer's Turns",
		chromedp.Click(css(`#nav a[data-nav=turns]`)),
		chromedp.Poll[chromedp.Void](`location.hash.endsWith('/turns')`),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turns-table a.turn-link`)),
	)
	rows := consoleGet(t, ctx, "read the list", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#turns-table a.turn-link')].map(a => a.textContent)`))
	if strings.Join(rows, ",") != fmt.Sprintf("%s,%s", s.child, s.root) {
		t.Errorf("the writer's Turns list shows %v, want [%s %s] (newest first)", rows, s.child, s.root)
	}
	// As itself, the writer resumes the Turn it suspended: the state goes
	// back to queued and turn.resumed arrives in the feed.
	s.writer.call("POST", "/v3r1/projects/demo/turns/"+s.root+":suspend", map[string]any{"claim": s.claim, "meta": nil, "trace": nil}, 200)
	consoleDo(t, ctx, "resume the suspended Turn",
		chromedp.Click(css(`#turns-table a.turn-link[href$="`+s.root+`"]`)),
		chromedp.WaitVisible(css(`#turn-state.suspended`)),
		chromedp.Click(css(`#resume-turn`)),
		chromedp.WaitVisible(css(`#confirm-ok`)),
		chromedp.Click(css(`#confirm-ok`)),
		chromedp.WaitVisible(css(`#turn-feed li[data-type="turn.resumed"]`)),
		chromedp.WaitVisible(css(`#turn-state.queued`)),
	)
	var resumed struct {
		Data struct {
			RequestedBy struct {
				AgentID string `json:"agent_id"`
			} `json:"requested_by"`
		} `json:"data"`
	}
	resumedJSON := consoleGet(t, ctx, "read the event", chromedp.Evaluate[string](
		`JSON.stringify(JSON.parse(document.querySelector('#turn-feed li[data-type="turn.resumed"] pre').textContent))`))
	json.Unmarshal([]byte(resumedJSON), &resumed)
	if resumed.Data.RequestedBy.AgentID != "writer" {
		t.Errorf("turn.resumed names requested_by %q, want the signed-in writer: %s", resumed.Data.RequestedBy.AgentID, resumedJSON)
	}

	consoleDo(t, ctx, "sign out",
		chromedp.Click(css(`#signout`)),
		chromedp.WaitVisible(css(`#signin-form`)),
	)
	if kept := consoleGet(t, ctx, "read sessionStorage", chromedp.Evaluate[string](`String(sessionStorage.getItem('turnledger.console.auth'))`)); kept != "null" {
		t.Errorf("after sign-out sessionStorage still holds %q", kept)
	}
	for _, u := range reqs.all() {
		if strings.Contains(u, token) {
			t.Errorf("a request URL carries the agent's token: %s", u)
		}
	}
}

// consoleSignInAdmin signs in with the admin bearer and waits for the
// project list to show project.
func consoleSignInAdmin(t *testing.T, ctx context.Context, base, token, project string) {
	t.Helper()
	consoleDo(t, ctx, "sign in as the admin",
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(css(`#signin-form input[name=token]`)),
		chromedp.SendKeys(css(`#signin-form input[name=token]`), token),
		chromedp.Click(css(`#signin-form button[type=submit]`)),
		chromedp.WaitVisible(css(`#projects a[href="#/p/`+project+`"]`)),
	)
}

// TestConsoleStuckWork runs serve without the reaper and with 1 s claims:
// a claimed Turn whose stop was requested outlives its claim, the stuck-work
// page lists it under both expired claims and pending stops, and the
// reconcile button (after its confirmation) releases it, which stops it.
func TestConsoleStuckWork(t *testing.T) {
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", "--reap-interval", "0", "--claim-ttl", "1s")
	s := newConsoleScenario(t, base, dir)
	s.admin.call("POST", "/v3r1/projects/demo/management/turns/"+s.root+":stop", map[string]any{
		"requested_by": agentRef("demo", "planner"), "meta": nil, "trace": nil}, 200)
	expires, err := time.Parse(time.RFC3339Nano, s.claim["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	checkfor.Until(t, 5*time.Second, "the 1 s claim to expire", func() bool { return time.Now().After(expires.Add(50 * time.Millisecond)) })

	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	consoleSignInAdmin(t, ctx, base, strings.TrimPrefix(s.admin.headers["Authorization"], "Bearer "), "demo")
	consoleDo(t, ctx, "open the stuck work",
		chromedp.Click(css(`#projects a[href="#/p/demo"]`)),
		chromedp.WaitVisible(css(`#expired table`)),
	)
	expired := consoleGet(t, ctx, "read the expired claims", chromedp.Text(css(`#expired`)))
	stops := consoleGet(t, ctx, "read the pending stops", chromedp.Text(css(`#stops`)))
	for name, text := range map[string]string{"expired claims": expired, "pending stops": stops} {
		if !strings.Contains(text, s.root) {
			t.Errorf("the %s lack the root Turn %s:\n%s", name, s.root, text)
		}
	}
	if !strings.Contains(expired, "expired ") || !strings.Contains(expired, "reaper is off") {
		t.Errorf("the expired claims read:\n%s", expired)
	}
	consoleShot(t, ctx, "stuck-expired.png")
	consoleDo(t, ctx, "refresh the stuck work",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('stuck-asof').dataset.old = 'yes'`),
		chromedp.Click(css(`#refresh`)),
		chromedp.WaitNotPresent(css(`#stuck-asof[data-old]`)),
		consoleSettled(),
		chromedp.WaitVisible(css(`#expired table`)),
	)
	consoleDo(t, ctx, "reconcile",
		chromedp.Click(css(`#reconcile`)),
		chromedp.WaitVisible(css(`#confirm-ok`)),
		chromedp.Click(css(`#confirm-ok`)),
		chromedp.WaitNotPresent(css(`#expired table`)),
		chromedp.WaitNotPresent(css(`#stops table`)),
	)
	if msg := consoleGet(t, ctx, "read the message", chromedp.Text(css(`#flash`))); msg != "Released 1 expired claim(s)." {
		t.Errorf("after reconcile the console says %q", msg)
	}
	var snap struct {
		State   string  `json:"state"`
		Outcome *string `json:"outcome"`
	}
	json.Unmarshal(s.admin.call("GET", "/v3r1/projects/demo/turns/"+s.root, nil, 200), &snap)
	if snap.State != "finished" || snap.Outcome == nil || *snap.Outcome != "stopped" {
		t.Errorf("after reconcile the Turn is %s/%v, want finished/stopped", snap.State, snap.Outcome)
	}
}

// TestConsoleSchedule shows a Turn's schedule (priority, not_before,
// claim_by, deadline, attempts of max_attempts, retry_backoff), filters the
// Turns list by priority and by the outcome dead, retries a failed Turn with
// the Retry button and lands on the new Turn, which names the old one as the
// Turn it retries, and shows the API's 409 when the same Turn is retried
// again.
func TestConsoleSchedule(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	s := newConsoleScenario(t, base, dir)
	dispatch := func(key string, sched map[string]any) string {
		body := map[string]any{
			"requested_by": agentRef("demo", "planner"), "target_agent": agentRef("demo", "writer"),
			"input": map[string]any{"text": "Summarise " + key}, "turn_kind": "summarize",
			"dispatch_key": key, "authority": map[string]any{"mode": "root_request", "request_id": "r-" + key},
		}
		for k, v := range sched {
			body[k] = v
		}
		var v struct {
			TurnID string `json:"turn_id"`
		}
		json.Unmarshal(s.planner.call("POST", "/v3r1/projects/demo/turns:dispatch", body, 200), &v)
		return v.TurnID
	}
	// fail claims the writer's next Turn, which must be id, and finishes
	// it as failed, asking for a retry or not.
	fail := func(id string, retry bool) {
		var won struct {
			Claim map[string]any `json:"claim"`
		}
		json.Unmarshal(s.writer.call("POST", "/v3r1/projects/demo/agents/writer/claims:claim", map[string]any{"agent": agentRef("demo", "writer")}, 200), &won)
		if won.Claim["turn_id"] != id {
			t.Fatalf("the writer claimed %v, want %s", won.Claim["turn_id"], id)
		}
		s.writer.call("POST", "/v3r1/projects/demo/turns/"+id+":finish", map[string]any{
			"claim": won.Claim, "outcome": "failed", "final_payload": map[string]any{"error": "the model timed out"},
			"final_record_role": "final", "retry": retry}, 200)
	}
	failed := dispatch("k-failed", map[string]any{"priority": 2, "max_attempts": 3})
	fail(failed, false)
	dead := dispatch("k-dead", map[string]any{"max_attempts": 1})
	fail(dead, true) // no attempt left: dead
	now := time.Now().UTC().Truncate(time.Second)
	notBefore, claimBy, deadline := now.Add(time.Hour), now.Add(2*time.Hour), now.Add(3*time.Hour)
	sched := dispatch("k-sched", map[string]any{
		"priority": 1, "not_before": notBefore, "claim_by": claimBy, "deadline": deadline, "max_attempts": 5,
		"retry_backoff": map[string]any{"initial_s": 2, "factor": 3, "max_s": 120},
	})

	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	consoleSignInAdmin(t, ctx, base, strings.TrimPrefix(s.admin.headers["Authorization"], "Bearer "), "demo")

	// The schedule on the Turn page.
	consoleDo(t, ctx, "open the scheduled Turn",
		chromedp.Navigate(base+"/console/#/p/demo/turns/"+sched),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turn-schedule`)),
	)
	const fields = `Object.fromEntries([...document.querySelectorAll('#turn-schedule dd[data-field]')].map(d => {
		const t = d.querySelector('time');
		return [d.dataset.field, t ? new Date(t.getAttribute('datetime')).toISOString() : d.textContent];
	}))`
	iso := func(t time.Time) string { return t.Format("2006-01-02T15:04:05.000Z") }
	want := map[string]string{
		"priority": "1", "not_before": iso(notBefore), "claim_by": iso(claimBy), "deadline": iso(deadline), "attempts": "0 / 5",
		"retry_backoff": "2 s after the first attempt, ×3 for each further one, at most 120 s",
	}
	if diff := cmp.Diff(want, consoleGet(t, ctx, "read the schedule", chromedp.Evaluate[map[string]string](fields))); diff != "" {
		t.Errorf("the schedule shown (-want +got):\n%s", diff)
	}
	if consoleGet(t, ctx, "look for Retry", chromedp.Evaluate[bool](`!!document.querySelector('#retry-turn')`)) {
		t.Errorf("a queued Turn offers Retry")
	}
	consoleShot(t, ctx, "turn-schedule.png")

	// The list shows each Turn's priority and filters by it and by the
	// outcome dead.
	const listed = `[...document.querySelectorAll('#turns-table a.turn-link')].map(a => a.textContent)`
	consoleDo(t, ctx, "list the priority 1 Turns",
		chromedp.Navigate(base+"/console/#/p/demo/turns?priority=1"),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turns-table a.turn-link`)),
	)
	if rows := consoleGet(t, ctx, "read the list", chromedp.Evaluate[[]string](listed)); !cmp.Equal(rows, []string{sched}) {
		t.Errorf("the Turns of priority 1 = %v, want [%s]", rows, sched)
	}
	if prio := consoleGet(t, ctx, "read the priority", chromedp.Text(css(`#turns-table td[data-label=Priority]`))); prio != "1" {
		t.Errorf("the list shows priority %q, want 1", prio)
	}
	consoleDo(t, ctx, "filter the dead Turns",
		chromedp.SetValue(css(`#turn-filters select[name=priority]`), ""),
		chromedp.SetValue(css(`#turn-filters select[name=outcome]`), "dead"),
		chromedp.Click(css(`#turn-filters button[type=submit]`)),
		chromedp.Poll[chromedp.Void](`location.hash.includes('outcome=dead') && !location.hash.includes('priority')`),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turns-table a.turn-link`)),
	)
	if rows := consoleGet(t, ctx, "read the list", chromedp.Evaluate[[]string](listed)); !cmp.Equal(rows, []string{dead}) {
		t.Errorf("the dead Turns = %v, want [%s]", rows, dead)
	}
	consoleShot(t, ctx, "turns-dead.png")

	// Retry the failed Turn: the console goes to the new Turn, which says
	// whose retry it is and keeps the schedule.
	consoleDo(t, ctx, "retry the failed Turn",
		chromedp.Navigate(base+"/console/#/p/demo/turns/"+failed),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turn-outcome.failed`)),
		chromedp.Click(css(`#retry-turn`)),
		chromedp.WaitVisible(css(`#confirm-ok`)),
		chromedp.Click(css(`#confirm-ok`)),
		chromedp.Poll[chromedp.Void](`location.hash.startsWith('#/p/demo/turns/') && !location.hash.endsWith('/`+failed+`')`),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turn-schedule [data-field=retry_of] a`)),
	)
	// Read in one go: a live event may draw the page again between two reads.
	shown := consoleGet(t, ctx, "read the schedule", chromedp.Evaluate[string](`(() => {
		const q = (s) => document.querySelector(s), r = q('#turn-schedule [data-field=retry_of]');
		return [r && r.previousElementSibling.textContent, r && r.textContent,
			q('#turn-schedule [data-field=attempts]')?.textContent, q('#turn-state')?.textContent].join('|');
	})()`))
	if want := "Retry of|" + failed + "|0 / 3|queued"; shown != want {
		t.Errorf("the new Turn shows %q (label|retry of|attempts|state), want %q", shown, want)
	}
	newID := strings.TrimPrefix(consoleGet(t, ctx, "read the URL", chromedp.Evaluate[string](`location.hash`)), "#/p/demo/turns/")
	if msg := consoleGet(t, ctx, "read the message", chromedp.Text(css(`#flash`))); msg != "Retried as "+newID+"." {
		t.Errorf("after Retry the console says %q, want Retried as %s.", msg, newID)
	}
	consoleShot(t, ctx, "turn-retry.png")

	// A second retry of the same Turn is refused: the API's 409 is shown
	// and the page stays.
	consoleDo(t, ctx, "retry the failed Turn again",
		chromedp.Click(css(`#turn-schedule [data-field=retry_of] a`)),
		chromedp.Poll[chromedp.Void](`location.hash.endsWith('/`+failed+`')`),
		consoleSettled(),
		chromedp.WaitVisible(css(`#retry-turn`)),
		chromedp.Click(css(`#retry-turn`)),
		chromedp.WaitVisible(css(`#confirm-ok`)),
		chromedp.Click(css(`#confirm-ok`)),
		chromedp.WaitVisible(css(`#flash .bad`)),
	)
	refused := consoleGet(t, ctx, "read the message", chromedp.Text(css(`#flash`)))
	if !strings.Contains(refused, "409 ConflictError") || !strings.Contains(refused, newID) {
		t.Errorf("a second retry shows %q, want the API's 409 ConflictError naming %s", refused, newID)
	}
	if hash := consoleGet(t, ctx, "read the URL", chromedp.Evaluate[string](`location.hash`)); !strings.HasSuffix(hash, "/"+failed) {
		t.Errorf("after a refused retry the console is at %s, want the failed Turn's page", hash)
	}
	consoleShot(t, ctx, "turn-retry-refused.png")
}

// TestConsolePeople answers a Turn waiting for input through the form the
// console makes from its schema and sees it queued with the answer in its
// context; lists Turns by tag and by waiting for input; stops a tree from
// its root; and stops every queued Turn of a tag with the Turn list's Stop
// all, after a confirmation that counts them.
func TestConsolePeople(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	s := newConsoleScenario(t, base, dir)
	dispatch := func(to, key string, tags ...string) string {
		var v struct {
			TurnID string `json:"turn_id"`
		}
		json.Unmarshal(s.planner.call("POST", "/v3r1/projects/demo/turns:dispatch", map[string]any{
			"requested_by": agentRef("demo", "planner"), "target_agent": agentRef("demo", to),
			"input": map[string]any{"text": "Draft the announcement " + key}, "turn_kind": "summarize",
			"dispatch_key": key, "authority": map[string]any{"mode": "root_request", "request_id": "r-" + key}, "tags": tags,
		}, 200), &v)
		return v.TurnID
	}
	// The writer claims a tagged Turn and suspends it for input.
	ask := dispatch("writer", "k-ask", "announce", "needs-review")
	var won struct {
		Claim map[string]any `json:"claim"`
	}
	json.Unmarshal(s.writer.call("POST", "/v3r1/projects/demo/agents/writer/claims:claim", map[string]any{"agent": agentRef("demo", "writer")}, 200), &won)
	if won.Claim["turn_id"] != ask {
		t.Fatalf("the writer claimed %v, want %s", won.Claim["turn_id"], ask)
	}
	schema := map[string]any{"type": "object", "required": []string{"tone"}, "properties": map[string]any{
		"tone":   map[string]any{"type": "string", "enum": []string{"formal", "casual"}, "description": "How the announcement should sound"},
		"words":  map[string]any{"type": "integer", "minimum": 50},
		"urgent": map[string]any{"type": "boolean"},
	}}
	s.writer.call("POST", "/v3r1/projects/demo/turns/"+ask+":suspend", map[string]any{"claim": won.Claim,
		"awaiting_input": map[string]any{"prompt": "Which tone should the announcement take?", "schema": schema, "input_by": nil}}, 200)

	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	consoleSignInAdmin(t, ctx, base, strings.TrimPrefix(s.admin.headers["Authorization"], "Bearer "), "demo")
	const listed = `[...document.querySelectorAll('#turns-table a.turn-link')].map(a => a.textContent)`

	// What waits for people, through the list's filter.
	consoleDo(t, ctx, "list the Turns waiting for input",
		chromedp.Navigate(base+"/console/#/p/demo/turns"),
		consoleSettled(),
		chromedp.Click(css(`#turn-filters input[name=awaiting_input]`)),
		chromedp.Click(css(`#turn-filters button[type=submit]`)),
		chromedp.Poll[chromedp.Void](`location.hash.includes('awaiting_input=true')`),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turns-table a.turn-link`)),
	)
	if rows := consoleGet(t, ctx, "read the list", chromedp.Evaluate[[]string](listed)); !cmp.Equal(rows, []string{ask}) {
		t.Errorf("the Turns waiting for input = %v, want [%s]", rows, ask)
	}
	tags := consoleGet(t, ctx, "read the tags", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#turns-table a.tag')].map(a => a.textContent)`))
	if !cmp.Equal(tags, []string{"announce", "needs-review"}) {
		t.Errorf("the list shows the tags %v, want [announce needs-review]", tags)
	}
	consoleShot(t, ctx, "turns-awaiting-input.png")

	// The Turn's page: its tags, the question, and a form from the schema.
	consoleDo(t, ctx, "open the Turn waiting for input",
		chromedp.Click(css(`#turns-table a.turn-link`)),
		consoleSettled(),
		chromedp.WaitVisible(css(`#awaiting-input #input-form`)),
		chromedp.WaitVisible(css(`#turn-feed li[data-type="turn.suspended"]`)),
	)
	prompt := consoleGet(t, ctx, "read the prompt", chromedp.Text(css(`#input-prompt`)))
	pageTags := consoleGet(t, ctx, "read the tags", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#turn-snapshot [data-field=tags] a.tag')].map(a => a.textContent)`))
	controls := consoleGet(t, ctx, "read the form", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#input-form [name]')].map(e => e.name + ':' + (e.type || e.tagName) + (e.required ? '*' : ''))`))
	if prompt != "Which tone should the announcement take?" || !cmp.Equal(pageTags, []string{"announce", "needs-review"}) {
		t.Errorf("the Turn page shows the prompt %q and tags %v", prompt, pageTags)
	}
	// The server keeps the schema's properties in the order of their names.
	if diff := cmp.Diff([]string{"tone:select-one*", "urgent:checkbox", "words:number"}, controls); diff != "" {
		t.Errorf("the form made from the schema (-want +got):\n%s", diff)
	}
	consoleDo(t, ctx, "fill in the answer",
		chromedp.SetValue(css(`#input-tone`), "1"), // casual
		chromedp.SendKeys(css(`#input-words`), "120"),
		chromedp.Click(css(`#input-urgent`)),
	)
	consoleShot(t, ctx, "turn-awaiting-input.png")
	consoleDo(t, ctx, "send the answer",
		chromedp.Click(css(`#input-submit`)),
		chromedp.WaitVisible(css(`#turn-state.queued`)),
		chromedp.WaitNotPresent(css(`#awaiting-input`)),
		chromedp.WaitVisible(css(`#turn-context li[data-turn-seq="1"]`)),
	)
	record := consoleGet(t, ctx, "read the record", chromedp.Evaluate[string](
		`(() => { const li = document.querySelector('#turn-context li[data-turn-seq="1"]'); return li.querySelector('.type').textContent + ' ' + JSON.stringify(JSON.parse(li.querySelector('pre').textContent)); })()`))
	if want := `input {"tone":"casual","urgent":true,"words":120}`; record != want {
		t.Errorf("the Turn's context shows %q, want %q", record, want)
	}
	if msg := consoleGet(t, ctx, "read the message", chromedp.Text(css(`#flash`))); msg != "Answer sent: the Turn is queued again." {
		t.Errorf("after the answer the console says %q", msg)
	}
	consoleShot(t, ctx, "turn-input-answered.png")

	// Stop tree on the claimed root: the root gets a stop request, its
	// child (queued for helper) is stopped at once.
	childNode := `#lineage li[data-turn="` + s.child + `"] > .node.finished`
	consoleDo(t, ctx, "stop the root's tree",
		chromedp.Navigate(base+"/console/#/p/demo/turns/"+s.root),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turn-feed li[data-type="turn.claimed"]`)),
		// The feed's item has the snapshot read again; once it shows the
		// claim, the buttons stay where they are for the click.
		chromedp.WaitVisible(css(`#turn-claim`)),
		chromedp.Click(css(`#stop-tree`)),
		chromedp.WaitVisible(css(`#confirm-ok`)),
		chromedp.Click(css(`#confirm-ok`)),
		chromedp.WaitVisible(css(`#turn-snapshot .badge.stop`)),
		chromedp.WaitVisible(css(childNode)),
	)
	var child struct {
		Outcome *string `json:"outcome"`
	}
	json.Unmarshal(s.admin.call("GET", "/v3r1/projects/demo/turns/"+s.child, nil, 200), &child)
	if child.Outcome == nil || *child.Outcome != "stopped" {
		t.Errorf("the child after Stop tree has outcome %v, want stopped", child.Outcome)
	}

	// Stop all on the queued Turns of a tag: the confirmation counts them,
	// the answer says how many stopped, and the list is empty after.
	var batch []string
	for i := range 3 {
		batch = append(batch, dispatch("helper", fmt.Sprintf("k-batch-%d", i), "batch"))
	}
	consoleDo(t, ctx, "list the queued Turns of the tag",
		chromedp.Navigate(base+"/console/#/p/demo/turns?state=queued&tag=batch"),
		consoleSettled(),
		chromedp.WaitVisible(css(`#turns-table a.turn-link`)),
	)
	if rows := consoleGet(t, ctx, "read the list", chromedp.Evaluate[[]string](listed)); !cmp.Equal(rows, []string{batch[2], batch[1], batch[0]}) {
		t.Errorf("the queued Turns tagged batch = %v, want %v newest first", rows, batch)
	}
	consoleDo(t, ctx, "ask to stop them all",
		chromedp.Click(css(`#bulk-stop`)),
		chromedp.WaitVisible(css(`#confirm-ok`)),
	)
	question := consoleGet(t, ctx, "read the confirmation", chromedp.Text(css(`#confirm-text`)))
	if !strings.HasPrefix(question, "Stop the 3 Turn(s) of this page that match state=queued, tag=batch?") || !strings.Contains(question, "up to 100 per call") || !strings.Contains(question, "names planner") {
		t.Errorf("the confirmation reads %q", question)
	}
	consoleShot(t, ctx, "turns-stop-all.png")
	consoleDo(t, ctx, "stop them all",
		chromedp.Click(css(`#confirm-ok`)),
		chromedp.WaitVisible(css(`#bulk-result`)),
		chromedp.WaitVisible(css(`#turns-empty`)),
	)
	if got := consoleGet(t, ctx, "read the answer", chromedp.Text(css(`#bulk-result`))); got != "Stopped 3 Turn(s). None left to act on." {
		t.Errorf("after Stop all the list says %q", got)
	}
	for _, id := range append(batch, s.other) {
		var v struct {
			State   string  `json:"state"`
			Outcome *string `json:"outcome"`
		}
		json.Unmarshal(s.admin.call("GET", "/v3r1/projects/demo/turns/"+id, nil, 200), &v)
		stopped := v.Outcome != nil && *v.Outcome == "stopped"
		if want := id != s.other; stopped != want {
			t.Errorf("Turn %s after Stop all: %s/%v; want stopped %v", id, v.State, v.Outcome, want)
		}
	}
	consoleShot(t, ctx, "turns-stopped-all.png")
}
