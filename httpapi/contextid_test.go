package httpapi_test

import (
	"testing"
)

// TestContextIDOnDispatchAndList: a dispatch's context_id is on the Turn
// (null without one) and filters the Turn list; a malformed one is a 422
// that changes nothing.
func TestContextIDOnDispatchAndList(t *testing.T) {
	e := newEnv(t)
	boss := e.register("p", "boss", 1, "turns:dispatch")
	e.register("p", "w", 1)
	type view struct {
		TurnID    string  `json:"turn_id"`
		ContextID *string `json:"context_id"`
	}
	for _, cid := range []string{"ctx-a", "ctx-b", ""} {
		body := dispatchBody("p", "boss", "w", "key-"+cid, map[string]any{"c": cid})
		if cid != "" {
			body["context_id"] = cid
		}
		var v view
		e.must(boss, "POST", "/v3r1/projects/p/turns:dispatch", body, 200).decode(t, &v)
		if (cid == "") != (v.ContextID == nil) || v.ContextID != nil && *v.ContextID != cid {
			t.Errorf("Turn dispatched with context_id %q shows %v", cid, v.ContextID)
		}
	}
	var page struct {
		Items []view `json:"items"`
	}
	e.must(boss, "GET", "/v3r1/projects/p/projection/turns?context_id=ctx-b", nil, 200).decode(t, &page)
	if len(page.Items) != 1 || *page.Items[0].ContextID != "ctx-b" {
		t.Fatalf("list with context_id ctx-b = %+v, want the one Turn", page.Items)
	}
	before := e.must(boss, "GET", "/v3r1/projects/p/projection/turns", nil, 200)
	bad := dispatchBody("p", "boss", "w", "bad", map[string]any{})
	bad["context_id"] = "has space"
	e.must(boss, "POST", "/v3r1/projects/p/turns:dispatch", bad, 422)
	if after := e.must(boss, "GET", "/v3r1/projects/p/projection/turns", nil, 200); string(after.body) != string(before.body) {
		t.Errorf("a refused dispatch changed the Turn list")
	}
	e.must(boss, "GET", "/v3r1/projects/p/projection/turns?context_id=has%20space", nil, 422)
}
