package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// agentSpec is a registration spec for the tests of this file.
type agentSpec struct {
	id           string
	role         string
	enabled      bool
	acceptsWork  bool
	capacity     int
	capabilities []string
	grants       []string
}

// registerSpec registers an agent from a full spec with the admin bearer and
// returns its snapshot.
func (e *env) registerSpec(project string, s agentSpec) projection.AgentView {
	e.t.Helper()
	if s.role == "" {
		s.role = "worker"
	}
	if s.capabilities == nil {
		s.capabilities = []string{}
	}
	if s.grants == nil {
		s.grants = []string{}
	}
	var v projection.AgentView
	e.must(asAdmin, "POST", "/v3r1/projects/"+project+"/agents:register", map[string]any{
		"spec": map[string]any{"agent_id": s.id, "role": s.role, "description": "agent " + s.id, "enabled": s.enabled,
			"accepts_work": s.acceptsWork, "capacity": s.capacity, "capabilities": s.capabilities, "grants": s.grants,
			"public_metadata": map[string]any{"owner": "tests"}},
		"provenance": map[string]any{"kind": "test", "external_ref": "ref-" + s.id, "payload_hash": nil},
	}, 200).decode(e.t, &v)
	return v
}

// issueFor issues a credential for agent with the admin bearer and returns
// who the agent is with it, and the credential summary.
func (e *env) issueFor(project, agent string) (as, credentialSummary) {
	e.t.Helper()
	var got struct {
		Credential credentialSummary `json:"credential"`
		Token      string            `json:"token"`
	}
	e.must(asAdmin, "POST", "/v3r1/projects/"+project+"/agents/"+agent+"/credentials:issue", nil, 200).decode(e.t, &got)
	return as{project: project, agent: agent, token: got.Token}, got.Credential
}

type credentialSummary struct {
	CredentialID string    `json:"credential_id"`
	ProjectID    string    `json:"project_id"`
	AgentID      string    `json:"agent_id"`
	Status       string    `json:"status"`
	IssuedAt     time.Time `json:"issued_at"`
	ExpiresAt    time.Time `json:"expires_at"`
}

// agentPage is a Projection page of agent directory entries.
type agentPage struct {
	ProjectID   string                 `json:"project_id"`
	Items       []projection.AgentView `json:"items"`
	Limit       int                    `json:"limit"`
	Diagnostics []any                  `json:"diagnostics"`
}

// feedPage is a page of a ledger feed.
type feedPage struct {
	ProjectID          string                `json:"project_id"`
	Items              []projection.FeedItem `json:"items"`
	Limit              int                   `json:"limit"`
	Diagnostics        []any                 `json:"diagnostics"`
	NextAfterLedgerSeq uint64                `json:"next_after_ledger_seq"`
	HasMore            bool                  `json:"has_more"`
}

// readFeed reads a whole feed (path without a query) page by page with the
// given limit, and returns every item and the raw bodies of the pages.
func (e *env) readFeed(who as, path string, limit int) ([]projection.FeedItem, [][]byte) {
	e.t.Helper()
	var items []projection.FeedItem
	var bodies [][]byte
	var after uint64
	for range 10000 {
		r := e.must(who, "GET", fmt.Sprintf("%s?after_ledger_seq=%d&limit=%d", path, after, limit), nil, 200)
		bodies = append(bodies, r.body)
		var pg feedPage
		r.decode(e.t, &pg)
		if len(pg.Items) > limit {
			e.t.Fatalf("GET %s limit=%d = %d items", path, limit, len(pg.Items))
		}
		items = append(items, pg.Items...)
		if !pg.HasMore {
			return items, bodies
		}
		if pg.NextAfterLedgerSeq <= after {
			e.t.Fatalf("GET %s after %d: next_after_ledger_seq = %d, want more", path, after, pg.NextAfterLedgerSeq)
		}
		after = pg.NextAfterLedgerSeq
	}
	e.t.Fatalf("GET %s: feed does not end", path)
	return nil, nil
}

func feedTypes(items []projection.FeedItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Type)
	}
	return out
}

func (e *env) agentView(who as, project, agent string) projection.AgentView {
	e.t.Helper()
	var v projection.AgentView
	e.must(who, "GET", "/v3r1/projects/"+project+"/agents/"+agent, nil, 200).decode(e.t, &v)
	return v
}

// wantStatus checks a response's status and error name.
func wantStatus(t *testing.T, what string, r response, status int, name string) {
	t.Helper()
	if r.status != status || (name != "" && r.errorName() != name) {
		t.Errorf("%s = %d %s, want %d %s", what, r.status, r.body, status, name)
	}
}

func TestAgentTruthSnapshot(t *testing.T) {
	e := newEnv(t)
	registered := e.registerSpec("p1", agentSpec{id: "w", role: "reviewer", enabled: true, acceptsWork: true, capacity: 3,
		capabilities: []string{"review", "summarize"}, grants: []string{"projections:read"}})
	w, _ := e.issueFor("p1", "w")
	other := e.register("p1", "other", 1)

	now := e.clock.Now()
	want := projection.AgentView{
		ProjectID: "p1", AgentID: "w", Role: "reviewer", Description: "agent w", Enabled: true, AcceptsWork: true,
		Admitting: true, Capacity: 3, FreeCapacity: 3, Capabilities: []string{"review", "summarize"},
		Grants: []string{"projections:read"}, PublicMetadata: json.RawMessage(`{"owner":"tests"}`),
		Provenance:   projection.ProvenanceView{Kind: "test", ExternalRef: "ref-w"},
		RegisteredAt: now, UpdatedAt: now, Presence: "never",
	}
	ignoreSeq := cmpopts.IgnoreFields(projection.AgentView{}, "LedgerSeq")
	if diff := cmp.Diff(want, registered, ignoreSeq); diff != "" {
		t.Errorf("register response (-want +got):\n%s", diff)
	}
	for _, who := range []as{w, other, asAdmin} {
		got := e.agentView(who, "p1", "w")
		if diff := cmp.Diff(want, got, ignoreSeq); diff != "" {
			t.Errorf("GET agent w as %q (-want +got):\n%s", who.agent, diff)
		}
		if got.LedgerSeq == 0 {
			t.Errorf("GET agent w: ledger_seq = 0, want the seq of its registration")
		}
	}

	// A claimed Turn shows in active_claims and free_capacity.
	req := e.register("p1", "req", 1, "turns:dispatch")
	e.dispatch(req, "w", "k1")
	if c := e.claim(w); c == nil {
		t.Fatal("claim = null, want the Turn")
	}
	got := e.agentView(w, "p1", "w")
	if got.ActiveClaims != 1 || got.FreeCapacity != 2 || got.Presence != "online" {
		t.Errorf("after a claim: active_claims %d free_capacity %d presence %s, want 1, 2, online", got.ActiveClaims, got.FreeCapacity, got.Presence)
	}

	wantStatus(t, "GET unknown agent", e.do(w, "GET", "/v3r1/projects/p1/agents/ghost", nil), 404, "NotFoundError")
	wantStatus(t, "GET agent with a bad id", e.do(w, "GET", "/v3r1/projects/p1/agents/bad.id", nil), 422, "ValidationError")
	wantStatus(t, "GET agent without credentials", e.do(asNobody, "GET", "/v3r1/projects/p1/agents/w", nil), 401, "UnauthorizedError")
}

func admissionBody(project, agent, by string) map[string]any {
	return map[string]any{"agent": ref(project, agent), "requested_by": ref(project, by),
		"meta": map[string]any{"reason": "maintenance"}, "trace": map[string]any{"trace_id": "tr-1"}}
}

