package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleFitsAndClearsRefusals: after a wrong token and then the right
// one, the refusal banner is gone; the project list shows no list bullets;
// a Turn page whose lineage has three levels fits the screen at 1280×800
// and at 390×844.
func TestConsoleFitsAndClearsRefusals(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	s := newConsoleScenario(t, base, dir)
	token := strings.TrimPrefix(s.admin.headers["Authorization"], "Bearer ")

	// A third level: deep takes a child of the root and derives another.
	deep := agentClient(t, s.admin, "demo", "deep", 1)
	agentClient(t, s.admin, "demo", "deeper", 1)
	dispatch := func(c client, from, to, key string, claim map[string]any) string {
		var v struct {
			TurnID string `json:"turn_id"`
		}
		json.Unmarshal(c.call("POST", "/v3r1/projects/demo/turns:dispatch", map[string]any{
			"requested_by": agentRef("demo", from), "target_agent": agentRef("demo", to),
			"input": map[string]any{"text": "go deeper"}, "turn_kind": "research",
			"dispatch_key": key, "authority": map[string]any{"mode": "child_derivation", "parent_claim": claim}, "meta": nil, "trace": nil,
		}, 200), &v)
		return v.TurnID
	}
	mid := dispatch(s.writer, "writer", "deep", "k-mid", s.claim)
	var won struct {
		Claim map[string]any `json:"claim"`
	}
	json.Unmarshal(deep.call("POST", "/v3r1/projects/demo/agents/deep/claims:claim", map[string]any{"agent": agentRef("demo", "deep")}, 200), &won)
	if won.Claim["turn_id"] != mid {
		t.Fatalf("deep claimed %v, want %s", won.Claim["turn_id"], mid)
	}
	leaf := dispatch(deep, "deep", "deeper", "k-leaf", won.Claim)

	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	consoleDo(t, ctx, "sign in with a wrong token",
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(css(`#signin-form input[name=token]`)),
		chromedp.SendKeys(css(`#signin-form input[name=token]`), "wrong"),
		chromedp.Click(css(`#signin-form button[type=submit]`)),
		chromedp.WaitVisible(css(`#flash .bad`)),
	)
	consoleDo(t, ctx, "sign in with the right token",
		chromedp.WaitVisible(css(`#signin-form input[name=token]`)),
		chromedp.SetValue(css(`#signin-form input[name=token]`), token),
		chromedp.Click(css(`#signin-form button[type=submit]`)),
		chromedp.WaitVisible(css(`#projects a[href="#/p/demo"]`)),
	)
	if n := consoleGet(t, ctx, "count banners", chromedp.Evaluate[int](`document.querySelectorAll('#flash .bad').length`)); n != 0 {
		t.Errorf("after signing in with the right token %d refusal banner(s) stay up", n)
	}
	for _, size := range [][2]int64{{1280, 800}, {390, 844}} {
		consoleDo(t, ctx, fmt.Sprintf("a %d×%d viewport", size[0], size[1]), chromedp.EmulateViewport(size[0], size[1]))
		consoleDo(t, ctx, "open the project list", chromedp.Navigate(base+"/console/#/"), consoleSettled(), chromedp.WaitVisible(css(`#projects li`)))
		if style := consoleGet(t, ctx, "read the list style", chromedp.Evaluate[string](`getComputedStyle(document.querySelector('#projects li')).listStyleType`)); style != "none" {
			t.Errorf("at %d px the project list's items have list-style-type %q, want none", size[0], style)
		}
		consoleShot(t, ctx, fmt.Sprintf("fit-projects-%d.png", size[0]))
		consoleDo(t, ctx, "open the middle Turn", chromedp.Navigate(base+"/console/#/p/demo/turns/"+mid), consoleSettled(),
			chromedp.WaitVisible(css(`#lineage li[data-turn="`+leaf+`"]`)))
		if n := consoleGet(t, ctx, "count the lineage", chromedp.Evaluate[int](`document.querySelectorAll('#lineage li[data-turn]').length`)); n < 3 {
			t.Errorf("the lineage shows %d Turns, want the root, the middle one and the leaf", n)
		}
		consoleShot(t, ctx, fmt.Sprintf("fit-lineage-%d.png", size[0]))
	}
}
