package httpapi_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChildTurnListedForExactlyItsReaders: a Turn is in a caller's
// projection/turns list exactly when the caller may GET it. The tree is
// root (req → a), child (a → b) under a's claim, grandchild (b → c) under
// b's claim; x is a stranger and reader holds projections:read.
func TestChildTurnListedForExactlyItsReaders(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	a := e.register("p1", "a", 5)
	b := e.register("p1", "b", 5)
	c := e.register("p1", "c", 5)
	x := e.register("p1", "x", 5)
	reader := e.register("p1", "reader", 1, "projections:read")

	child := func(who as, parent claimToken, to, key string) turn {
		t.Helper()
		var tv turn
		e.must(who, "POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
			"requested_by": ref("p1", who.agent), "target_agent": ref("p1", to), "input": map[string]any{},
			"turn_kind": "summarize", "dispatch_key": key,
			"authority": map[string]any{"mode": "child_derivation", "parent_claim": parent},
		}, 200).decode(t, &tv)
		return tv
	}
	root := e.dispatch(req, "a", "root")
	ca := e.claim(a)
	kid := child(a, ca.Claim, "b", "kid")
	cb := e.claim(b)
	grandkid := child(b, cb.Claim, "c", "grandkid")
	other := e.dispatch(req, "x", "other")

	turns := map[string]string{root.TurnID: "root", kid.TurnID: "child", grandkid.TurnID: "grandchild", other.TurnID: "other"}
	want := map[string][]string{ // docs/concepts.md's read policy, by hand
		"req":    {"root", "child", "grandchild", "other"},
		"a":      {"root", "child", "grandchild"},
		"b":      {"child", "grandchild"},
		"c":      {"grandchild"},
		"x":      {"other"},
		"reader": {"root", "child", "grandchild", "other"},
	}
	for _, who := range []as{req, a, b, c, x, reader} {
		var gettable []string
		for _, id := range []string{root.TurnID, kid.TurnID, grandkid.TurnID, other.TurnID} {
			switch r := e.do(who, "GET", "/v3r1/projects/p1/turns/"+id, nil); r.status {
			case 200:
				gettable = append(gettable, turns[id])
			case 403:
			default:
				t.Errorf("%s: GET turn %s = %d %s, want 200 or 403", who.agent, turns[id], r.status, r.body)
			}
		}
		var page struct {
			Items []turn `json:"items"`
		}
		e.must(who, "GET", "/v3r1/projects/p1/projection/turns?limit=500", nil, 200).decode(t, &page)
		listed := []string{}
		for _, tv := range page.Items {
			listed = append(listed, turns[tv.TurnID])
		}
		if diff := cmp.Diff(gettable, listed); diff != "" {
			t.Errorf("%s: listed Turns differ from those it may GET (-get +list):\n%s", who.agent, diff)
		}
		if diff := cmp.Diff(want[who.agent], gettable); diff != "" {
			t.Errorf("%s: Turns it may GET (-want +got):\n%s", who.agent, diff)
		}
		// The lineage of every Turn of the tree it may read lists exactly
		// the Turns of the tree it may GET, in tree order.
		var tree []string
		for _, name := range []string{"root", "child", "grandchild"} {
			if slices.Contains(gettable, name) {
				tree = append(tree, name)
			}
		}
		for _, id := range []string{root.TurnID, kid.TurnID, grandkid.TurnID} {
			if !slices.Contains(gettable, turns[id]) {
				if r := e.do(who, "GET", "/v3r1/projects/p1/projection/turns/"+id+"/lineage", nil); r.status != 403 {
					t.Errorf("%s: lineage of %s = %d %s, want 403", who.agent, turns[id], r.status, r.body)
				}
				continue
			}
			var lin struct {
				Items []struct {
					TurnID string `json:"turn_id"`
				} `json:"items"`
			}
			e.must(who, "GET", "/v3r1/projects/p1/projection/turns/"+id+"/lineage", nil, 200).decode(t, &lin)
			got := []string{}
			for _, it := range lin.Items {
				got = append(got, turns[it.TurnID])
			}
			if diff := cmp.Diff(tree, got); diff != "" {
				t.Errorf("%s: lineage of %s differs from the tree's Turns it may GET (-get +lineage):\n%s", who.agent, turns[id], diff)
			}
		}
	}
}