func TestDrainAndResume(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "w", 2)
	mgr := e.register("p1", "mgr", 1, "management")
	queued := e.dispatch(req, "w", "before-drain")

	var v projection.AgentView
	e.must(mgr, "POST", "/v3r1/projects/p1/management/agents/w:drain", admissionBody("p1", "w", "mgr"), 200).decode(t, &v)
	if !v.Drained || v.Admitting {
		t.Fatalf("drain = drained %v admitting %v, want true, false", v.Drained, v.Admitting)
	}
	// Draining again changes nothing and still answers the snapshot.
	e.must(mgr, "POST", "/v3r1/projects/p1/management/agents/w:drain", admissionBody("p1", "w", "mgr"), 200).decode(t, &v)
	if !v.Drained {
		t.Fatalf("second drain = drained %v, want true", v.Drained)
	}

	// A drained agent gets no new Turns.
	r := e.do(req, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchBody("p1", "req", "w", "after-drain", map[string]any{}))
	wantStatus(t, "dispatch to a drained agent", r, 422, "InvariantError")
	// Its queued Turn stays queued and is not claimed.
	if c := e.claim(w); c != nil {
		t.Fatalf("claim while drained = %+v, want null", c)
	}
	var tv turn
	e.must(req, "GET", "/v3r1/projects/p1/turns/"+queued.TurnID, nil, 200).decode(t, &tv)
	if tv.State != "queued" {
		t.Fatalf("queued Turn while drained: state %s, want queued", tv.State)
	}
	var offers struct {
		Items []projection.TurnOffer `json:"items"`
	}
	e.must(w, "GET", "/v3r1/projects/p1/projection/turn-offers?agent_id=w", nil, 200).decode(t, &offers)
	if len(offers.Items) != 1 || !offers.Items[0].Drained || offers.Items[0].Admitting || offers.Items[0].Queued != 1 {
		t.Errorf("offers of the drained agent = %+v, want one drained, not admitting, 1 queued", offers.Items)
	}

	// Refusals change nothing.
	for _, tc := range []struct {
		name   string
		who    as
		path   string
		body   any
		status int
		err    string
	}{
		{"without the management grant", w, "w:drain", admissionBody("p1", "w", "w"), 403, "ForbiddenError"},
		{"without the management grant (resume)", w, "w:resume", admissionBody("p1", "w", "w"), 403, "ForbiddenError"},
		{"requested_by another agent", mgr, "w:resume", admissionBody("p1", "w", "req"), 403, "ForbiddenError"},
		{"agent in another project", mgr, "w:resume", map[string]any{"agent": ref("p2", "w"), "requested_by": ref("p1", "mgr")}, 403, "ForbiddenError"},
		{"requested_by in another project", mgr, "w:resume", map[string]any{"agent": ref("p1", "w"), "requested_by": ref("p2", "mgr")}, 403, "ForbiddenError"},
		{"agent is not the path's", mgr, "w:resume", admissionBody("p1", "req", "mgr"), 422, "ValidationError"},
		{"agent missing", mgr, "w:resume", map[string]any{"requested_by": ref("p1", "mgr")}, 422, "ValidationError"},
		{"requested_by missing", mgr, "w:resume", map[string]any{"agent": ref("p1", "w")}, 422, "ValidationError"},
		{"unknown field", mgr, "w:resume", map[string]any{"agent": ref("p1", "w"), "requested_by": ref("p1", "mgr"), "x": 1}, 422, "ValidationError"},
		{"not JSON", mgr, "w:resume", "{", 422, "ValidationError"},
		{"unknown agent", mgr, "ghost:resume", admissionBody("p1", "ghost", "mgr"), 404, "NotFoundError"},
		{"no credentials", asNobody, "w:resume", admissionBody("p1", "w", "mgr"), 401, "UnauthorizedError"},
	} {
		r := e.do(tc.who, "POST", "/v3r1/projects/p1/management/agents/"+tc.path, tc.body)
		wantStatus(t, tc.name, r, tc.status, tc.err)
	}
	if v := e.agentView(w, "p1", "w"); !v.Drained {
		t.Fatalf("after refused resumes: drained %v, want true", v.Drained)
	}

	// The admin may resume too; meta and trace may be null.
	e.must(asAdmin, "POST", "/v3r1/projects/p1/management/agents/w:resume",
		map[string]any{"agent": ref("p1", "w"), "requested_by": ref("p1", "mgr"), "meta": nil, "trace": nil}, 200).decode(t, &v)
	if v.Drained || !v.Admitting {
		t.Fatalf("resume = drained %v admitting %v, want false, true", v.Drained, v.Admitting)
	}
	c := e.claim(w)
	if c == nil || c.Turn.TurnID != queued.TurnID {
		t.Fatalf("claim after resume = %+v, want turn %s", c, queued.TurnID)
	}
	e.dispatch(req, "w", "after-resume")

	items, _ := e.readFeed(w, "/v3r1/projects/p1/agents/w/feed", 50)
	var admission []string
	for _, it := range items {
		if it.Type == "agent.drained" || it.Type == "agent.resumed" {
			admission = append(admission, fmt.Sprintf("%s by %s/%s meta=%v", it.Type, it.Actor.Kind, it.Actor.AgentID, it.Meta != nil))
		}
	}
	if diff := cmp.Diff([]string{"agent.drained by agent/mgr meta=true", "agent.resumed by admin/ meta=false"}, admission); diff != "" {
		t.Errorf("admission events in the agent feed (-want +got):\n%s", diff)
	}
}

