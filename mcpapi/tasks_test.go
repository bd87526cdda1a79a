package mcpapi_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/mcpapi"
)

type taskView struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	TTLMs          *int64                     `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
	Result         *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
}

func (e *env) task(project, agent, token, method string, params map[string]any) taskView {
	e.t.Helper()
	res, rerr := e.rpc(project, agent, token, method, params)
	if rerr != nil {
		e.t.Fatalf("%s: %s", method, rerr)
	}
	var v taskView
	if err := json.Unmarshal(res, &v); err != nil {
		e.t.Fatalf("%s: decode %s: %v", method, res, err)
	}
	return v
}

// A dispatch_turn called as a task: input_required → tasks/update →
// completed; another is cancelled by tasks/cancel; a task created before a
// restart of the instance is read after it.
func TestTaskLifecycle(t *testing.T) {
	e := newEnv(t)
	reqTok := e.agent("p1", "req", false, "turns:dispatch")
	wrkTok := e.agent("p1", "wrk", true)
	worker := e.client("p1", "wrk", wrkTok, "2025-11-25", nil)

	created := e.task("p1", "req", reqTok, "tools/call", map[string]any{"name": "dispatch_turn",
		"arguments": map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{"text": "hi"}}})
	if created.ResultType != "task" || created.Status != "working" || created.TaskID == "" || created.TTLMs != nil || created.PollIntervalMs <= 0 {
		t.Fatalf("dispatch_turn as a task = %+v", created)
	}
	id := created.TaskID
	get := func() taskView { return e.task("p1", "req", reqTok, "tasks/get", map[string]any{"taskId": id}) }
	if got := get(); got.Status != "working" || got.ResultType != "complete" {
		t.Fatalf("tasks/get after dispatch = %+v", got)
	}

	var c claimed
	mustCall(t, worker, "claim_turn", map[string]any{}, &c)
	mustCall(t, worker, "suspend_turn", map[string]any{"claim": c.Claim, "awaiting_input": map[string]any{
		"prompt": "Which language?", "schema": map[string]any{"type": "object", "properties": map[string]any{"lang": map[string]any{"type": "string"}}}}}, nil)
	waiting := get()
	if waiting.Status != "input_required" || len(waiting.InputRequests) != 1 {
		t.Fatalf("tasks/get while suspended for input = %+v", waiting)
	}
	var key string
	for k, raw := range waiting.InputRequests {
		key = k
		var r struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		}
		json.Unmarshal(raw, &r)
		if r.Method != "elicitation/create" || r.Params.Message != "Which language?" {
			t.Errorf("input request = %s", raw)
		}
	}
	if res, rerr := e.rpc("p1", "req", reqTok, "tasks/update", map[string]any{"taskId": id,
		"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"lang": "fr"}}}}); rerr != nil {
		t.Fatalf("tasks/update: %s", rerr)
	} else if string(res) == "" {
		t.Fatal("tasks/update: no result")
	}
	if got := get(); got.Status != "working" {
		t.Fatalf("tasks/get after tasks/update = %+v, want working", got)
	}
	mustCall(t, worker, "claim_turn", map[string]any{}, &c)
	mustCall(t, worker, "finish_turn", map[string]any{"claim": c.Claim, "outcome": "succeeded", "final_payload": map[string]any{"done": true}}, nil)
	done := get()
	if done.Status != "completed" || done.Result == nil || done.Result.Content[0].Text != `{"done":true}` {
		t.Fatalf("tasks/get after finish = %+v", done)
	}

	// tasks/cancel stops the Turn.
	other := e.task("p1", "req", reqTok, "tools/call", map[string]any{"name": "dispatch_turn",
		"arguments": map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{}}})
	if _, rerr := e.rpc("p1", "req", reqTok, "tasks/cancel", map[string]any{"taskId": other.TaskID}); rerr != nil {
		t.Fatalf("tasks/cancel: %s", rerr)
	}
	if got := e.task("p1", "req", reqTok, "tasks/get", map[string]any{"taskId": other.TaskID}); got.Status != "cancelled" {
		t.Fatalf("tasks/get after tasks/cancel = %+v, want cancelled", got)
	}

	// A client that does not declare the extension gets no task, and the
	// tasks/ methods answer it the missing-capability error.
	res, rerr := e.rpcWith(map[string]any{}, "p1", "req", reqTok, "tools/call", map[string]any{"name": "dispatch_turn",
		"arguments": map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{}}})
	var plain struct {
		ResultType        string   `json:"resultType"`
		StructuredContent turnView `json:"structuredContent"`
	}
	json.Unmarshal(res, &plain)
	if rerr != nil || plain.ResultType == "task" || plain.StructuredContent.State != "queued" {
		t.Errorf("dispatch_turn without the extension = %s %s, want the queued Turn as a tool result", res, rerr)
	}
	for _, m := range []struct {
		method string
		params map[string]any
	}{
		{"tasks/get", map[string]any{"taskId": id}},
		{"tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{}}},
		{"tasks/cancel", map[string]any{"taskId": other.TaskID}},
	} {
		_, rerr := e.rpcWith(map[string]any{}, "p1", "req", reqTok, m.method, m.params)
		var re struct {
			Code int64 `json:"code"`
			Data struct {
				Required struct {
					Extensions map[string]any `json:"extensions"`
				} `json:"requiredCapabilities"`
			} `json:"data"`
		}
		json.Unmarshal(rerr, &re)
		if _, named := re.Data.Required.Extensions[mcpapi.TasksExtension]; re.Code != mcp.CodeMissingRequiredClientCapabilities || !named {
			t.Errorf("%s without the extension: error %s, want code %d", m.method, rerr, mcp.CodeMissingRequiredClientCapabilities)
		}
	}

	// A task of another agent's Turn it may not read is refused.
	strangerTok := e.agent("p1", "stranger", true)
	if _, rerr := e.rpc("p1", "stranger", strangerTok, "tasks/get", map[string]any{"taskId": id}); rerr == nil {
		t.Errorf("tasks/get of a Turn the caller may not read answered")
	}

	// A task outlives the instance.
	pending := e.task("p1", "req", reqTok, "tools/call", map[string]any{"name": "dispatch_turn",
		"arguments": map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{}}})
	e.restart()
	for _, tc := range []struct{ id, want string }{{id, "completed"}, {pending.TaskID, "working"}} {
		if got := e.task("p1", "req", reqTok, "tasks/get", map[string]any{"taskId": tc.id}); got.Status != tc.want {
			t.Errorf("after restart, tasks/get %s = %+v, want %s", tc.id, got, tc.want)
		}
	}
}

// A claimed Turn's task is working and a failed one's is failed with the
// outcome as its error; a second instance over the same NATS (its own
// projections) reads the task as the first does.
func TestTaskFailedAndSeenFromAnotherInstance(t *testing.T) {
	e := newEnv(t)
	reqTok := e.agent("p1", "req", false, "turns:dispatch")
	wrkTok := e.agent("p1", "wrk", true)
	worker := e.client("p1", "wrk", wrkTok, "2025-11-25", nil)
	other := &env{t: t, natsURL: e.natsURL, dbPath: filepath.Join(t.TempDir(), "other.db"), clock: e.clock}
	other.start()

	created := e.task("p1", "req", reqTok, "tools/call", map[string]any{"name": "dispatch_turn",
		"arguments": map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{}}})
	var c claimed
	mustCall(t, worker, "claim_turn", map[string]any{}, &c)
	for _, in := range []*env{e, other} {
		checkfor.Until(t, 10*time.Second, "the claimed task to be working", func() bool {
			return in.task("p1", "req", reqTok, "tasks/get", map[string]any{"taskId": created.TaskID}).Status == "working"
		})
	}
	mustCall(t, worker, "finish_turn", map[string]any{"claim": c.Claim, "outcome": "failed", "final_payload": map[string]any{"why": "no"}}, nil)
	for _, in := range []*env{e, other} {
		var got taskView
		checkfor.Until(t, 10*time.Second, "the task to fail", func() bool {
			got = in.task("p1", "req", reqTok, "tasks/get", map[string]any{"taskId": created.TaskID})
			return got.Status != "working"
		})
		var failure struct {
			Message string `json:"message"`
			Data    struct {
				Outcome string `json:"outcome"`
			} `json:"data"`
		}
		json.Unmarshal(got.Error, &failure)
		if got.Status != "failed" || failure.Data.Outcome != "failed" || !strings.Contains(failure.Message, "failed") {
			t.Errorf("tasks/get of a failed Turn = %+v (error %s), want failed with the outcome", got, got.Error)
		}
	}
}
