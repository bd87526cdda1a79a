package httpapi_test

import (
	"encoding/json"
	"testing"
)

// FuzzRequestBodies sends arbitrary bodies to every command route of a live
// instance. No input may make the server answer 500 (or panic, which the
// recovery handler would turn into a 500).
func FuzzRequestBodies(f *testing.F) {
	e := newEnv(f)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "worker", 3)
	tv := e.dispatch(req, "worker", "seed")
	c := e.claim(w)
	claim, _ := json.Marshal(c.Claim)
	routes := []struct {
		who  as
		path string
	}{
		{req, "/v3r1/projects/p1/turns:dispatch"},
		{w, "/v3r1/projects/p1/agents/worker/claims:claim"},
		{w, "/v3r1/projects/p1/claims:renew"},
		{w, "/v3r1/projects/p1/turns/" + tv.TurnID + "/semantic-records"},
		{w, "/v3r1/projects/p1/turns/" + tv.TurnID + ":finish"},
		{w, "/v3r1/projects/p1/turns/" + tv.TurnID + ":suspend"},
		{req, "/v3r1/projects/p1/management/turns/" + tv.TurnID + ":stop"},
		{req, "/v3r1/projects/p1/turns/" + tv.TurnID + ":resume"},
		{w, "/v3r1/projects/p1/agents/worker/work-memory-reports"},
		{w, "/v3r1/projects/p1/management/agents/worker:heartbeat-presence"},
		{asAdmin, "/v3r1/projects/p1/agents:register"},
		{asAdmin, "/admin/v1/projects/p1/agent-join-invites"},
		{asNobody, "/admin/v1/agent-joins:redeem"},
	}
	seeds := []string{
		`{}`, `null`, `[]`, `"x"`, `{"claim":` + string(claim) + `,"role":"note","payload":{}}`,
		`{"claim":` + string(claim) + `,"outcome":"succeeded","final_payload":{"a":1},"final_record_role":"final"}`,
		`{"requested_by":{"project_id":"p1","agent_id":"req"},"target_agent":{"project_id":"p1","agent_id":"worker"},"input":{},"turn_kind":"k","dispatch_key":"d","authority":{"mode":"root_request","request_id":"r"}}`,
		`{"authority":{"mode":"child_derivation","parent_claim":` + string(claim) + `}}`,
		`{"agent":{"project_id":"p1","agent_id":"worker"},"meta":{"annotations":[]},"trace":{"recursion_depth":-1}}`,
		`{"spec":{"agent_id":"x","capacity":1e100},"provenance":{}}`,
		`{"join_code":"tlj.p1.x"}`, `{"kind":"agent_work_memory_report_manifest.v1","records":[{"meta":1}]}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := routes[int(route)%len(routes)]
		e := *e
		e.t = t
		if resp := e.do(r.who, "POST", r.path, body); resp.status >= 500 {
			t.Fatalf("POST %s with %q = %d %s", r.path, body, resp.status, resp.body)
		}
	})
}