func TestHeartbeatPresence(t *testing.T) {
	e := newEnv(t)
	w := e.register("p1", "w", 1)
	other := e.register("p1", "other", 1)
	mgr := e.register("p1", "mgr", 1, "management")

	if v := e.agentView(w, "p1", "w"); v.Presence != "never" || v.LastSeenAt != nil {
		t.Fatalf("before any heartbeat: presence %s last_seen_at %v, want never, null", v.Presence, v.LastSeenAt)
	}
	seen := e.clock.Now()
	var v projection.AgentView
	e.must(w, "POST", "/v3r1/projects/p1/management/agents/w:heartbeat-presence",
		map[string]any{"agent": ref("p1", "w"), "meta": nil, "trace": nil}, 200).decode(t, &v)
	if v.Presence != "online" || v.LastSeenAt == nil || !v.LastSeenAt.Equal(seen) {
		t.Fatalf("heartbeat = presence %s last_seen_at %v, want online, %s", v.Presence, v.LastSeenAt, seen)
	}

	presence := func(when string, want string) {
		t.Helper()
		if got := e.agentView(other, "p1", "w"); got.Presence != want || got.LastSeenAt == nil || !got.LastSeenAt.Equal(seen) {
			t.Errorf("%s: snapshot presence %s last_seen_at %v, want %s, %s", when, got.Presence, got.LastSeenAt, want, seen)
		}
		var pg agentPage
		e.must(other, "GET", "/v3r1/projects/p1/projection/agents?agent_id=w", nil, 200).decode(t, &pg)
		if len(pg.Items) != 1 || pg.Items[0].Presence != want {
			t.Errorf("%s: projection/agents?agent_id=w = %+v, want presence %s", when, pg.Items, want)
		}
	}
	// A heartbeat within kernel.HeartbeatQuiet of the last sighting
	// records nothing: the agent stays online, seen when it was.
	head := e.ledgerLast(t, "p1")
	e.clock.Advance(kernel.HeartbeatQuiet - time.Second)
	e.must(w, "POST", "/v3r1/projects/p1/management/agents/w:heartbeat-presence", nil, 200).decode(t, &v)
	if v.Presence != "online" || !v.LastSeenAt.Equal(seen) || e.ledgerLast(t, "p1") != head {
		t.Errorf("a heartbeat %s after the last = presence %s last_seen_at %v, ledger at %d (was %d); want online, %s, nothing appended",
			kernel.HeartbeatQuiet-time.Second, v.Presence, v.LastSeenAt, e.ledgerLast(t, "p1"), head, seen)
	}
	e.clock.Advance(kernel.PresenceWindow - kernel.HeartbeatQuiet)
	presence("just under the presence window after the heartbeat", "online")
	e.clock.Advance(2 * time.Second)
	presence("just past the presence window after the heartbeat", "offline")

	// An empty body is a heartbeat too; long after the last, it is recorded.
	e.must(w, "POST", "/v3r1/projects/p1/management/agents/w:heartbeat-presence", nil, 200).decode(t, &v)
	if v.Presence != "online" || !v.LastSeenAt.Equal(e.clock.Now()) || e.ledgerLast(t, "p1") != head+1 {
		t.Errorf("empty-body heartbeat = presence %s last_seen_at %v, want online, now, one event", v.Presence, v.LastSeenAt)
	}
	// A manager may record another agent's presence; other agents may not.
	e.must(mgr, "POST", "/v3r1/projects/p1/management/agents/other:heartbeat-presence", nil, 200).decode(t, &v)
	if v.AgentID != "other" || v.Presence != "online" || !v.LastSeenAt.Equal(e.clock.Now()) {
		t.Errorf("heartbeat for other by a manager = %s presence %s last_seen_at %v, want other online now", v.AgentID, v.Presence, v.LastSeenAt)
	}
	wantStatus(t, "heartbeat for another agent", e.do(other, "POST", "/v3r1/projects/p1/management/agents/w:heartbeat-presence", nil), 403, "ForbiddenError")
	wantStatus(t, "heartbeat naming another project", e.do(w, "POST", "/v3r1/projects/p1/management/agents/w:heartbeat-presence",
		map[string]any{"agent": ref("p2", "w")}), 403, "ForbiddenError")
	wantStatus(t, "heartbeat naming another agent", e.do(w, "POST", "/v3r1/projects/p1/management/agents/w:heartbeat-presence",
		map[string]any{"agent": ref("p1", "other")}), 422, "ValidationError")
	wantStatus(t, "heartbeat of an unknown agent", e.do(asAdmin, "POST", "/v3r1/projects/p1/management/agents/ghost:heartbeat-presence", nil), 404, "NotFoundError")
	wantStatus(t, "heartbeat without credentials", e.do(asNobody, "POST", "/v3r1/projects/p1/management/agents/w:heartbeat-presence", nil), 401, "UnauthorizedError")
}

