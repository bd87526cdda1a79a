package httpapi_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAnswersShowTheTurnAsTheProjectionsDo: a command's answer shows the
// Turn it changed from the engine's state (engine.AsOf, projection.ViewOf),
// without waiting for the projector; through every command of a Turn's life,
// a retry and a release included, the answer is the Turn a read shows right
// after it, field for field.
func TestAnswersShowTheTurnAsTheProjectionsDo(t *testing.T) {
	e, req, w := schedEnv(t)
	// asRead compares the Turn of an answer (at path, or the whole answer)
	// with GET /turns/{id}, without the answer's keys drop.
	asRead := func(what string, r response, path string, drop ...string) string {
		t.Helper()
		var answer map[string]any
		r.decode(t, &answer)
		v := answer
		if path != "" {
			v, _ = answer[path].(map[string]any)
		}
		for _, k := range drop {
			delete(v, k)
		}
		id, _ := v["turn_id"].(string)
		var read map[string]any
		e.must(asAdmin, "GET", schedP+"/turns/"+id, nil, 200).decode(t, &read)
		if diff := cmp.Diff(read, v); diff != "" {
			t.Errorf("%s: the answer's Turn differs from the Turn read after it (-read +answer):\n%s", what, diff)
		}
		return id
	}

	// Input with spaces, escapes and a number as written: the answer shows
	// it as the ledger keeps it.
	body := `{"requested_by":{"project_id":"p1","agent_id":"req"},"target_agent":{"project_id":"p1","agent_id":"worker"},
		"input": {"q" : "a <b> & \u00e9", "n": 1.50, "nested": {"x": [1, 2]}},
		"turn_kind":"summarize","dispatch_key":"k1","authority":{"mode":"root_request","request_id":"r1"},
		"tags":["t1"],"priority":2,"max_attempts":3,"meta":{"note":"n"},"trace":null}`
	id := asRead("dispatch", e.must(req, "POST", schedP+"/turns:dispatch", body, 200), "")

	r := e.must(w, "POST", schedP+"/agents/worker/claims:claim", map[string]any{"agent": ref("p1", "worker")}, 200)
	asRead("claim", r, "turn")
	var c claimed
	r.decode(t, &c)

	e.clock.Advance(10 * time.Second)
	var renewed struct {
		Claim claimToken `json:"claim"`
	}
	e.must(w, "POST", schedP+"/claims:renew", map[string]any{"claim": c.Claim}, 200).decode(t, &renewed)
	c.Claim = renewed.Claim

	r = e.must(w, "POST", schedP+"/turns/"+id+":suspend", map[string]any{"claim": c.Claim,
		"awaiting_input": map[string]any{"prompt": "Go on?", "schema": map[string]any{"type": "object"}, "input_by": nil}}, 200)
	asRead("suspend for input", r, "", "input_token", "input_url")
	var s suspended
	r.decode(t, &s)
	asRead("provide input", e.must(as{token: s.InputToken}, "POST", schedP+"/turns/"+id+":provide-input", map[string]any{"input": map[string]any{"go": true}}, 200), "")

	r = e.must(w, "POST", schedP+"/agents/worker/claims:claim", map[string]any{"agent": ref("p1", "worker")}, 200)
	asRead("claim after the input", r, "turn")
	r.decode(t, &c)
	e.must(w, "POST", schedP+"/turns/"+id+"/semantic-records", map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{"step": 1}}, 200)
	asRead("finish", e.must(w, "POST", schedP+"/turns/"+id+":finish", map[string]any{
		"claim": c.Claim, "outcome": "failed", "final_payload": json.RawMessage(`{"why" : "no"}`), "final_record_role": "final"}, 200), "")

	retried := asRead("retry", e.must(req, "POST", schedP+"/turns/"+id+":retry", map[string]any{"requested_by": ref("p1", "req")}, 200), "")
	r = e.must(w, "POST", schedP+"/agents/worker/claims:claim", map[string]any{"agent": ref("p1", "worker")}, 200)
	if got := asRead("claim of the retry", r, "turn"); got != retried {
		t.Fatalf("claimed %s, want the retry %s", got, retried)
	}
	r.decode(t, &c)
	asRead("release", e.must(w, "POST", schedP+"/claims:release", map[string]any{"claim": c.Claim}, 200), "")
}
