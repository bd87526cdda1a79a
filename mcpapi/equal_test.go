package mcpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// get sends a GET of the HTTP API as an agent and answers the decoded body.
func (e *env) get(project, agent, token, path string) any {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.url+path, nil)
	req.Header.Set("X-Svc-Project-Id", project)
	req.Header.Set("X-Svc-Agent-Id", agent)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("GET %s = %d %s", path, resp.StatusCode, raw)
	}
	var v any
	json.Unmarshal(raw, &v)
	return v
}

// A read tool's structuredContent is the JSON answer of its HTTP route, for
// the same caller and the same arguments.
func TestReadToolsAnswerAsTheHTTPRoutes(t *testing.T) {
	e := newEnv(t)
	reqTok := e.agent("p1", "req", false, "turns:dispatch", "projections:read")
	wrkTok := e.agent("p1", "wrk", true)
	requester := e.client("p1", "req", reqTok, "2026-07-28", nil)
	worker := e.client("p1", "wrk", wrkTok, "2025-11-25", nil)

	var d turnView
	mustCall(t, requester, "dispatch_turn", map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{"x": 1}, "tags": []string{"blue"}}, &d)
	var c claimed
	mustCall(t, worker, "claim_turn", map[string]any{}, &c)
	mustCall(t, worker, "append_record", map[string]any{"claim": c.Claim, "payload": map[string]any{"step": 1}}, nil)
	mustCall(t, worker, "finish_turn", map[string]any{"claim": c.Claim, "outcome": "succeeded", "final_payload": map[string]any{"ok": true}}, nil)

	p := "/v3r1/projects/p1"
	for _, tc := range []struct {
		tool        string
		args        map[string]any
		path        string
		agent, tok  string
		description string
	}{
		{"get_turn", map[string]any{"turn_id": d.TurnID}, p + "/turns/" + d.TurnID, "wrk", wrkTok, "a Turn"},
		{"get_turn_context", map[string]any{"turn_id": d.TurnID, "limit": 1}, p + "/turns/" + d.TurnID + "/context?limit=1", "wrk", wrkTok, "a page of context"},
		{"list_turns", map[string]any{"state": "finished", "tags": []string{"blue"}}, p + "/projection/turns?state=finished&tag=blue", "wrk", wrkTok, "Turns the worker may read"},
		{"read_feed", map[string]any{"feed": "turn", "turn_id": d.TurnID}, p + "/turns/" + d.TurnID + "/feed", "req", reqTok, "a Turn's feed"},
		{"read_feed", map[string]any{"feed": "agent"}, p + "/agents/wrk/feed", "wrk", wrkTok, "the caller's agent feed"},
		{"read_feed", map[string]any{"feed": "project", "limit": 3}, p + "/projection/feed?limit=3", "req", reqTok, "the project feed"},
		{"list_agents", map[string]any{"accepts_work_only": true}, p + "/projection/agents?accepts_work_only=true", "req", reqTok, "the agent directory"},
	} {
		cs := requester
		if tc.agent == "wrk" {
			cs = worker
		}
		var viaMCP any
		mustCall(t, cs, tc.tool, tc.args, &viaMCP)
		if diff := cmp.Diff(e.get("p1", tc.agent, tc.tok, tc.path), viaMCP); diff != "" {
			t.Errorf("%s (%s): structuredContent differs from GET %s (-HTTP +MCP):\n%s", tc.tool, tc.description, tc.path, diff)
		}
	}
}
