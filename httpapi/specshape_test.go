package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// errorMessage returns the `message` field of an error body.
func errorMessage(r response) string {
	var b struct {
		Message string `json:"message"`
	}
	json.Unmarshal(r.body, &b)
	return b.Message
}

// TestAgentSpecOneShape: agents:register, agent-credential-tokens:request and
// agent-join-invites take the same spec object. An agent_id inside the spec
// that equals the outer one is accepted; a different one is a 422 naming both
// fields; every validation message names the field path.
func TestAgentSpecOneShape(t *testing.T) {
	e := newEnv(t)
	spec := func(agent string, change func(map[string]any)) map[string]any {
		s := map[string]any{"agent_id": agent, "role": "worker", "capabilities": []string{"code"}, "capacity": 2}
		if change != nil {
			change(s)
		}
		return s
	}
	routes := []struct {
		name string
		path string
		body func(outer string, spec map[string]any) map[string]any
	}{
		{"agents:register", "/v3r1/projects/p1/agents:register", func(_ string, s map[string]any) map[string]any {
			return map[string]any{"spec": s, "provenance": map[string]any{"kind": "test", "external_ref": "x"}}
		}},
		{"agent-credential-tokens:request", "/admin/v1/projects/p1/agent-credential-tokens:request", func(outer string, s map[string]any) map[string]any {
			return map[string]any{"agent_id": outer, "spec": s}
		}},
		{"agent-join-invites", "/admin/v1/projects/p1/agent-join-invites", func(outer string, s map[string]any) map[string]any {
			return map[string]any{"agent_id": outer, "profile_kind": "byoa", "runtime_kind": "go", "spec": s}
		}},
	}
	for i, rt := range routes {
		agent := "same-" + string(rune('a'+i))
		e.must(asAdmin, "POST", rt.path, rt.body(agent, spec(agent, nil)), 200)

		for _, tc := range []struct {
			what      string
			spec      map[string]any
			wantInMsg []string
		}{
			{"a different spec.agent_id", spec("someone-else", nil), []string{"spec.agent_id", "agent_id", `"someone-else"`, `"` + agent + `"`}},
			{"a bad role", spec(agent, func(s map[string]any) { s["role"] = "has space" }), []string{"spec.role"}},
			{"a bad capacity", spec(agent, func(s map[string]any) { s["capacity"] = -1 }), []string{"spec.capacity"}},
			{"a bad capability", spec(agent, func(s map[string]any) { s["capabilities"] = []string{"ok", "not ok"} }), []string{"spec.capabilities[1]"}},
			{"an unknown grant", spec(agent, func(s map[string]any) { s["grants"] = []string{"everything"} }), []string{"spec.grants[0]"}},
			{"metadata not an object", spec(agent, func(s map[string]any) { s["public_metadata"] = []int{1} }), []string{"spec.public_metadata"}},
		} {
			if rt.name == "agents:register" && tc.what == "a different spec.agent_id" {
				continue // agents:register names the agent only in the spec
			}
			r := e.do(asAdmin, "POST", rt.path, rt.body(agent, tc.spec))
			wantStatus(t, rt.name+" with "+tc.what, r, 422, "ValidationError")
			for _, w := range tc.wantInMsg {
				if msg := errorMessage(r); !strings.Contains(msg, w) {
					t.Errorf("%s with %s: message %q does not name %s", rt.name, tc.what, msg, w)
				}
			}
		}
	}
	// agents:register without spec.agent_id names the field.
	r := e.do(asAdmin, "POST", "/v3r1/projects/p1/agents:register", map[string]any{"spec": map[string]any{"role": "worker"},
		"provenance": map[string]any{"kind": "test", "external_ref": "x"}})
	wantStatus(t, "agents:register without spec.agent_id", r, 422, "ValidationError")
	if msg := errorMessage(r); !strings.Contains(msg, "spec.agent_id") {
		t.Errorf("agents:register without spec.agent_id: message %q does not name spec.agent_id", msg)
	}
	// The defaults are the same on every route.
	for _, agent := range []string{"same-a", "same-b"} {
		v := e.agentView(asAdmin, "p1", agent)
		if v.Role != "worker" || v.Capacity != 2 || !v.Enabled || !v.AcceptsWork || string(v.PublicMetadata) != "{}" {
			t.Errorf("agent %s = %+v, want role worker, capacity 2, enabled, accepting work, metadata {}", agent, v)
		}
	}
}

