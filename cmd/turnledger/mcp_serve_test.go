package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearerTransport adds an agent's bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient connects the Go SDK's client to an agent's MCP endpoint of
// serve, speaking the protocol version given.
func mcpClient(t *testing.T, base, project, agent string, c client, version string) *mcp.ClientSession {
	t.Helper()
	token := strings.TrimPrefix(c.headers["Authorization"], "Bearer ")
	tr := &mcp.StreamableClientTransport{Endpoint: base + "/mcp/projects/" + project + "/agents/" + agent,
		HTTPClient: &http.Client{Transport: bearerTransport{token}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: agent, Version: "1"}, nil).Connect(context.Background(), tr,
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s (%s): %v", agent, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpTool calls a tool, fails on a refusal, and decodes its structured
// content into out.
func mcpTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	data, _ := json.Marshal(res.StructuredContent)
	if res.IsError {
		t.Fatalf("tools/call %s refused: %s", name, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("tools/call %s: decode %s: %v", name, data, err)
	}
}

// mcpTask sends one 2026-07-28 request that declares the tasks extension
// and decodes its result.
func mcpTask(t *testing.T, base, project, agent string, c client, method string, params map[string]any) (task struct {
	ResultType string `json:"resultType"`
	TaskID     string `json:"taskId"`
	Status     string `json:"status"`
	Result     *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}) {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest("POST", base+"/mcp/projects/"+project+"/agents/"+agent, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	} else if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	}
	req.Header.Set("Authorization", c.headers["Authorization"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	// The answer is JSON, or one SSE event carrying it.
	if i := bytes.Index(raw, []byte("data: ")); i >= 0 && !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		raw, _, _ = bytes.Cut(raw[i+len("data: "):], []byte("\n"))
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Error != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, raw)
	}
	json.Unmarshal(msg.Result, &task)
	return task
}

// TestServeMCPRequesterWorkerAndTaskAcrossRestart drives the MCP endpoint of
// the whole binary's serve with the Go SDK's client: a requester (2026-07-28)
// dispatches a Turn as a task and another as a plain tool call; a worker
// (2025-11-25) claims the first, records, and finishes it; serve stops and
// starts again on the same data directory, and tasks/get reads the finished
// task completed and the other still working.
func TestServeMCPRequesterWorkerAndTaskAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir)
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch")
	w := agentClient(t, admin, "p1", "w", 1)

	done := mcpTask(t, base, "p1", "req", req, "tools/call", map[string]any{"name": "dispatch_turn",
		"arguments": map[string]any{"target_agent_id": "w", "turn_kind": "summarize", "input": map[string]any{"text": "hello"}}})
	if done.ResultType != "task" || done.Status != "working" || done.TaskID == "" {
		t.Fatalf("dispatch_turn as a task = %+v", done)
	}
	requester := mcpClient(t, base, "p1", "req", req, "2026-07-28")
	var pending struct {
		TurnID string `json:"turn_id"`
	}
	mcpTool(t, requester, "dispatch_turn", map[string]any{"target_agent_id": "w", "turn_kind": "summarize", "input": map[string]any{}}, &pending)

	worker := mcpClient(t, base, "p1", "w", w, "2025-11-25")
	var c struct {
		Claim map[string]any `json:"claim"`
		Turn  struct {
			TurnID string `json:"turn_id"`
		} `json:"turn"`
	}
	mcpTool(t, worker, "claim_turn", map[string]any{"wait_s": 5}, &c)
	if c.Turn.TurnID != done.TaskID {
		t.Fatalf("claim_turn = %+v, want the task's Turn %s", c, done.TaskID)
	}
	var rec map[string]any
	mcpTool(t, worker, "append_record", map[string]any{"claim": c.Claim, "payload": map[string]any{"step": "read"}}, &rec)
	mcpTool(t, worker, "finish_turn", map[string]any{"claim": c.Claim, "outcome": "succeeded", "final_payload": map[string]any{"summary": "hi"}}, &rec)
	worker.Close()
	requester.Close()

	if code := stop(); code != 0 {
		t.Fatalf("serve exited with %d", code)
	}
	base, stop = startServe(t, dir)
	defer stop()
	if got := mcpTask(t, base, "p1", "req", req, "tasks/get", map[string]any{"taskId": done.TaskID}); got.Status != "completed" || got.Result == nil || got.Result.Content[0].Text != `{"summary":"hi"}` {
		t.Errorf("after the restart, tasks/get of the finished task = %+v, want completed with the final payload", got)
	}
	if got := mcpTask(t, base, "p1", "req", req, "tasks/get", map[string]any{"taskId": pending.TurnID}); got.Status != "working" {
		t.Errorf("after the restart, tasks/get of the queued Turn = %+v, want working", got)
	}
}
