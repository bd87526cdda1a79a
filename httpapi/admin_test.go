package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
)

// material is the response of agent-credential-tokens:request and of a join
// redeem.
type material struct {
	Profile struct {
		ProjectID   string               `json:"project_id"`
		AgentID     string               `json:"agent_id"`
		ProfileKind string               `json:"profile_kind"`
		RuntimeKind string               `json:"runtime_kind"`
		InviteID    string               `json:"invite_id"`
		Agent       projection.AgentView `json:"agent"`
	} `json:"profile"`
	Credential credentialSummary `json:"credential"`
	Token      string            `json:"agent_credential_token"`
}

// decodeMaterial decodes a material response and checks its shape: exactly
// profile, credential and agent_credential_token, with the token beside the
// profile and nowhere inside it.
func decodeMaterial(t *testing.T, r response) material {
	t.Helper()
	var top map[string]json.RawMessage
	r.decode(t, &top)
	if diff := cmp.Diff([]string{"agent_credential_token", "credential", "profile"}, sortedKeys(top)); diff != "" {
		t.Errorf("material keys (-want +got):\n%s", diff)
	}
	var m material
	r.decode(t, &m)
	if m.Token == "" {
		t.Fatalf("material %s has no agent_credential_token", r.body)
	}
	if bytes.Contains(top["profile"], []byte(m.Token)) || bytes.Contains(top["profile"], []byte("token")) {
		t.Errorf("the profile carries the token: %s", top["profile"])
	}
	if bytes.Contains(top["credential"], []byte(m.Token)) {
		t.Errorf("the credential summary carries the token: %s", top["credential"])
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestAdminCredentialTokensRequest(t *testing.T) {
	e := newEnv(t)
	w := e.register("p1", "w", 1)
	const path = "/admin/v1/projects/p1/agent-credential-tokens:request"
	body := map[string]any{"agent_id": "boot", "spec": map[string]any{"role": "bootstrapper", "capacity": 2,
		"capabilities": []string{"summarize"}, "grants": []string{"turns:dispatch"}, "public_metadata": map[string]any{"v": 1}},
		"provenance": map[string]any{"kind": "operator", "external_ref": "ticket-7", "payload_hash": nil}}

	wantStatus(t, "request without a bearer", e.do(asNobody, "POST", path, body), 401, "UnauthorizedError")
	wantStatus(t, "request with an agent's three headers", e.do(w, "POST", path, body), 401, "UnauthorizedError")
	req, _ := http.NewRequest("POST", e.url+path, bytes.NewReader([]byte(`{"agent_id":"boot"}`)))
	req.Header.Set("Authorization", "Bearer "+w.token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("request with an agent token as the bearer = %v %v, want 401", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}

	m := decodeMaterial(t, e.must(asAdmin, "POST", path, body, 200))
	now := e.clock.Now()
	if m.Profile.ProjectID != "p1" || m.Profile.AgentID != "boot" || m.Profile.Agent.Role != "bootstrapper" || m.Profile.Agent.Capacity != 2 ||
		!cmp.Equal(m.Profile.Agent.Grants, []string{"turns:dispatch"}) || m.Profile.Agent.Provenance.Kind != "operator" {
		t.Errorf("profile = %+v, want agent boot registered with the spec given", m.Profile)
	}
	if want := (credentialSummary{CredentialID: m.Credential.CredentialID, ProjectID: "p1", AgentID: "boot", Status: "active",
		IssuedAt: now, ExpiresAt: now.Add(30 * 24 * time.Hour)}); !cmp.Equal(want, m.Credential) {
		t.Errorf("credential = %+v, want %+v", m.Credential, want)
	}
	boot := as{project: "p1", agent: "boot", token: m.Token}
	e.must(boot, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchBody("p1", "boot", "w", "from-boot", map[string]any{}), 200)

	// Without a spec, an existing agent keeps its spec and gets another credential.
	m2 := decodeMaterial(t, e.must(asAdmin, "POST", path, map[string]any{"agent_id": "boot"}, 200))
	if m2.Profile.Agent.Role != "bootstrapper" || m2.Token == m.Token || m2.Credential.CredentialID == m.Credential.CredentialID {
		t.Errorf("second request = role %s, same token %v, same credential %v; want the spec kept and a new credential",
			m2.Profile.Agent.Role, m2.Token == m.Token, m2.Credential.CredentialID == m.Credential.CredentialID)
	}
	e.must(boot, "GET", "/v3r1/projects/p1/agents/boot", nil, 200) // the first token still works
	// With a spec, the agent's spec is replaced.
	m3 := decodeMaterial(t, e.must(asAdmin, "POST", path, map[string]any{"agent_id": "boot", "spec": map[string]any{"role": "reviewer"}}, 200))
	if m3.Profile.Agent.Role != "reviewer" || len(m3.Profile.Agent.Grants) != 0 {
		t.Errorf("request with a new spec = role %s grants %v, want reviewer and the defaults", m3.Profile.Agent.Role, m3.Profile.Agent.Grants)
	}
	// A new agent without a spec gets the defaults.
	m4 := decodeMaterial(t, e.must(asAdmin, "POST", path, map[string]any{"agent_id": "plain"}, 200))
	if a := m4.Profile.Agent; a.Role != "agent" || !a.Enabled || !a.AcceptsWork || a.Capacity != 1 || a.Provenance.Kind != "admin_bootstrap" {
		t.Errorf("default profile = %+v, want role agent, enabled, accepting work, capacity 1, provenance admin_bootstrap", a)
	}

	for _, tc := range []struct {
		name string
		path string
		body any
	}{
		{"agent_id missing", path, map[string]any{}},
		{"agent_id with a dot", path, map[string]any{"agent_id": "a.b"}},
		{"unknown grant", path, map[string]any{"agent_id": "x", "spec": map[string]any{"grants": []string{"everything"}}}},
		{"public_metadata not an object", path, map[string]any{"agent_id": "x", "spec": map[string]any{"public_metadata": "x"}}},
		{"unknown field", path, map[string]any{"agent_id": "x", "token": "mine"}},
		{"not JSON", path, "{"},
		{"project id with a dot", "/admin/v1/projects/p.1/agent-credential-tokens:request", map[string]any{"agent_id": "x"}},
	} {
		wantStatus(t, "request "+tc.name, e.do(asAdmin, "POST", tc.path, tc.body), 422, "ValidationError")
	}
	var pg agentPage
	e.must(asAdmin, "GET", "/v3r1/projects/p1/projection/agents", nil, 200).decode(t, &pg)
	if diff := cmp.Diff([]string{"boot", "plain", "w"}, ids(pg.Items, func(v projection.AgentView) string { return v.AgentID })); diff != "" {
		t.Errorf("agents after the requests (-want +got):\n%s", diff)
	}
}

type invite struct {
	InviteID    string `json:"invite_id"`
	ProjectID   string `json:"project_id"`
	AgentID     string `json:"agent_id"`
	ProfileKind string `json:"profile_kind"`
	RuntimeKind string `json:"runtime_kind"`
	ExpiresAt   string `json:"expires_at"`
	SingleUse   bool   `json:"single_use"`
}

// createInvite creates a join invite with the admin bearer and returns it and
// its join code.
func (e *env) createInvite(project string, body map[string]any) (invite, string) {
	e.t.Helper()
	r := e.must(asAdmin, "POST", "/admin/v1/projects/"+project+"/agent-join-invites", body, 200)
	var top map[string]json.RawMessage
	r.decode(e.t, &top)
	if diff := cmp.Diff([]string{"invite", "join_code"}, sortedKeys(top)); diff != "" {
		e.t.Errorf("invite response keys (-want +got):\n%s", diff)
	}
	var fields map[string]any
	if err := json.Unmarshal(top["invite"], &fields); err != nil {
		e.t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"agent_id", "expires_at", "invite_id", "profile_kind", "project_id", "runtime_kind", "single_use"}, sortedKeys(fields)); diff != "" {
		e.t.Errorf("join invite fields (-want +got):\n%s", diff)
	}
	var got struct {
		Invite   invite `json:"invite"`
		JoinCode string `json:"join_code"`
	}
	r.decode(e.t, &got)
	if got.JoinCode == "" || bytes.Contains(top["invite"], []byte(got.JoinCode)) {
		e.t.Fatalf("invite response %s: want a join code beside the invite", r.body)
	}
	return got.Invite, got.JoinCode
}

func inviteBody(agent string, change func(b map[string]any)) map[string]any {
	b := map[string]any{"agent_id": agent, "profile_kind": "byoa", "runtime_kind": "python-3",
		"spec": map[string]any{"role": "joiner", "capabilities": []string{"summarize"}, "capacity": 1}}
	if change != nil {
		change(b)
	}
	return b
}

func TestAdminJoinInvites(t *testing.T) {
	e := newEnv(t)
	w := e.register("p1", "w", 1)
	const path = "/admin/v1/projects/p1/agent-join-invites"

	wantStatus(t, "create without a bearer", e.do(asNobody, "POST", path, inviteBody("j", nil)), 401, "UnauthorizedError")
	wantStatus(t, "create with an agent's three headers", e.do(w, "POST", path, inviteBody("j", nil)), 401, "UnauthorizedError")
	req, _ := http.NewRequest("POST", e.url+path, bytes.NewReader([]byte(`{}`)))
	req.Header.Set("Authorization", "Bearer "+w.token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("create with an agent token as the bearer = %v %v, want 401", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}

	now := e.clock.Now()
	inv, code := e.createInvite("p1", inviteBody("j1", func(b map[string]any) { b["expires_in_seconds"] = 3600; b["single_use"] = true }))
	want := invite{InviteID: inv.InviteID, ProjectID: "p1", AgentID: "j1", ProfileKind: "byoa", RuntimeKind: "python-3",
		ExpiresAt: now.Add(time.Hour).Format(time.RFC3339), SingleUse: true}
	if diff := cmp.Diff(want, inv); diff != "" || inv.InviteID == "" {
		t.Errorf("invite (-want +got):\n%s", diff)
	}
	// Defaults: single use, 24 hours.
	def, code2 := e.createInvite("p1", inviteBody("j2", nil))
	if !def.SingleUse || def.ExpiresAt != now.Add(24*time.Hour).Format(time.RFC3339) || code2 == code {
		t.Errorf("default invite = %+v, want single use, expiring in 24h, its own code", def)
	}
	// The longest lifetime is 7 days; an existing agent may be invited too.
	e.createInvite("p1", inviteBody("w", func(b map[string]any) { b["expires_in_seconds"] = 7 * 24 * 3600; delete(b, "spec") }))

	for _, tc := range []struct {
		name string
		body any
	}{
		{"expires_in_seconds 0", inviteBody("x", func(b map[string]any) { b["expires_in_seconds"] = 0 })},
		{"expires_in_seconds negative", inviteBody("x", func(b map[string]any) { b["expires_in_seconds"] = -60 })},
		{"expires_in_seconds over 7 days", inviteBody("x", func(b map[string]any) { b["expires_in_seconds"] = 7*24*3600 + 1 })},
		{"expires_in_seconds not a number", inviteBody("x", func(b map[string]any) { b["expires_in_seconds"] = "1h" })},
		{"agent_id missing", inviteBody("x", func(b map[string]any) { delete(b, "agent_id") })},
		{"agent_id with a dot", inviteBody("a.b", nil)},
		{"profile_kind missing", inviteBody("x", func(b map[string]any) { delete(b, "profile_kind") })},
		{"runtime_kind with a space", inviteBody("x", func(b map[string]any) { b["runtime_kind"] = "py thon" })},
		{"spec with an unknown grant", inviteBody("x", func(b map[string]any) { b["spec"] = map[string]any{"grants": []string{"all"}} })},
		{"unknown field", inviteBody("x", func(b map[string]any) { b["join_code"] = "mine" })},
		{"not JSON", "{"},
	} {
		wantStatus(t, "create "+tc.name, e.do(asAdmin, "POST", path, tc.body), 422, "ValidationError")
	}
	wantStatus(t, "create in a project id with a dot", e.do(asAdmin, "POST", "/admin/v1/projects/p.1/agent-join-invites", inviteBody("x", nil)), 422, "ValidationError")
}

// redeem redeems a join code without any authentication.
func (e *env) redeem(route, code string) response {
	e.t.Helper()
	return e.do(asNobody, "POST", route, map[string]any{"join_code": code})
}

const (
	redeemRoute = "/admin/v1/agent-joins:redeem"
	aliasRoute  = "/admin/v1/byoa/join:redeem"
)

func TestAdminJoinRedeem(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")

	for _, route := range []string{redeemRoute, aliasRoute} {
		func() {
			agent := "joiner-" + map[string]string{redeemRoute: "a", aliasRoute: "b"}[route]
			inv, code := e.createInvite("p1", inviteBody(agent, nil))
			now := e.clock.Now()
			m := decodeMaterial(t, e.must(asNobody, "POST", route, map[string]any{"join_code": code}, 200))
			if m.Profile.ProjectID != "p1" || m.Profile.AgentID != agent || m.Profile.ProfileKind != "byoa" || m.Profile.RuntimeKind != "python-3" ||
				m.Profile.InviteID != inv.InviteID || m.Profile.Agent.Role != "joiner" || !cmp.Equal(m.Profile.Agent.Capabilities, []string{"summarize"}) {
				t.Errorf("profile = %+v, want the invited agent's", m.Profile)
			}
			if want := (credentialSummary{CredentialID: m.Credential.CredentialID, ProjectID: "p1", AgentID: agent, Status: "active",
				IssuedAt: now, ExpiresAt: now.Add(30 * 24 * time.Hour)}); !cmp.Equal(want, m.Credential) {
				t.Errorf("credential = %+v, want %+v", m.Credential, want)
			}
			// The token authenticates the new agent.
			joined := as{project: "p1", agent: agent, token: m.Token}
			e.must(joined, "GET", "/v3r1/projects/p1/agents/"+agent, nil, 200)
			e.dispatch(req, agent, "for-"+agent)
			// A single-use invite is spent, on either route.
			wantStatus(t, "second redeem", e.redeem(redeemRoute, code), 409, "ConflictError")
			wantStatus(t, "second redeem on the alias", e.redeem(aliasRoute, code), 409, "ConflictError")
			// The new agent was registered by the redemption's own event.
			if p := m.Profile.Agent.Provenance; p.Kind != "join_invite" || p.ExternalRef != inv.InviteID {
				t.Errorf("provenance of %s = %+v, want join_invite %s", agent, p, inv.InviteID)
			}
			items, _ := e.readFeed(joined, "/v3r1/projects/p1/agents/"+agent+"/feed", 50)
			if diff := cmp.Diff([]string{"invite.created", "invite.redeemed", "turn.dispatched"}, feedTypes(items)); diff != "" {
				t.Errorf("feed of %s (-want +got):\n%s", agent, diff)
			}
		}()
	}

	// A multi-use invite gives a new credential each time.
	_, code := e.createInvite("p1", inviteBody("many", func(b map[string]any) { b["single_use"] = false }))
	first := decodeMaterial(t, e.must(asNobody, "POST", redeemRoute, map[string]any{"join_code": code}, 200))
	second := decodeMaterial(t, e.must(asNobody, "POST", aliasRoute, map[string]any{"join_code": code}, 200))
	if first.Token == second.Token || first.Credential.CredentialID == second.Credential.CredentialID {
		t.Errorf("two redeems of a multi-use invite share a token or credential")
	}
	e.must(as{project: "p1", agent: "many", token: first.Token}, "GET", "/v3r1/projects/p1/agents/many", nil, 200)
	e.must(as{project: "p1", agent: "many", token: second.Token}, "GET", "/v3r1/projects/p1/agents/many", nil, 200)

	// An existing agent keeps its spec and gets a credential.
	_, codeReq := e.createInvite("p1", inviteBody("req", nil))
	again := decodeMaterial(t, e.must(asNobody, "POST", redeemRoute, map[string]any{"join_code": codeReq}, 200))
	if a := again.Profile.Agent; a.Role != "worker" || !cmp.Equal(a.Grants, []string{"turns:dispatch"}) || a.Provenance.Kind != "test" {
		t.Errorf("profile of an existing agent after a join = %+v, want its registered spec", a)
	}
	e.dispatch(as{project: "p1", agent: "req", token: again.Token}, "many", "from-joined-req")

	// Expiry: the code stops working at expires_at.
	_, short := e.createInvite("p1", inviteBody("late", func(b map[string]any) { b["expires_in_seconds"] = 60 }))
	e.clock.Advance(60 * time.Second)
	for _, route := range []string{redeemRoute, aliasRoute} {
		wantStatus(t, "expired code on "+route, e.redeem(route, short), 401, "UnauthorizedError")
	}
	wantStatus(t, "agent of an expired invite", e.do(asAdmin, "GET", "/v3r1/projects/p1/agents/late", nil), 404, "NotFoundError")

	for _, tc := range []struct {
		name   string
		body   any
		status int
		err    string
	}{
		{"unknown code", map[string]any{"join_code": "tlj.p1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, 401, "UnauthorizedError"},
		{"code of an unknown project", map[string]any{"join_code": "tlj.nowhere.AAAA"}, 401, "UnauthorizedError"},
		{"code of another shape", map[string]any{"join_code": "hello"}, 401, "UnauthorizedError"},
		{"code with a bad project", map[string]any{"join_code": "tlj.a b.x"}, 401, "UnauthorizedError"},
		{"code empty", map[string]any{"join_code": ""}, 422, "ValidationError"},
		{"code missing", map[string]any{}, 422, "ValidationError"},
		{"code not a string", map[string]any{"join_code": 7}, 422, "ValidationError"},
		{"unknown field", map[string]any{"join_code": code, "agent_id": "x"}, 422, "ValidationError"},
		{"not JSON", "{", 422, "ValidationError"},
	} {
		for _, route := range []string{redeemRoute, aliasRoute} {
			wantStatus(t, "redeem "+tc.name+" on "+route, e.do(asNobody, "POST", route, tc.body), tc.status, tc.err)
		}
	}
}

// TestSingleUseInviteRedeemedConcurrently redeems one single-use code with 20
// requests at once, half through each of two instances on one NATS server:
// exactly one wins.
func TestSingleUseInviteRedeemedConcurrently(t *testing.T) {
	srv := natstest.Start(t)
	clk := &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	a := newEnvOn(t, srv.ClientURL(), clk)
	b := newEnvOn(t, srv.ClientURL(), clk)
	_, code := a.createInvite("p1", inviteBody("once", nil))

	const n = 20
	type result struct {
		status int
		body   []byte
		err    error
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		url := a.url
		if i%2 == 1 {
			url = b.url
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			data, _ := json.Marshal(map[string]string{"join_code": code})
			route := redeemRoute
			if i%4 >= 2 {
				route = aliasRoute
			}
			resp, err := http.Post(url+route, "application/json", bytes.NewReader(data))
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			results[i].status = resp.StatusCode
			results[i].body, results[i].err = io.ReadAll(resp.Body)
		}()
	}
	close(start)
	wg.Wait()

	count := map[int]int{}
	var winner material
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("redeem %d: %v", i, r.err)
		}
		count[r.status]++
		switch r.status {
		case 200:
			if err := json.Unmarshal(r.body, &winner); err != nil {
				t.Fatal(err)
			}
		case 409:
			if name := (response{body: r.body}).errorName(); name != "ConflictError" {
				t.Errorf("redeem %d = 409 %s, want ConflictError", i, r.body)
			}
		}
	}
	if diff := cmp.Diff(map[int]int{200: 1, 409: n - 1}, count); diff != "" {
		t.Fatalf("statuses of %d concurrent redeems (-want +got):\n%s", n, diff)
	}
	once := as{project: "p1", agent: "once", token: winner.Token}
	a.must(once, "GET", "/v3r1/projects/p1/agents/once", nil, 200)
	var l credentialList
	a.must(asAdmin, "GET", "/v3r1/projects/p1/agents/once/credentials", nil, 200).decode(t, &l)
	if len(l.Items) != 1 || l.Items[0].CredentialID != winner.Credential.CredentialID {
		t.Errorf("credentials of the invited agent = %+v, want only the winner's %s", l.Items, winner.Credential.CredentialID)
	}
	items, _ := a.readFeed(asAdmin, "/v3r1/projects/p1/projection/feed", 100)
	var redeemed int
	for _, it := range items {
		if it.Type == "invite.redeemed" {
			redeemed++
		}
	}
	if redeemed != 1 {
		t.Errorf("the ledger holds %d invite.redeemed events, want 1: %v", redeemed, fmt.Sprint(feedTypes(items)))
	}
}

// joinScenario is what the join scenario leaves behind for later checks.
type joinScenario struct {
	req, newbie as
	credential  string // the newbie's credential id
	turnID      string
	secrets     []string // every secret the scenario saw
}

// runJoinScenario: a newly joined agent redeems an invite, authenticates with
// its token, claims and finishes a Turn dispatched to it, then has its
// credential revoked and is refused.
func (e *env) runJoinScenario(t *testing.T) joinScenario {
	t.Helper()
	var s joinScenario
	s.req = e.register("p1", "req", 1, "turns:dispatch")
	s.secrets = append(s.secrets, adminToken, s.req.token)

	_, code := e.createInvite("p1", inviteBody("newbie", nil))
	s.secrets = append(s.secrets, code)
	m := decodeMaterial(t, e.must(asNobody, "POST", redeemRoute, map[string]any{"join_code": code}, 200))
	s.secrets = append(s.secrets, m.Token)
	s.newbie, s.credential = as{project: "p1", agent: "newbie", token: m.Token}, m.Credential.CredentialID

	// It authenticates with its token.
	if v := e.agentView(s.newbie, "p1", "newbie"); v.AgentID != "newbie" || !v.Admitting {
		t.Fatalf("the joined agent's snapshot = %+v, want newbie admitting work", v)
	}
	e.must(s.newbie, "POST", "/v3r1/projects/p1/management/agents/newbie:heartbeat-presence", nil, 200)

	// It claims and finishes a Turn dispatched to it.
	s.turnID = e.dispatch(s.req, "newbie", "scenario").TurnID
	c := e.claim(s.newbie)
	if c == nil || c.Turn.TurnID != s.turnID {
		t.Fatalf("the joined agent's claim = %+v, want turn %s", c, s.turnID)
	}
	s.secrets = append(s.secrets, c.Claim.Token)
	e.must(s.newbie, "POST", "/v3r1/projects/p1/turns/"+s.turnID+"/semantic-records", map[string]any{
		"claim": c.Claim, "role": "note", "payload": map[string]any{"progress": "half"}, "meta": nil, "trace": nil}, 200)
	var fin turn
	e.must(s.newbie, "POST", "/v3r1/projects/p1/turns/"+s.turnID+":finish", map[string]any{
		"claim": c.Claim, "outcome": "succeeded", "final_payload": map[string]any{"summary": "done"}, "final_record_role": "final",
		"meta": nil, "trace": nil}, 200).decode(t, &fin)
	if fin.State != "finished" || fin.Outcome == nil || *fin.Outcome != "succeeded" {
		t.Fatalf("finish = %+v, want finished, succeeded", fin)
	}
	var seen turn
	e.must(s.req, "GET", "/v3r1/projects/p1/turns/"+s.turnID, nil, 200).decode(t, &seen)
	if seen.State != "finished" || seen.LastTurnSeq != 2 {
		t.Fatalf("the requester sees the Turn as %+v, want finished with 2 records", seen)
	}

	// Its credential is revoked, and it is refused.
	e.must(asAdmin, "POST", "/v3r1/projects/p1/agents/newbie/credentials/"+s.credential+":revoke", nil, 200)
	for _, r := range []struct{ method, path string }{
		{"GET", "/v3r1/projects/p1/agents/newbie"},
		{"GET", "/v3r1/projects/p1/agents/newbie/feed"},
		{"POST", "/v3r1/projects/p1/management/agents/newbie:heartbeat-presence"},
	} {
		wantStatus(t, "revoked agent "+r.method+" "+r.path, e.do(s.newbie, r.method, r.path, nil), 401, "UnauthorizedError")
	}
	r := e.do(s.newbie, "POST", "/v3r1/projects/p1/agents/newbie/claims:claim", map[string]any{"agent": ref("p1", "newbie"), "meta": nil, "trace": nil})
	wantStatus(t, "revoked agent claims", r, 401, "UnauthorizedError")
	return s
}

func TestJoinedAgentScenario(t *testing.T) {
	e := newEnv(t)
	s := e.runJoinScenario(t)
	// The refusals changed nothing: the credential is revoked, the Turn finished.
	if got := statuses(e.credentials(asAdmin, "newbie")); !cmp.Equal(got, map[string]string{s.credential: "revoked"}) {
		t.Errorf("credentials of newbie = %v, want %s revoked", got, s.credential)
	}
	items, _ := e.readFeed(asAdmin, "/v3r1/projects/p1/agents/newbie/feed", 100)
	// No agent.heartbeat: the agent was seen when it redeemed its invite,
	// less than kernel.HeartbeatQuiet before.
	want := []string{"invite.created", "invite.redeemed", "turn.dispatched",
		"turn.claimed", "turn.record_appended", "turn.finished", "credential.revoked"}
	if diff := cmp.Diff(want, feedTypes(items)); diff != "" {
		t.Errorf("feed of the joined agent (-want +got):\n%s", diff)
	}
}

// newStalledInstance starts an instance on natsURL whose projections never
// follow the ledger (no projector runs), and whose commands wait for them
// only briefly: an instance whose reads lag as far behind as can be.
func newStalledInstance(t *testing.T, natsURL string, clk *clock) string {
	t.Helper()
	lcfg := ledger.DefaultConfig()
	lcfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(context.Background(), natstest.ConnectURL(t, natsURL), lcfg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := projection.DefaultConfig()
	pcfg.NoSync, pcfg.Now = true, clk.Now
	store, err := projection.Open(filepath.Join(t.TempDir(), "stalled.db"), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	kcfg := engine.DefaultConfig()
	kcfg.Now = clk.Now
	engine, err := engine.New(l, kcfg)
	if err != nil {
		t.Fatal(err)
	}
	hcfg := httpapi.DefaultConfig()
	hcfg.AdminTokenHash, hcfg.Now, hcfg.WaitTimeout = kernel.HashSecret(adminToken), clk.Now, 100*time.Millisecond
	hcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	api, err := httpapi.New(engine, store, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestCredentialTokensRequestKeepsSpecOnALaggingInstance: whether the agent
// exists is decided on the ledger, not on the instance's projections, so an
// instance whose projections lag never re-registers an agent with defaults.
func TestCredentialTokensRequestKeepsSpecOnALaggingInstance(t *testing.T) {
	srv := natstest.Start(t)
	clk := &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	a := newEnvOn(t, srv.ClientURL(), clk)
	stalled := &env{t: t, url: newStalledInstance(t, srv.ClientURL(), clk), clock: clk}
	a.registerSpec("p1", agentSpec{id: "boot", role: "bootstrapper", enabled: true, acceptsWork: true, capacity: 3, grants: []string{"turns:dispatch"}})

	// The stalled instance issues the credential on the ledger, then cannot
	// show it: its projections never get there.
	r := stalled.do(asAdmin, "POST", "/admin/v1/projects/p1/agent-credential-tokens:request", map[string]any{"agent_id": "boot"})
	wantStatus(t, "request on the stalled instance", r, 503, "ServiceUnavailableError")
	if !bytes.Contains(r.body, []byte("but the projections have not reached it yet; read it again shortly")) {
		t.Errorf("the stalled instance's 503 = %s, want it to say the change is on the ledger and to read it again", r.body)
	}
	items, _ := a.readFeed(asAdmin, "/v3r1/projects/p1/agents/boot/feed", 50)
	if diff := cmp.Diff([]string{"agent.registered", "credential.issued"}, feedTypes(items)); diff != "" {
		t.Errorf("feed of boot (-want +got):\n%s", diff)
	}
	if v := a.agentView(asAdmin, "p1", "boot"); v.Role != "bootstrapper" || v.Capacity != 3 {
		t.Errorf("boot after the request = role %s capacity %d, want its spec kept (bootstrapper, 3)", v.Role, v.Capacity)
	}
}
