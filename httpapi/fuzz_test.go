package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/turnledger/turnledger/httpapi"
)

// FuzzRequestBodies sends arbitrary bodies to every command route of a live
// instance. No input may make the server answer 500 (or panic, which the
// recovery handler would turn into a 500).
func FuzzRequestBodies(f *testing.F) {
	e := newEnv(f)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "worker", 3)
	// The agent the admin routes work on: its credentials are revoked, it
	// is drained, its metadata replaced, without taking the others' access.
	e.register("p1", "spare", 1)
	var creds struct {
		Items []struct {
			CredentialID string `json:"credential_id"`
		} `json:"items"`
	}
	e.must(asAdmin, "GET", "/v3r1/projects/p1/agents/spare/credentials", nil, 200).decode(f, &creds)
	if len(creds.Items) == 0 {
		f.Fatal("spare has no credential")
	}
	tv := e.dispatch(req, "worker", "seed")
	c := e.claim(w)
	claim, _ := json.Marshal(c.Claim)
	routes := []struct {
		who          as
		method, path string
	}{
		{req, "POST", "/v3r1/projects/p1/turns:dispatch"},
		{w, "POST", "/v3r1/projects/p1/agents/worker/claims:claim"},
		{w, "POST", "/v3r1/projects/p1/claims:renew"},
		{w, "POST", "/v3r1/projects/p1/turns/" + tv.TurnID + "/semantic-records"},
		{w, "POST", "/v3r1/projects/p1/turns/" + tv.TurnID + ":finish"},
		{w, "POST", "/v3r1/projects/p1/turns/" + tv.TurnID + ":suspend"},
		{req, "POST", "/v3r1/projects/p1/management/turns/" + tv.TurnID + ":stop"},
		{req, "POST", "/v3r1/projects/p1/turns/" + tv.TurnID + ":resume"},
		{w, "POST", "/v3r1/projects/p1/agents/worker/work-memory-reports"},
		{w, "POST", "/v3r1/projects/p1/management/agents/worker:heartbeat-presence"},
		{asAdmin, "POST", "/v3r1/projects/p1/agents:register"},
		{asAdmin, "POST", "/admin/v1/projects/p1/agent-join-invites"},
		{asNobody, "POST", "/admin/v1/agent-joins:redeem"},
		{asAdmin, "POST", "/v3r1/projects/p1/agents/spare/credentials:issue"},
		{asAdmin, "POST", "/v3r1/projects/p1/agents/spare/credentials/" + creds.Items[0].CredentialID + ":revoke"},
		{asAdmin, "POST", "/v3r1/projects/p1/management/agents/spare:drain"},
		{asAdmin, "POST", "/v3r1/projects/p1/management/agents/spare:resume"},
		{asAdmin, "PUT", "/v3r1/projects/p1/management/agents/spare/public-metadata"},
		{req, "POST", "/v3r1/projects/p1/claims:reconcile-expired"},
		{asAdmin, "POST", "/admin/v1/projects/p1/agent-credential-tokens:request"},
		{asNobody, "POST", "/admin/v1/byoa/join:redeem"},
	}
	seeds := []string{
		`{}`, `null`, `[]`, `"x"`, `{"claim":` + string(claim) + `,"role":"note","payload":{}}`,
		`{"claim":` + string(claim) + `,"outcome":"succeeded","final_payload":{"a":1},"final_record_role":"final"}`,
		`{"requested_by":{"project_id":"p1","agent_id":"req"},"target_agent":{"project_id":"p1","agent_id":"worker"},"input":{},"turn_kind":"k","dispatch_key":"d","authority":{"mode":"root_request","request_id":"r"}}`,
		`{"authority":{"mode":"child_derivation","parent_claim":` + string(claim) + `}}`,
		`{"agent":{"project_id":"p1","agent_id":"worker"},"meta":{"annotations":[]},"trace":{"recursion_depth":-1}}`,
		`{"spec":{"agent_id":"x","capacity":1e100},"provenance":{}}`,
		`{"join_code":"tlj.p1.x"}`, `{"kind":"agent_work_memory_report_manifest.v1","records":[{"meta":1}]}`,
		`{"meta":{"annotations":["a"]}}`,
		`{"agent":{"project_id":"p1","agent_id":"spare"},"requested_by":{"project_id":"p1","agent_id":"req"}}`,
		`{"k":"v","nested":{"a":[1,2,3]}}`,
		`{"agent_id":"boot"}`, `{"agent_id":"boot","spec":{"agent_id":"boot","role":"w","capacity":1},"provenance":{"kind":"k"}}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := routes[int(route)%len(routes)]
		e := *e
		e.t = t
		if resp := e.do(r.who, r.method, r.path, body); resp.status >= 500 {
			t.Fatalf("%s %s with %q = %d %s", r.method, r.path, body, resp.status, resp.body)
		}
	})
}

// FuzzAgentAuthHeaders sends arbitrary agent authentication headers —
// X-Svc-Project-Id, X-Svc-Agent-Id and Authorization — to reads, commands
// and an admin route of a live instance: no input may make it answer 500,
// and none may pass as an agent or the admin unless it is that agent's
// credential or the admin bearer.
func FuzzAgentAuthHeaders(f *testing.F) {
	e := newEnv(f)
	req := e.register("p1", "req", 1, "turns:dispatch", "projections:read")
	tv := e.dispatch(req, "req", "seed")
	dispatch, _ := json.Marshal(dispatchBody("p1", "req", "req", "fz", map[string]any{}))
	claim, _ := json.Marshal(map[string]any{"agent": ref("p1", "req")})
	routes := []struct {
		method, path string
		body         []byte
	}{
		{"GET", "/v3r1/projects/p1/projection/turns", nil},
		{"GET", "/v3r1/projects/p1/turns/" + tv.TurnID, nil},
		{"POST", "/v3r1/projects/p1/turns:dispatch", dispatch},
		{"POST", "/v3r1/projects/p1/agents/req/claims:claim", claim},
		{"POST", "/v3r1/projects/p1/management/agents/req:heartbeat-presence", nil},
		{"GET", "/admin/v1/projects", nil},
		{"GET", "/v3r1/projects/p1/projection/feed", nil},
	}
	f.Add(uint8(0), "p1", "req", "Bearer "+req.token)
	f.Add(uint8(2), "p1", "req", "bearer "+req.token)
	f.Add(uint8(3), "p1", "req", "Bearer "+adminToken)
	f.Add(uint8(5), "", "", "Bearer "+adminToken)
	f.Add(uint8(1), "p2", "req", "Bearer "+req.token)
	f.Add(uint8(4), "p1", "worker", "Bearer "+req.token)
	f.Add(uint8(0), "p1.x", "req*", "Basic dXNlcjpwYXNz")
	f.Add(uint8(6), "P1", "REQ", "Bearer  "+req.token+" ")
	f.Add(uint8(2), "p1", "req", "Bearer tla_"+string(bytes.Repeat([]byte("A"), 300)))
	f.Add(uint8(1), "é", "\t", "Bearer")
	f.Fuzz(func(t *testing.T, route uint8, project, agent, authorization string) {
		for _, v := range []string{project, agent, authorization} {
			for i := 0; i < len(v); i++ {
				if (v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f {
					return // not a header value a client could send
				}
			}
		}
		r := routes[int(route)%len(routes)]
		var body io.Reader
		if r.body != nil {
			body = bytes.NewReader(r.body)
		}
		hr, err := http.NewRequest(r.method, e.url+r.path, body)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set(httpapi.HeaderProject, project)
		hr.Header.Set(httpapi.HeaderAgent, agent)
		hr.Header.Set("Authorization", authorization)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s with %s %q, %s %q, Authorization %q = %d %s", r.method, r.path,
				httpapi.HeaderProject, project, httpapi.HeaderAgent, agent, authorization, resp.StatusCode, data)
		}
		if resp.StatusCode >= 300 {
			return
		}
		// Let in may be only the admin bearer, or req's own credential as
		// req of p1. The scheme is case-insensitive (RFC 9110) and header
		// values arrive trimmed.
		f := strings.Fields(authorization)
		bearer := len(f) == 2 && strings.EqualFold(f[0], "Bearer")
		admin := bearer && f[1] == adminToken
		agentOK := bearer && f[1] == req.token && strings.TrimSpace(project) == "p1" && strings.TrimSpace(agent) == "req"
		if !admin && !agentOK {
			t.Fatalf("%s %s with %s %q, %s %q, Authorization %q = %d, want it refused", r.method, r.path,
				httpapi.HeaderProject, project, httpapi.HeaderAgent, agent, authorization, resp.StatusCode)
		}
	})
}