// TestUnknownFieldNamesItsPath: on every kind of route (engine, admin, the
// manifest the kernel reads), an unknown field is a 422 that names the field
// by its full path from the body, at every depth.
func TestUnknownFieldNamesItsPath(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "w", 1)
	e.dispatch(req, "w", "k1")
	c := e.claim(w)
	with := func(body any, change func(map[string]any)) map[string]any {
		b, _ := json.Marshal(body)
		var m map[string]any
		json.Unmarshal(b, &m)
		change(m)
		return m
	}
	spec := map[string]any{"agent_id": "new", "role": "worker"}
	claimTok := map[string]any{"project_id": c.Claim.ProjectID, "turn_id": c.Claim.TurnID, "agent_id": c.Claim.AgentID, "token": c.Claim.Token, "expires_at": c.Claim.ExpiresAt}
	for _, tc := range []struct {
		name, method, path string
		who                as
		body               map[string]any
		field              string
	}{
		{"agents:register", "POST", "/v3r1/projects/p1/agents:register", asAdmin,
			map[string]any{"spec": with(spec, func(m map[string]any) { m["bogus"] = 1 }), "provenance": map[string]any{"kind": "test", "external_ref": "x"}}, "spec.bogus"},
		{"agents:register provenance", "POST", "/v3r1/projects/p1/agents:register", asAdmin,
			map[string]any{"spec": spec, "provenance": map[string]any{"kind": "test", "external_ref": "x", "extra": true}}, "provenance.extra"},
		{"turns:dispatch requested_by", "POST", "/v3r1/projects/p1/turns:dispatch", req,
			with(dispatchBody("p1", "req", "w", "k2", nil), func(m map[string]any) { m["requested_by"].(map[string]any)["x"] = 1 }), "requested_by.x"},
		{"turns:dispatch authority.parent_claim", "POST", "/v3r1/projects/p1/turns:dispatch", req,
			with(dispatchBody("p1", "req", "w", "k3", nil), func(m map[string]any) {
				m["authority"] = map[string]any{"mode": "child_derivation", "parent_claim": with(claimTok, func(m map[string]any) { m["y"] = 1 })}
			}), "authority.parent_claim.y"},
		{"turns:dispatch trace", "POST", "/v3r1/projects/p1/turns:dispatch", req,
			with(dispatchBody("p1", "req", "w", "k4", nil), func(m map[string]any) { m["trace"] = map[string]any{"trace_id": "t", "span": 1} }), "trace.span"},
		{"claims:renew", "POST", "/v3r1/projects/p1/claims:renew", w,
			map[string]any{"claim": with(claimTok, func(m map[string]any) { m["lease"] = 1 })}, "claim.lease"},
		{"claims:claim at the top", "POST", "/v3r1/projects/p1/agents/w/claims:claim", w,
			map[string]any{"agent": ref("p1", "w"), "wait": "30s"}, "wait"},
		{"agent-credential-tokens:request", "POST", "/admin/v1/projects/p1/agent-credential-tokens:request", asAdmin,
			map[string]any{"agent_id": "new", "spec": with(spec, func(m map[string]any) { m["bogus"] = 1 })}, "spec.bogus"},
		{"agent-join-invites", "POST", "/admin/v1/projects/p1/agent-join-invites", asAdmin,
			map[string]any{"agent_id": "new", "profile_kind": "byoa", "runtime_kind": "go", "spec": with(spec, func(m map[string]any) { m["capabilities"] = []string{}; m["bogus"] = 1 })}, "spec.bogus"},
		{"agents:drain requested_by", "POST", "/v3r1/projects/p1/management/agents/w:drain", asAdmin,
			map[string]any{"agent": ref("p1", "w"), "requested_by": with(ref("p1", "req"), func(m map[string]any) { m["x"] = 1 })}, "requested_by.x"},
		{"work-memory report record", "POST", "/v3r1/projects/p1/agents/w/work-memory-reports", w,
			manifest(func(m map[string]any) { record(1, m)["weight"] = 1 }), "records[1].weight"},
	} {
		r := e.do(tc.who, tc.method, tc.path, tc.body)
		wantStatus(t, tc.name, r, 422, "ValidationError")
		if msg := errorMessage(r); !strings.Contains(msg, `unknown field "`+tc.field+`"`) {
			t.Errorf("%s: message %q does not name %s", tc.name, msg, tc.field)
		}
	}
}

// TestBootstrapIsOneEvent: the admin's bootstrap of a new agent registers it
// and issues its credential with one event, so there are no two halves for a
// crash to split.
func TestBootstrapIsOneEvent(t *testing.T) {
	e := newEnv(t)
	before := e.ledgerLast(t, "p1")
	m := decodeMaterial(t, e.must(asAdmin, "POST", "/admin/v1/projects/p1/agent-credential-tokens:request",
		map[string]any{"agent_id": "boot", "spec": map[string]any{"role": "booter"}}, 200))
	if got := e.ledgerLast(t, "p1"); got != before+1 {
		t.Errorf("bootstrap appended %d events, want 1", got-before)
	}
	items, _ := e.readFeed(asAdmin, "/v3r1/projects/p1/agents/boot/feed", 50)
	if diff := cmp.Diff([]string{"credential.issued"}, feedTypes(items)); diff != "" {
		t.Errorf("feed of boot (-want +got):\n%s", diff)
	}
	if m.Profile.Agent.Role != "booter" || m.Profile.Agent.Provenance.Kind != "admin_bootstrap" {
		t.Errorf("bootstrap material = %+v, want role booter, provenance admin_bootstrap", m)
	}
	// A refused bootstrap appends nothing at all.
	before = e.ledgerLast(t, "p1")
	wantStatus(t, "bootstrap with a bad spec", e.do(asAdmin, "POST", "/admin/v1/projects/p1/agent-credential-tokens:request",
		map[string]any{"agent_id": "boot2", "spec": map[string]any{"capacity": -1}}), 422, "ValidationError")
	if got := e.ledgerLast(t, "p1"); got != before {
		t.Errorf("a refused bootstrap appended %d events, want 0", got-before)
	}
	wantStatus(t, "agent of the refused bootstrap", e.do(asAdmin, "GET", "/v3r1/projects/p1/agents/boot2", nil), 404, "NotFoundError")
}

func (e *env) ledgerLast(t *testing.T, project string) uint64 {
	t.Helper()
	n, err := e.ledger.LastSeq(t.Context(), project)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