func TestReplacePublicMetadata(t *testing.T) {
	e := newEnv(t)
	w := e.register("p1", "w", 1)
	other := e.register("p1", "other", 1)
	mgr := e.register("p1", "mgr", 1, "management")
	const path = "/v3r1/projects/p1/management/agents/w/public-metadata"

	var v projection.AgentView
	e.must(w, "PUT", path, `{"team": "blue", "tags": ["a", "b"]}`, 200).decode(t, &v)
	if got, want := compactJSON(t, v.PublicMetadata), `{"tags":["a","b"],"team":"blue"}`; got != want {
		t.Fatalf("PUT public-metadata = %s, want %s", got, want)
	}
	e.must(mgr, "PUT", path, map[string]any{"team": "red"}, 200)
	if got := compactJSON(t, e.agentView(other, "p1", "w").PublicMetadata); got != `{"team":"red"}` {
		t.Fatalf("GET after a replace: public_metadata = %s, want the whole object replaced", got)
	}

	// The bound is 16 KiB of the body as sent.
	fill := func(n int) string {
		const head, tail = `{"x":"`, `"}`
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
	}
	e.must(w, "PUT", path, fill(16<<10), 200)
	for _, tc := range []struct {
		name   string
		who    as
		body   any
		status int
		err    string
	}{
		{"over 16 KiB", w, fill(16<<10 + 1), 422, "ValidationError"},
		{"an array", w, `["a"]`, 422, "ValidationError"},
		{"a string", w, `"blue"`, 422, "ValidationError"},
		{"null", w, `null`, 422, "ValidationError"},
		{"a number", w, `42`, 422, "ValidationError"},
		{"not JSON", w, `{"team":`, 422, "ValidationError"},
		{"empty", w, ``, 422, "ValidationError"},
		{"another agent's", other, `{"team":"x"}`, 403, "ForbiddenError"},
		{"no credentials", asNobody, `{"team":"x"}`, 401, "UnauthorizedError"},
	} {
		wantStatus(t, "PUT public-metadata "+tc.name, e.do(tc.who, "PUT", path, tc.body), tc.status, tc.err)
	}
	wantStatus(t, "PUT public-metadata of an unknown agent", e.do(asAdmin, "PUT", "/v3r1/projects/p1/management/agents/ghost/public-metadata", `{}`), 404, "NotFoundError")
	if got := e.agentView(w, "p1", "w").PublicMetadata; len(got) != 16<<10 {
		t.Errorf("after refused replaces: public_metadata has %d bytes, want the last accepted (%d)", len(got), 16<<10)
	}
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// manifest is a valid work-memory report manifest of agent w in p1; change
// returns a copy with a change.
func manifest(change func(m map[string]any)) map[string]any {
	m := map[string]any{
		"kind":       "agent_work_memory_report_manifest.v1",
		"request_id": "wm-1",
		"summary":    "what I learned",
		"records": []any{
			map[string]any{"role": "observation", "payload": map[string]any{"fact": "the sky is blue"}, "source_refs": []any{"turn:t1"}},
			map[string]any{"role": "decision", "payload": map[string]any{}, "source_refs": []any{}},
		},
		"final_payload":       map[string]any{"done": true},
		"declared_project_id": "p1",
		"declared_agent_id":   "w",
	}
	if change != nil {
		change(m)
	}
	return m
}

func record(i int, m map[string]any) map[string]any { return m["records"].([]any)[i].(map[string]any) }

func TestWorkMemoryReports(t *testing.T) {
	e := newEnv(t)
	w := e.register("p1", "w", 1)
	other := e.register("p1", "other", 1, "management", "projections:read", "credentials:admin")
	const path = "/v3r1/projects/p1/agents/w/work-memory-reports"

	var res struct {
		ReportID  string `json:"report_id"`
		ProjectID string `json:"project_id"`
		AgentID   string `json:"agent_id"`
		LedgerSeq uint64 `json:"ledger_seq"`
	}
	e.must(w, "POST", path, manifest(nil), 200).decode(t, &res)
	if res.ReportID == "" || res.ProjectID != "p1" || res.AgentID != "w" || res.LedgerSeq == 0 {
		t.Fatalf("report = %+v, want an id, p1, w and a ledger_seq", res)
	}
	// A null final_payload and empty records are fine.
	e.must(w, "POST", path, manifest(func(m map[string]any) { m["final_payload"] = nil; m["records"] = []any{}; m["request_id"] = "wm-2" }), 200)

	for _, tc := range []struct {
		name   string
		who    as
		body   any
		status int
		err    string
	}{
		{"kind not the constant", w, manifest(func(m map[string]any) { m["kind"] = "agent_work_memory_report_manifest.v2" }), 422, "ValidationError"},
		{"kind missing", w, manifest(func(m map[string]any) { delete(m, "kind") }), 422, "ValidationError"},
		{"declared_project_id of another project", w, manifest(func(m map[string]any) { m["declared_project_id"] = "p2" }), 403, "ForbiddenError"},
		{"declared_agent_id of another agent", w, manifest(func(m map[string]any) { m["declared_agent_id"] = "other" }), 403, "ForbiddenError"},
		{"meta at the top", w, manifest(func(m map[string]any) { m["meta"] = map[string]any{"note": "x"} }), 422, "ValidationError"},
		{"meta null at the top", w, manifest(func(m map[string]any) { m["meta"] = nil }), 422, "ValidationError"},
		{"meta in a record", w, manifest(func(m map[string]any) { record(0, m)["meta"] = map[string]any{} }), 422, "ValidationError"},
		{"meta in a record payload", w, manifest(func(m map[string]any) { record(0, m)["payload"] = map[string]any{"deep": map[string]any{"meta": 1}} }), 422, "ValidationError"},
		{"meta in a source ref", w, manifest(func(m map[string]any) { record(0, m)["source_refs"] = []any{map[string]any{"meta": "x"}} }), 422, "ValidationError"},
		{"meta in final_payload", w, manifest(func(m map[string]any) { m["final_payload"] = map[string]any{"meta": nil} }), 422, "ValidationError"},
		{"records not an array", w, manifest(func(m map[string]any) { m["records"] = map[string]any{} }), 422, "ValidationError"},
		{"records missing", w, manifest(func(m map[string]any) { delete(m, "records") }), 422, "ValidationError"},
		{"record payload not an object", w, manifest(func(m map[string]any) { record(0, m)["payload"] = []any{} }), 422, "ValidationError"},
		{"record payload missing", w, manifest(func(m map[string]any) { delete(record(0, m), "payload") }), 422, "ValidationError"},
		{"record role missing", w, manifest(func(m map[string]any) { delete(record(0, m), "role") }), 422, "ValidationError"},
		{"record role not a string", w, manifest(func(m map[string]any) { record(0, m)["role"] = 7 }), 422, "ValidationError"},
		{"record source_refs missing", w, manifest(func(m map[string]any) { delete(record(1, m), "source_refs") }), 422, "ValidationError"},
		{"record source_refs not an array", w, manifest(func(m map[string]any) { record(1, m)["source_refs"] = "turn:t1" }), 422, "ValidationError"},
		{"record with an unknown field", w, manifest(func(m map[string]any) { record(1, m)["weight"] = 1 }), 422, "ValidationError"},
		{"an unknown field", w, manifest(func(m map[string]any) { m["extra"] = true }), 422, "ValidationError"},
		{"final_payload an array", w, manifest(func(m map[string]any) { m["final_payload"] = []any{} }), 422, "ValidationError"},
		{"request_id missing", w, manifest(func(m map[string]any) { delete(m, "request_id") }), 422, "ValidationError"},
		{"summary missing", w, manifest(func(m map[string]any) { delete(m, "summary") }), 422, "ValidationError"},
		{"final_payload missing", w, manifest(func(m map[string]any) { delete(m, "final_payload") }), 422, "ValidationError"},
		{"declared_project_id missing", w, manifest(func(m map[string]any) { delete(m, "declared_project_id") }), 422, "ValidationError"},
		{"declared_agent_id missing", w, manifest(func(m map[string]any) { delete(m, "declared_agent_id") }), 422, "ValidationError"},
		{"not an object", w, `[]`, 422, "ValidationError"},
		{"another agent submitting for w", other, manifest(nil), 403, "ForbiddenError"},
		{"the admin submitting for w", asAdmin, manifest(nil), 403, "ForbiddenError"},
		{"no credentials", asNobody, manifest(nil), 401, "UnauthorizedError"},
	} {
		wantStatus(t, "report "+tc.name, e.do(tc.who, "POST", path, tc.body), tc.status, tc.err)
	}

	items, _ := e.readFeed(w, "/v3r1/projects/p1/agents/w/feed", 50)
	var reports []projection.FeedItem
	for _, it := range items {
		if it.Type == "agent.work_memory_reported" {
			reports = append(reports, it)
		}
	}
	if len(reports) != 2 {
		t.Fatalf("agent feed holds %d work-memory reports, want the 2 accepted ones: %v", len(reports), feedTypes(items))
	}
	first := reports[0]
	if first.LedgerSeq != res.LedgerSeq || first.ID != "w" || first.Actor.AgentID != "w" || first.Meta != nil {
		t.Errorf("report feed item = seq %d id %s actor %+v meta %v, want seq %d, agent w, actor w, no meta", first.LedgerSeq, first.ID, first.Actor, first.Meta, res.LedgerSeq)
	}
	var data struct {
		ReportID string          `json:"report_id"`
		Manifest json.RawMessage `json:"manifest"`
	}
	if err := json.Unmarshal(first.Data, &data); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(manifest(nil))
	if data.ReportID != res.ReportID || compactJSON(t, data.Manifest) != compactJSON(t, want) {
		t.Errorf("report feed data = %s, want report %s with the manifest as sent %s", first.Data, res.ReportID, want)
	}
}

func TestAgentFeed(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "w", 5)
	other := e.register("p1", "other", 1)
	reader := e.register("p1", "reader", 1, "projections:read")

	var mine []string
	for i := range 3 {
		mine = append(mine, e.dispatch(req, "w", fmt.Sprintf("w-%d", i)).TurnID)
	}
	notMine := e.dispatch(req, "other", "other-0").TurnID
	e.must(w, "POST", "/v3r1/projects/p1/management/agents/w:heartbeat-presence", nil, 200)
	c := e.claim(w)
	e.must(w, "POST", "/v3r1/projects/p1/turns/"+c.Turn.TurnID+":finish", map[string]any{
		"claim": c.Claim, "outcome": "succeeded", "final_payload": nil, "final_record_role": "", "meta": nil, "trace": nil}, 200)
	e.must(other, "POST", "/v3r1/projects/p1/management/agents/other:heartbeat-presence", nil, 200)

	all, _ := e.readFeed(w, "/v3r1/projects/p1/agents/w/feed", 500)
	var got []string
	for _, it := range all {
		got = append(got, it.Type+" "+it.ID)
	}
	want := []string{"agent.registered w", "credential.issued " + credentialID(t, all, 0)}
	for _, id := range mine {
		want = append(want, "turn.dispatched "+id)
	}
	want = append(want, "agent.heartbeat w", "turn.claimed "+c.Turn.TurnID, "turn.finished "+c.Turn.TurnID)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent feed of w (-want +got):\n%s", diff)
	}
	for _, it := range all {
		if it.ID == notMine || it.ID == "other" || it.ProjectID != "p1" {
			t.Errorf("agent feed of w holds %s %s of project %s", it.Type, it.ID, it.ProjectID)
		}
	}

	// Paging with after_ledger_seq and limit gives the same items.
	for _, limit := range []int{1, 2, 3} {
		paged, _ := e.readFeed(w, "/v3r1/projects/p1/agents/w/feed", limit)
		if diff := cmp.Diff(all, paged); diff != "" {
			t.Errorf("agent feed read %d at a time (-whole +paged):\n%s", limit, diff)
		}
	}
	var pg feedPage
	e.must(w, "GET", fmt.Sprintf("/v3r1/projects/p1/agents/w/feed?after_ledger_seq=%d&limit=2", all[2].LedgerSeq), nil, 200).decode(t, &pg)
	if diff := cmp.Diff(all[3:5], pg.Items); diff != "" || !pg.HasMore || pg.NextAfterLedgerSeq != all[4].LedgerSeq || pg.Limit != 2 || pg.ProjectID != "p1" {
		t.Errorf("feed after %d limit 2 = next %d has_more %v limit %d, items (-want +got):\n%s", all[2].LedgerSeq, pg.NextAfterLedgerSeq, pg.HasMore, pg.Limit, diff)
	}
	last := all[len(all)-1].LedgerSeq
	e.must(w, "GET", fmt.Sprintf("/v3r1/projects/p1/agents/w/feed?after_ledger_seq=%d", last), nil, 200).decode(t, &pg)
	if len(pg.Items) != 0 || pg.HasMore || pg.NextAfterLedgerSeq != last {
		t.Errorf("feed after the last item = %d items, has_more %v, next %d; want none, false, %d", len(pg.Items), pg.HasMore, pg.NextAfterLedgerSeq, last)
	}

	// Read policy: the agent itself, holders of projections:read, the admin.
	e.must(reader, "GET", "/v3r1/projects/p1/agents/w/feed", nil, 200)
	e.must(asAdmin, "GET", "/v3r1/projects/p1/agents/w/feed", nil, 200)
	wantStatus(t, "another agent's feed without projections:read", e.do(other, "GET", "/v3r1/projects/p1/agents/w/feed", nil), 403, "ForbiddenError")
	wantStatus(t, "agent feed without credentials", e.do(asNobody, "GET", "/v3r1/projects/p1/agents/w/feed", nil), 401, "UnauthorizedError")
	wantStatus(t, "feed of an unknown agent", e.do(asAdmin, "GET", "/v3r1/projects/p1/agents/ghost/feed", nil), 404, "NotFoundError")
	for _, q := range []string{"after_ledger_seq=-1", "after_ledger_seq=x", "limit=0", "limit=501", "limit=x", "cursor=1", "limit=1&limit=2"} {
		wantStatus(t, "agent feed ?"+q, e.do(w, "GET", "/v3r1/projects/p1/agents/w/feed?"+q, nil), 422, "ValidationError")
	}
}

