package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// child dispatches a child Turn under the claim c, to agent to.
func (e *env) child(holder as, c *claimed, to, key string, want int) response {
	e.t.Helper()
	body := dispatchBody("p1", holder.agent, to, key, map[string]any{"k": key})
	body["authority"] = map[string]any{"mode": "child_derivation", "parent_claim": c.Claim}
	return e.must(holder, "POST", schedP+"/turns:dispatch", body, want)
}

func TestCascadeStopsAThreeLevelTreeWithALiveClaimAtEachLevel(t *testing.T) {
	e, req, _ := schedEnv(t)
	a1 := e.register("p1", "a1", 1)
	a2 := e.register("p1", "a2", 1)
	a3 := e.register("p1", "a3", 2)
	r := e.must(req, "POST", schedP+"/turns:dispatch", dispatchBody("p1", "req", "a1", "root-a1", map[string]any{}), 200)
	var top projection.TurnView
	r.decode(t, &top)
	c1 := e.claim(a1)
	var mid projection.TurnView
	e.child(a1, c1, "a2", "mid", 200).decode(t, &mid)
	c2 := e.claim(a2)
	var leaf, queued projection.TurnView
	e.child(a2, c2, "a3", "leaf", 200).decode(t, &leaf)
	e.child(a2, c2, "a3", "queued-leaf", 200).decode(t, &queued)
	c3 := e.claim(a3)
	if c3.Claim.TurnID != leaf.TurnID {
		t.Fatalf("a3 claimed %s, want the leaf %s", c3.Claim.TurnID, leaf.TurnID)
	}
	head := e.ledgerLast(t, "p1")
	e.must(req, "POST", schedP+"/management/turns/"+top.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req"), "cascade": true}, 200)

	// One event per Turn, all with the same request id.
	var feed struct{ Items []projection.FeedItem }
	e.must(asAdmin, "GET", fmt.Sprintf("%s/projection/feed?after_ledger_seq=%d", schedP, head), nil, 200).decode(t, &feed)
	ids := map[string]string{}
	var requestID string
	for _, it := range feed.Items {
		var d map[string]any
		json.Unmarshal(it.Data, &d)
		if d["cascade"] != true {
			t.Errorf("event %s of the cascade without cascade: %v", it.Type, d)
		}
		if requestID == "" {
			requestID, _ = d["request_id"].(string)
		}
		if d["request_id"] != requestID || requestID == "" {
			t.Errorf("event %s has request_id %v, want the cascade's %q", it.Type, d["request_id"], requestID)
		}
		ids[it.ID] = it.Type
	}
	want := map[string]string{top.TurnID: kernel.EvTurnStopRequested, mid.TurnID: kernel.EvTurnStopRequested,
		leaf.TurnID: kernel.EvTurnStopRequested, queued.TurnID: kernel.EvTurnStopped}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("events of the cascade = %v, want %v", ids, want)
	}
	// Every holder's next call sees the stop.
	for _, h := range []struct {
		who as
		c   *claimed
	}{{a1, c1}, {a2, c2}, {a3, c3}} {
		var rr struct {
			StopRequested bool `json:"stop_requested"`
		}
		e.must(h.who, "POST", schedP+"/claims:renew", map[string]any{"claim": h.c.Claim}, 200).decode(t, &rr)
		if !rr.StopRequested {
			t.Errorf("%s's renew after the cascade: stop_requested false", h.who.agent)
		}
	}
	// No child may be dispatched under the stopped tree.
	r = e.child(a2, c2, "a3", "late", 409)
	if !strings.Contains(errorMessage(r), "stopped with its whole tree") {
		t.Errorf("a child under the stopped tree = %s", r.body)
	}
	// Retried with the same key: the same answer, nothing more appended.
	last := e.ledgerLast(t, "p1")
	var fresh projection.TurnView
	e.must(req, "POST", schedP+"/turns:dispatch", dispatchBody("p1", "req", "a3", "fresh", map[string]any{}), 200).decode(t, &fresh)
	cf := e.claim(a3)
	if cf == nil || cf.Claim.TurnID != fresh.TurnID {
		t.Fatalf("a3 claimed %+v, want %s", cf, fresh.TurnID)
	}
	e.child(a3, cf, "a2", "fresh-child", 200)
	e.must(req.withKey("cascade-2"), "POST", schedP+"/management/turns/"+fresh.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req"), "cascade": true}, 200)
	mid2 := e.ledgerLast(t, "p1")
	e.must(req.withKey("cascade-2"), "POST", schedP+"/management/turns/"+fresh.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req"), "cascade": true}, 200)
	if got := e.ledgerLast(t, "p1"); got != mid2 || mid2 != last+5 { // a dispatch, a claim, a child, then the cascade of two
		t.Errorf("ledger %d -> %d -> %d: a cascade retried with its key appended again", last, mid2, got)
	}
}

func TestCascadeRefusesATreeOverTheBound(t *testing.T) {
	e, req, w := schedEnv(t)
	big := e.register("p1", "big", 1)
	var top projection.TurnView
	e.must(req, "POST", schedP+"/turns:dispatch", dispatchBody("p1", "req", "big", "top", map[string]any{}), 200).decode(t, &top)
	c := e.claim(big)
	for i := range kernel.MaxCascade {
		e.child(big, c, "worker", fmt.Sprintf("c%d", i), 200)
	}
	head := e.ledgerLast(t, "p1")
	r := e.must(req, "POST", schedP+"/management/turns/"+top.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req"), "cascade": true}, 409)
	if !strings.Contains(errorMessage(r), fmt.Sprint(kernel.MaxCascade)) {
		t.Errorf("cascade over %d Turns = %s, want a 409 naming the bound and the size", kernel.MaxCascade+1, r.body)
	}
	if got := e.ledgerLast(t, "p1"); got != head {
		t.Errorf("a refused cascade moved the ledger from %d to %d", head, got)
	}
	// Finish one child: the tree is within the bound, and all of it stops at once.
	e.finishAs(w, e.claim(w), map[string]any{"outcome": "succeeded"}, 200)
	head = e.ledgerLast(t, "p1")
	e.must(req, "POST", schedP+"/management/turns/"+top.TurnID+":stop", map[string]any{"requested_by": ref("p1", "req"), "cascade": true}, 200)
	if got := e.ledgerLast(t, "p1"); got-head != kernel.MaxCascade {
		t.Errorf("the cascade appended %d events, want %d (the top and its %d children not finished)", got-head, kernel.MaxCascade, kernel.MaxCascade-1)
	}
	var pg struct{ Items []projection.TurnView }
	e.must(asAdmin, "GET", schedP+"/projection/turns?state=queued&limit=10", nil, 200).decode(t, &pg)
	if len(pg.Items) != 0 {
		t.Errorf("%d Turns still queued after the cascade", len(pg.Items))
	}
}
