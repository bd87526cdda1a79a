package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnledger/turnledger/internal/checkfor"
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

// mcpPost sends one raw 2026-07-28 request to an agent's MCP endpoint with
// the given bearer and answers the response, body read.
func mcpPost(t *testing.T, base, project, agent, token, method string) (*http.Response, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest("POST", base+"/mcp/projects/"+project+"/agents/"+agent, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

// holdMCP sends the headers and half the body of an MCP request over a raw
// connection and holds it there: serve has admitted it (it counts against
// the bounds) and waits for the rest of the body. Closing the connection
// ends it.
func holdMCP(t *testing.T, base, project, agent, token string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	fmt.Fprintf(conn, "POST /mcp/projects/%s/agents/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
		project, agent, token, len(body), body[:len(body)/2])
	return conn
}

// TestServeMCPProtections: the HTTP API's protections apply to the MCP
// endpoint of serve. Its requests are in the request log, under the
// endpoint's route pattern and project, without their tokens; beyond the
// project's in-flight bound an MCP request is answered 503 with Retry-After;
// a body over the limit is 413; failed authentications past the burst are
// 429 with Retry-After, while the agent's own token is still served.
func TestServeMCPProtections(t *testing.T) {
	dir := t.TempDir()
	base, out := startServeLogged(t, dir, "--log-format", "json", "--max-project-in-flight", "2", "--auth-failure-burst", "3", "--auth-failure-every", "1h")
	admin := adminClient(t, base, dir)
	a := agentClient(t, admin, "p1", "a", 1)
	token := strings.TrimPrefix(a.headers["Authorization"], "Bearer ")

	if resp, body := mcpPost(t, base, "p1", "a", token, "tools/list"); resp.StatusCode != 200 || !strings.Contains(body, "dispatch_turn") {
		t.Fatalf("tools/list = %d %s", resp.StatusCode, body)
	}
	lines := requestLines(t, out, 3)
	if got, want := lines[2], (requestLine{"INFO", "request", "POST", "/mcp/projects/{project_id}/agents/{agent_id}", 200, 0, "p1"}); got != want {
		t.Errorf("the MCP request's log line = %+v, want %+v", got, want)
	}
	if strings.Contains(out.String(), token) {
		t.Errorf("serve's output holds the agent's token")
	}

	// Requests held in flight fill p1's bound of two. A request held while
	// a probe is in flight may itself be refused, so another is held after
	// each probe that got in, until a probe is refused.
	checkfor.Until(t, 10*time.Second, "the bound to fill", func() bool {
		resp, body := mcpPost(t, base, "p1", "a", token, "tools/list")
		if resp.StatusCode == 200 {
			holdMCP(t, base, "p1", "a", token)
			return false
		}
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "ServiceUnavailableError") {
			t.Fatalf("beyond the bound: %d Retry-After %q %s, want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		return true
	})

	// Another project is not held up; its body limit is 1 MiB.
	b := agentClient(t, admin, "p2", "b", 1)
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}`
	req, _ := http.NewRequest("POST", base+"/mcp/projects/p2/agents/b", strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", b.headers["Authorization"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB body = %d, want 413", resp.StatusCode)
	}

	// Failed authentications: three are 401, then 429 with Retry-After.
	var statuses []int
	for range 4 {
		resp, _ := mcpPost(t, base, "p2", "b", "tla_wrong", "tools/list")
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	if want := []int{401, 401, 401, 429}; !slices.Equal(statuses, want) {
		t.Errorf("wrong tokens from one address = %v, want %v", statuses, want)
	}
	if resp, body := mcpPost(t, base, "p2", "b", strings.TrimPrefix(b.headers["Authorization"], "Bearer "), "tools/list"); resp.StatusCode != 200 {
		t.Errorf("the agent's own token after the flood = %d %s, want 200", resp.StatusCode, body)
	}
}