// credentialID returns the credential id of the i-th credential event of a feed.
func credentialID(t *testing.T, items []projection.FeedItem, i int) string {
	t.Helper()
	for _, it := range items {
		if strings.HasPrefix(it.Type, "credential.") {
			if i == 0 {
				return it.ID
			}
			i--
		}
	}
	t.Fatalf("feed has no credential event %d", i)
	return ""
}

func ids[T any](items []T, id func(T) string) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, id(it))
	}
	return out
}

func TestProjectionAgentsFilters(t *testing.T) {
	e := newEnv(t)
	e.registerSpec("p1", agentSpec{id: "a1", role: "worker", enabled: true, acceptsWork: true, capacity: 2, capabilities: []string{"summarize", "translate"}})
	e.registerSpec("p1", agentSpec{id: "a2", role: "reviewer", enabled: true, acceptsWork: false, capacity: 1, capabilities: []string{"review"}})
	e.registerSpec("p1", agentSpec{id: "a3", role: "worker", enabled: false, acceptsWork: true, capacity: 1, capabilities: []string{"summarize"}})
	e.registerSpec("p1", agentSpec{id: "a4", role: "worker", enabled: true, acceptsWork: true, capacity: 1, capabilities: []string{"translate"}})
	e.registerSpec("p2", agentSpec{id: "a5", role: "worker", enabled: true, acceptsWork: true, capacity: 1, capabilities: []string{"summarize"}})
	e.must(asAdmin, "POST", "/v3r1/projects/p1/management/agents/a4:drain", admissionBody("p1", "a4", "a1"), 200)
	a1, _ := e.issueFor("p1", "a1")

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"a1", "a2", "a3", "a4"}},
		{"agent_id=a2", []string{"a2"}},
		{"agent_id=ghost", []string{}},
		{"agent_id=a5", []string{}},
		{"enabled_only=true", []string{"a1", "a2", "a4"}},
		{"enabled_only=false", []string{"a1", "a2", "a3", "a4"}},
		{"accepts_work_only=true", []string{"a1", "a3"}},
		{"accepts_work_only=1&enabled_only=1", []string{"a1"}},
		{"role=worker", []string{"a1", "a3", "a4"}},
		{"role=reviewer", []string{"a2"}},
		{"role=nobody", []string{}},
		{"capability=summarize", []string{"a1", "a3"}},
		{"capability=translate&enabled_only=true", []string{"a1", "a4"}},
		{"capability=translate&accepts_work_only=true", []string{"a1"}},
		{"role=worker&capability=review", []string{}},
		{"agent_id=a3&enabled_only=true", []string{}},
		{"limit=2", []string{"a1", "a2"}},
		{"limit=1&role=worker&enabled_only=true", []string{"a1"}},
	} {
		var pg agentPage
		e.must(a1, "GET", "/v3r1/projects/p1/projection/agents?"+tc.query, nil, 200).decode(t, &pg)
		got := ids(pg.Items, func(v projection.AgentView) string { return v.AgentID })
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("projection/agents?%s (-want +got):\n%s", tc.query, diff)
		}
		if pg.ProjectID != "p1" || pg.Diagnostics == nil || pg.Limit < 1 {
			t.Errorf("projection/agents?%s page = project %q limit %d diagnostics %v, want the Projection page shape", tc.query, pg.ProjectID, pg.Limit, pg.Diagnostics)
		}
	}
	// Items are full directory entries.
	var pg agentPage
	e.must(a1, "GET", "/v3r1/projects/p1/projection/agents?agent_id=a4", nil, 200).decode(t, &pg)
	if diff := cmp.Diff([]projection.AgentView{e.agentView(a1, "p1", "a4")}, pg.Items); diff != "" {
		t.Errorf("directory entry of a4 vs its snapshot (-snapshot +entry):\n%s", diff)
	}

	for _, q := range []string{"enabled_only=maybe", "accepts_work_only=2", "limit=0", "limit=501", "agent_id=a.b", "state=queued", "role=a&role=b"} {
		wantStatus(t, "projection/agents?"+q, e.do(a1, "GET", "/v3r1/projects/p1/projection/agents?"+q, nil), 422, "ValidationError")
	}
	wantStatus(t, "projection/agents without credentials", e.do(asNobody, "GET", "/v3r1/projects/p1/projection/agents", nil), 401, "UnauthorizedError")
}

func TestProjectionTurnOffersFilters(t *testing.T) {
	e := newEnv(t)
	e.registerSpec("p1", agentSpec{id: "a1", role: "worker", enabled: true, acceptsWork: true, capacity: 2, capabilities: []string{"summarize", "translate"}})
	e.registerSpec("p1", agentSpec{id: "a2", role: "reviewer", enabled: true, acceptsWork: false, capacity: 1, capabilities: []string{"review"}})
	e.registerSpec("p1", agentSpec{id: "a3", role: "worker", enabled: false, acceptsWork: true, capacity: 1, capabilities: []string{"summarize"}})
	e.registerSpec("p1", agentSpec{id: "a4", role: "worker", enabled: true, acceptsWork: true, capacity: 1, capabilities: []string{"translate"}})
	e.registerSpec("p1", agentSpec{id: "req", role: "requester", enabled: true, acceptsWork: false, capacity: 0, grants: []string{"turns:dispatch"}})
	req, _ := e.issueFor("p1", "req")
	a1, _ := e.issueFor("p1", "a1")
	for i, kind := range []string{"summarize", "summarize", "translate"} {
		body := dispatchBody("p1", "req", "a1", fmt.Sprintf("k%d", i), map[string]any{})
		body["turn_kind"] = kind
		e.must(req, "POST", "/v3r1/projects/p1/turns:dispatch", body, 200)
	}
	if c := e.claim(a1); c == nil {
		t.Fatal("claim = null")
	}
	e.must(asAdmin, "POST", "/v3r1/projects/p1/management/agents/a4:drain", admissionBody("p1", "a4", "req"), 200)

	type offer struct {
		Kind, Agent string
		Admitting   bool
		Free        int
		Queued      int
	}
	toOffers := func(items []projection.TurnOffer) []offer {
		out := []offer{}
		for _, it := range items {
			out = append(out, offer{it.TurnKind, it.AgentID, it.Admitting, it.FreeCapacity, it.Queued})
		}
		return out
	}
	var (
		a1sum   = offer{"summarize", "a1", true, 1, 1}
		a1trans = offer{"translate", "a1", true, 1, 1}
		a2rev   = offer{"review", "a2", false, 1, 0}
		a3sum   = offer{"summarize", "a3", false, 1, 0}
		a4trans = offer{"translate", "a4", false, 1, 0}
	)
	for _, tc := range []struct {
		query string
		want  []offer
	}{
		{"", []offer{a2rev, a1sum, a3sum, a1trans, a4trans}},
		{"turn_kind=summarize", []offer{a1sum, a3sum}},
		{"turn_kind=nothing", []offer{}},
		{"agent_id=a1", []offer{a1sum, a1trans}},
		{"agent_id=req", []offer{}},
		{"agent_id=ghost", []offer{}},
		{"enabled_only=true", []offer{a2rev, a1sum, a1trans, a4trans}},
		{"accepts_work_only=true", []offer{a1sum, a3sum, a1trans}},
		{"enabled_only=true&accepts_work_only=true", []offer{a1sum, a1trans}},
		{"turn_kind=translate&accepts_work_only=false", []offer{a1trans, a4trans}},
		{"turn_kind=translate&agent_id=a4", []offer{a4trans}},
		{"limit=2", []offer{a2rev, a1sum}},
		{"limit=1&turn_kind=translate", []offer{a1trans}},
	} {
		var pg struct {
			ProjectID   string                 `json:"project_id"`
			Items       []projection.TurnOffer `json:"items"`
			Limit       int                    `json:"limit"`
			Diagnostics []any                  `json:"diagnostics"`
		}
		e.must(a1, "GET", "/v3r1/projects/p1/projection/turn-offers?"+tc.query, nil, 200).decode(t, &pg)
		if diff := cmp.Diff(tc.want, toOffers(pg.Items)); diff != "" {
			t.Errorf("projection/turn-offers?%s (-want +got):\n%s", tc.query, diff)
		}
		if pg.ProjectID != "p1" || pg.Diagnostics == nil {
			t.Errorf("projection/turn-offers?%s page = project %q diagnostics %v, want the Projection page shape", tc.query, pg.ProjectID, pg.Diagnostics)
		}
	}
	for _, q := range []string{"enabled_only=yes", "accepts_work_only=-1", "limit=0", "limit=x", "agent_id=a/b", "role=worker"} {
		wantStatus(t, "projection/turn-offers?"+q, e.do(a1, "GET", "/v3r1/projects/p1/projection/turn-offers?"+q, nil), 422, "ValidationError")
	}
	wantStatus(t, "projection/turn-offers without credentials", e.do(asNobody, "GET", "/v3r1/projects/p1/projection/turn-offers", nil), 401, "UnauthorizedError")
}

func registerBody(agent string, grants []string) map[string]any {
	return map[string]any{
		"spec": map[string]any{"agent_id": agent, "role": "worker", "description": "", "enabled": true, "accepts_work": true,
			"capacity": 1, "capabilities": []string{"summarize"}, "grants": grants, "public_metadata": map[string]any{}},
		"provenance": map[string]any{"kind": "registry", "external_ref": "ext-1", "payload_hash": "sha256:abc"},
		"meta":       nil, "trace": nil,
	}
}

func TestRegisterAgent(t *testing.T) {
	e := newEnv(t)
	registrar := e.register("p1", "registrar", 1, "agents:register")
	plain := e.register("p1", "plain", 1)

	var v projection.AgentView
	e.must(registrar, "POST", "/v3r1/projects/p1/agents:register", registerBody("new", []string{"turns:dispatch"}), 200).decode(t, &v)
	want := projection.ProvenanceView{Kind: "registry", ExternalRef: "ext-1", PayloadHash: ptrTo("sha256:abc")}
	if v.AgentID != "new" || v.ProjectID != "p1" || !cmp.Equal(v.Grants, []string{"turns:dispatch"}) || !cmp.Equal(v.Provenance, want) {
		t.Fatalf("register = %+v, want agent new with its grant and provenance", v)
	}
	// Registering again replaces the spec and keeps the drain.
	e.must(asAdmin, "POST", "/v3r1/projects/p1/management/agents/new:drain", admissionBody("p1", "new", "registrar"), 200)
	body := registerBody("new", []string{})
	body["spec"].(map[string]any)["role"] = "reviewer"
	e.must(asAdmin, "POST", "/v3r1/projects/p1/agents:register", body, 200).decode(t, &v)
	if v.Role != "reviewer" || len(v.Grants) != 0 || !v.Drained {
		t.Errorf("re-register = role %s grants %v drained %v, want reviewer, none, still drained", v.Role, v.Grants, v.Drained)
	}

	bad := func(change func(spec, body map[string]any)) map[string]any {
		b := registerBody("bad", []string{})
		change(b["spec"].(map[string]any), b)
		return b
	}
	for _, tc := range []struct {
		name   string
		who    as
		body   any
		status int
		err    string
	}{
		{"without the agents:register grant", plain, registerBody("x", []string{}), 403, "ForbiddenError"},
		{"without credentials", asNobody, registerBody("x", []string{}), 401, "UnauthorizedError"},
		{"agent id with a dot", asAdmin, bad(func(s, _ map[string]any) { s["agent_id"] = "a.b" }), 422, "ValidationError"},
		{"unknown grant", asAdmin, bad(func(s, _ map[string]any) { s["grants"] = []string{"root"} }), 422, "ValidationError"},
		{"negative capacity", asAdmin, bad(func(s, _ map[string]any) { s["capacity"] = -1 }), 422, "ValidationError"},
		{"public_metadata an array", asAdmin, bad(func(s, _ map[string]any) { s["public_metadata"] = []any{} }), 422, "ValidationError"},
		{"role with a space", asAdmin, bad(func(s, _ map[string]any) { s["role"] = "a b" }), 422, "ValidationError"},
		{"capability with a space", asAdmin, bad(func(s, _ map[string]any) { s["capabilities"] = []string{"a b"} }), 422, "ValidationError"},
		{"provenance kind missing", asAdmin, bad(func(_, b map[string]any) { b["provenance"] = map[string]any{"external_ref": ""} }), 422, "ValidationError"},
		{"unknown spec field", asAdmin, bad(func(s, _ map[string]any) { s["owner"] = "me" }), 422, "ValidationError"},
		{"enabled not a boolean", asAdmin, bad(func(s, _ map[string]any) { s["enabled"] = "yes" }), 422, "ValidationError"},
	} {
		wantStatus(t, "register "+tc.name, e.do(tc.who, "POST", "/v3r1/projects/p1/agents:register", tc.body), tc.status, tc.err)
	}
	var pg agentPage
	e.must(asAdmin, "GET", "/v3r1/projects/p1/projection/agents", nil, 200).decode(t, &pg)
	if diff := cmp.Diff([]string{"new", "plain", "registrar"}, ids(pg.Items, func(v projection.AgentView) string { return v.AgentID })); diff != "" {
		t.Errorf("agents after refused registrations (-want +got):\n%s", diff)
	}
}

func ptrTo[T any](v T) *T { return &v }

type credentialList struct {
	ProjectID string              `json:"project_id"`
	AgentID   string              `json:"agent_id"`
	Items     []credentialSummary `json:"items"`
}

func (e *env) credentials(who as, agent string) credentialList {
	e.t.Helper()
	var l credentialList
	r := e.must(who, "GET", "/v3r1/projects/p1/agents/"+agent+"/credentials", nil, 200)
	if strings.Contains(string(r.body), "token") {
		e.t.Errorf("credential list of %s mentions a token: %s", agent, r.body)
	}
	r.decode(e.t, &l)
	return l
}

func statuses(l credentialList) map[string]string {
	m := map[string]string{}
	for _, c := range l.Items {
		m[c.CredentialID] = c.Status
	}
	return m
}

func TestCredentials(t *testing.T) {
	e := newEnv(t)
	issuer := e.register("p1", "issuer", 1, "credentials:issue")
	credAdmin := e.register("p1", "cadmin", 1, "credentials:admin")
	other := e.register("p1", "other", 1)
	e.registerSpec("p1", agentSpec{id: "w", enabled: true, acceptsWork: true, capacity: 1})

	// Issue needs credentials:issue; the token is returned this once.
	var got struct {
		Credential credentialSummary `json:"credential"`
		Token      string            `json:"token"`
	}
	issueW := "/v3r1/projects/p1/agents/w/credentials:issue"
	e.must(issuer, "POST", issueW, map[string]any{"meta": map[string]any{"note": "first"}, "trace": nil}, 200).decode(t, &got)
	now := e.clock.Now()
	wantCred := credentialSummary{CredentialID: got.Credential.CredentialID, ProjectID: "p1", AgentID: "w", Status: "active",
		IssuedAt: now, ExpiresAt: now.Add(30 * 24 * time.Hour)}
	if diff := cmp.Diff(wantCred, got.Credential); diff != "" || got.Token == "" || got.Credential.CredentialID == "" {
		t.Fatalf("issue = token %q, credential (-want +got):\n%s", got.Token, diff)
	}
	w := as{project: "p1", agent: "w", token: got.Token}
	e.must(w, "GET", "/v3r1/projects/p1/agents/w", nil, 200)

	wantStatus(t, "issue for itself without the grant", e.do(w, "POST", issueW, nil), 403, "ForbiddenError")
	wantStatus(t, "issue by credentials:admin without credentials:issue", e.do(credAdmin, "POST", issueW, nil), 403, "ForbiddenError")
	wantStatus(t, "issue by another agent without the grant", e.do(other, "POST", issueW, nil), 403, "ForbiddenError")
	wantStatus(t, "issue without credentials", e.do(asNobody, "POST", issueW, nil), 401, "UnauthorizedError")
	wantStatus(t, "issue for an unknown agent", e.do(issuer, "POST", "/v3r1/projects/p1/agents/ghost/credentials:issue", nil), 404, "NotFoundError")
	wantStatus(t, "issue with an unknown body field", e.do(issuer, "POST", issueW, map[string]any{"ttl": 5}), 422, "ValidationError")

	_, second := e.issueFor("p1", "w")
	// List: the agent itself, credentials:admin, the admin. Never a token.
	for _, who := range []as{w, credAdmin, asAdmin} {
		l := e.credentials(who, "w")
		if diff := cmp.Diff(map[string]string{got.Credential.CredentialID: "active", second.CredentialID: "active"}, statuses(l)); diff != "" || l.ProjectID != "p1" || l.AgentID != "w" {
			t.Errorf("credentials of w as %q (-want +got):\n%s", who.agent, diff)
		}
	}
	wantStatus(t, "list another agent's credentials", e.do(other, "GET", "/v3r1/projects/p1/agents/w/credentials", nil), 403, "ForbiddenError")
	wantStatus(t, "list with credentials:issue only", e.do(issuer, "GET", "/v3r1/projects/p1/agents/w/credentials", nil), 403, "ForbiddenError")
	wantStatus(t, "list without credentials", e.do(asNobody, "GET", "/v3r1/projects/p1/agents/w/credentials", nil), 401, "UnauthorizedError")
	wantStatus(t, "list of an unknown agent", e.do(asAdmin, "GET", "/v3r1/projects/p1/agents/ghost/credentials", nil), 404, "NotFoundError")

	// Revoke: the agent itself or credentials:admin.
	revoke := func(agent, cred string) string {
		return "/v3r1/projects/p1/agents/" + agent + "/credentials/" + cred + ":revoke"
	}
	wantStatus(t, "revoke by another agent", e.do(other, "POST", revoke("w", second.CredentialID), nil), 403, "ForbiddenError")
	wantStatus(t, "revoke of an unknown credential", e.do(asAdmin, "POST", revoke("w", "cred_ghost"), nil), 404, "NotFoundError")
	wantStatus(t, "revoke of w's credential under another agent", e.do(asAdmin, "POST", revoke("other", second.CredentialID), nil), 404, "NotFoundError")
	wantStatus(t, "revoke without credentials", e.do(asNobody, "POST", revoke("w", second.CredentialID), nil), 401, "UnauthorizedError")
	if diff := cmp.Diff(map[string]string{got.Credential.CredentialID: "active", second.CredentialID: "active"}, statuses(e.credentials(asAdmin, "w"))); diff != "" {
		t.Errorf("credentials after refused revokes (-want +got):\n%s", diff)
	}
	r := e.must(credAdmin, "POST", revoke("w", second.CredentialID), map[string]any{"meta": map[string]any{"reason": "rotated"}}, 200)
	if compactJSON(t, r.body) != `{"ok":true}` {
		t.Errorf("revoke = %s, want {\"ok\":true}", r.body)
	}
	e.must(credAdmin, "POST", revoke("w", second.CredentialID), nil, 200) // again: nothing changes
	e.must(w, "POST", revoke("w", got.Credential.CredentialID), nil, 200)
	// The revoked credential stops working on the very next request.
	wantStatus(t, "request with a revoked credential", e.do(w, "GET", "/v3r1/projects/p1/agents/w", nil), 401, "UnauthorizedError")
	if diff := cmp.Diff(map[string]string{got.Credential.CredentialID: "revoked", second.CredentialID: "revoked"}, statuses(e.credentials(credAdmin, "w"))); diff != "" {
		t.Errorf("statuses after revokes (-want +got):\n%s", diff)
	}

	// Expiry: a credential lives 30 days.
	fresh, third := e.issueFor("p1", "w")
	e.clock.Advance(30*24*time.Hour - time.Second)
	e.must(fresh, "GET", "/v3r1/projects/p1/agents/w", nil, 200)
	if s := statuses(e.credentials(fresh, "w"))[third.CredentialID]; s != "active" {
		t.Errorf("status 1s before expiry = %s, want active", s)
	}
	e.clock.Advance(time.Second)
	wantStatus(t, "request with an expired credential", e.do(fresh, "GET", "/v3r1/projects/p1/agents/w", nil), 401, "UnauthorizedError")
	if diff := cmp.Diff(map[string]string{got.Credential.CredentialID: "revoked", second.CredentialID: "revoked", third.CredentialID: "expired"},
		statuses(e.credentials(asAdmin, "w"))); diff != "" {
		t.Errorf("statuses after expiry (-want +got):\n%s", diff)
	}
}

func TestThreeHeaderAuthentication(t *testing.T) {
	e := newEnv(t)
	w := e.register("p1", "w", 1)
	other := e.register("p1", "other", 1)
	e.register("p2", "w", 1)
	revoked, revokedCred := e.issueFor("p1", "w")
	e.must(asAdmin, "POST", "/v3r1/projects/p1/agents/w/credentials/"+revokedCred.CredentialID+":revoke", nil, 200)
	expiring, _ := e.issueFor("p1", "other")

	const path = "/v3r1/projects/p1/agents/w"
	send := func(headers map[string]string) response {
		t.Helper()
		req, err := http.NewRequest("GET", e.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return response{status: resp.StatusCode, body: body}
	}
	hdr := func(project, agent, auth string) map[string]string {
		h := map[string]string{}
		if project != "" {
			h[httpapi.HeaderProject] = project
		}
		if agent != "" {
			h[httpapi.HeaderAgent] = agent
		}
		if auth != "" {
			h["Authorization"] = auth
		}
		return h
	}
	if r := send(hdr("p1", "w", "Bearer "+w.token)); r.status != 200 {
		t.Fatalf("valid three headers = %d %s, want 200", r.status, r.body)
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
		err     string
	}{
		{"no headers", hdr("", "", ""), 401, "UnauthorizedError"},
		{"bearer only", hdr("", "", "Bearer "+w.token), 401, "UnauthorizedError"},
		{"no bearer", hdr("p1", "w", ""), 401, "UnauthorizedError"},
		{"not a bearer", hdr("p1", "w", "Basic "+w.token), 401, "UnauthorizedError"},
		{"empty bearer", hdr("p1", "w", "Bearer "), 401, "UnauthorizedError"},
		{"no project header", hdr("", "w", "Bearer "+w.token), 401, "UnauthorizedError"},
		{"no agent header", hdr("p1", "", "Bearer "+w.token), 401, "UnauthorizedError"},
		{"project header of another project", hdr("p2", "w", "Bearer "+w.token), 403, "ForbiddenError"},
		{"agent header of another agent", hdr("p1", "other", "Bearer "+w.token), 401, "UnauthorizedError"},
		{"agent header not an id", hdr("p1", "w.x", "Bearer "+w.token), 401, "UnauthorizedError"},
		{"unknown agent", hdr("p1", "ghost", "Bearer "+w.token), 401, "UnauthorizedError"},
		{"invalid token", hdr("p1", "w", "Bearer tla_not-a-token"), 401, "UnauthorizedError"},
		{"token of another agent", hdr("p1", "w", "Bearer "+other.token), 401, "UnauthorizedError"},
		{"revoked token", hdr("p1", "w", "Bearer "+revoked.token), 401, "UnauthorizedError"},
		{"the admin token with agent headers", hdr("p1", "w", "Bearer "+adminToken), 401, "UnauthorizedError"},
	} {
		wantStatus(t, tc.name, send(tc.headers), tc.status, tc.err)
	}
	// A token of p1's agent w says nothing in p2, whose w is another agent.
	wantStatus(t, "p1's token in p2", e.do(as{project: "p2", agent: "w", token: w.token}, "GET", "/v3r1/projects/p2/agents/w", nil), 401, "UnauthorizedError")

	// A valid credential without the grant a route needs is 403.
	wantStatus(t, "project feed without projections:read", e.do(w, "GET", "/v3r1/projects/p1/projection/feed", nil), 403, "ForbiddenError")
	wantStatus(t, "dispatch without turns:dispatch", e.do(w, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchBody("p1", "w", "other", "k", map[string]any{})), 403, "ForbiddenError")
	wantStatus(t, "drain without management", e.do(w, "POST", "/v3r1/projects/p1/management/agents/other:drain", admissionBody("p1", "other", "w")), 403, "ForbiddenError")

	e.clock.Advance(30 * 24 * time.Hour)
	wantStatus(t, "expired token", e.do(expiring, "GET", path, nil), 401, "UnauthorizedError")
}

func TestRevokedCredentialRefusedOnAnotherInstance(t *testing.T) {
	srv := natstest.Start(t)
	clk := &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	a := newEnvOn(t, srv.ClientURL(), clk)
	b := newEnvOn(t, srv.ClientURL(), clk)

	w := a.register("p1", "w", 1)
	cred := credentialID(t, func() []projection.FeedItem {
		items, _ := a.readFeed(asAdmin, "/v3r1/projects/p1/agents/w/feed", 50)
		return items
	}(), 0)
	// Instance b catches up, then serves w: a read and a write.
	head, err := a.ledger.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.store.WaitFor(ctx, head); err != nil {
		t.Fatalf("instance b's projections did not reach ledger_seq %d: %v", head, err)
	}
	b.must(w, "GET", "/v3r1/projects/p1/agents/w", nil, 200)
	b.must(w, "POST", "/v3r1/projects/p1/management/agents/w:heartbeat-presence", nil, 200)

	a.must(asAdmin, "POST", "/v3r1/projects/p1/agents/w/credentials/"+cred+":revoke", nil, 200)
	wantStatus(t, "read through instance b right after a revoke through a", b.do(w, "GET", "/v3r1/projects/p1/agents/w", nil), 401, "UnauthorizedError")
	wantStatus(t, "write through instance b right after a revoke through a", b.do(w, "POST", "/v3r1/projects/p1/management/agents/w:heartbeat-presence", nil), 401, "UnauthorizedError")
	wantStatus(t, "read through instance a", a.do(w, "GET", "/v3r1/projects/p1/agents/w", nil), 401, "UnauthorizedError")
}

// TestFeedBodyIsThePageOfTheDecodedItems: a feed page's body is, byte for
// byte, the page encoded from the items as the projections decode them
// (the server sends the stored items as they are), for the project, Turn
// and agent feeds, whole and in pages, with payloads that need escaping.
func TestFeedBodyIsThePageOfTheDecodedItems(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "w", 2)
	tr := e.dispatch(req, "w", "k-1")
	c := e.claim(w)
	e.must(w, "POST", "/v3r1/projects/p1/turns/"+tr.TurnID+"/semantic-records", map[string]any{
		"claim": c.Claim, "role": "note", "payload": map[string]any{"html": "<b>&</b>", "sep": "\u2028", "q": `"}`}}, 200)
	e.must(w, "POST", "/v3r1/projects/p1/turns/"+tr.TurnID+":finish", map[string]any{
		"claim": c.Claim, "outcome": "succeeded", "final_payload": map[string]any{"list": []any{1, "<two>"}}, "final_record_role": "result", "meta": nil, "trace": nil}, 200)

	for _, f := range []struct {
		who     as
		path    string
		decoded func(after uint64, limit int) (projection.FeedPage, error)
	}{
		{asAdmin, "/v3r1/projects/p1/projection/feed", func(a uint64, n int) (projection.FeedPage, error) { return e.store.ProjectFeed("p1", a, n) }},
		{w, "/v3r1/projects/p1/turns/" + tr.TurnID + "/feed", func(a uint64, n int) (projection.FeedPage, error) { return e.store.TurnFeed("p1", tr.TurnID, a, n) }},
		{w, "/v3r1/projects/p1/agents/w/feed", func(a uint64, n int) (projection.FeedPage, error) { return e.store.AgentFeed("p1", "w", a, n) }},
	} {
		for _, q := range []struct {
			after uint64
			limit int
		}{{0, 500}, {0, 2}, {3, 2}, {1 << 40, 10}} {
			got := e.must(f.who, "GET", fmt.Sprintf("%s?after_ledger_seq=%d&limit=%d", f.path, q.after, q.limit), nil, 200).body
			dp, err := f.decoded(q.after, q.limit)
			if err != nil {
				t.Fatalf("%s after %d limit %d: decoded = %v", f.path, q.after, q.limit, err)
			}
			want, err := json.Marshal(feedPage{ProjectID: "p1", Items: dp.Items, Limit: q.limit, Diagnostics: []any{}, NextAfterLedgerSeq: dp.NextAfterLedgerSeq, HasMore: dp.HasMore})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want)+"\n", string(got)); diff != "" {
				t.Errorf("GET %s after %d limit %d: body differs from the page of the decoded items (-want +got):\n%s", f.path, q.after, q.limit, diff)
			}
		}
	}
}
