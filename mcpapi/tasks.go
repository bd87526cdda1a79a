package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// TasksExtension is the identifier of the tasks extension.
const TasksExtension = "io.modelcontextprotocol/tasks"

// metaClientCapabilities is the _meta key of a request's client
// capabilities (2026-07-28).
const metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

// Task statuses.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// task is a Task of the extension, as tasks/get answers it (DetailedTask)
// and as a tools/call answers it (CreateTaskResult, resultType "task").
type task struct {
	mcp.ResultBase
	ResultType     string                  `json:"resultType"`
	TaskID         string                  `json:"taskId"`
	Status         string                  `json:"status"`
	StatusMessage  string                  `json:"statusMessage,omitempty"`
	CreatedAt      string                  `json:"createdAt"`
	LastUpdatedAt  string                  `json:"lastUpdatedAt"`
	TTLMs          *int64                  `json:"ttlMs"` // null: a Turn is never discarded
	PollIntervalMs int64                   `json:"pollIntervalMs"`
	InputRequests  map[string]inputRequest `json:"inputRequests,omitempty"`
	Result         *mcp.CallToolResult     `json:"result,omitempty"`
	Error          *jsonrpc.Error          `json:"error,omitempty"`
}

// inputRequest is an elicitation the task waits for (MRTR's shape).
type inputRequest struct {
	Method string            `json:"method"`
	Params *mcp.ElicitParams `json:"params"`
}

// taskOf is the Task of a Turn:
//
//	Turn                                   task
//	queued, claimed                        working
//	suspended awaiting input               input_required, the prompt and schema as an elicitation
//	suspended (to be resumed)              working
//	finished succeeded                     completed, result: the Turn as structured content, final_payload as text
//	finished stopped                       cancelled
//	finished failed, dead, timed_out,      failed, error: the outcome, the Turn as data
//	expired
func (h *Handler) taskOf(v projection.TurnView, resultType string) *task {
	t := &task{ResultType: resultType, TaskID: v.TurnID, CreatedAt: v.CreatedAt.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: v.UpdatedAt.UTC().Format(time.RFC3339Nano), PollIntervalMs: h.cfg.TaskPollInterval.Milliseconds()}
	outcome := ""
	if v.Outcome != nil {
		outcome = *v.Outcome
	}
	switch {
	case v.State == kernel.StateSuspended && v.AwaitingInput != nil:
		t.Status = taskInputRequired
		t.StatusMessage = "the Turn waits for input: " + v.AwaitingInput.Prompt
		schema, _ := elicitSchema(v.AwaitingInput.Schema)
		t.InputRequests = map[string]inputRequest{inputKey(v): {Method: "elicitation/create", Params: &mcp.ElicitParams{
			Mode: "form", Message: v.AwaitingInput.Prompt, RequestedSchema: schema}}}
	case v.State != kernel.StateFinished:
		t.Status = taskWorking
		t.StatusMessage = "the Turn is " + v.State
	case outcome == "succeeded":
		t.Status = taskCompleted
		data, _ := json.Marshal(v)
		text := string(v.FinalPayload)
		if text == "" {
			text = "null"
		}
		t.Result = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: json.RawMessage(data)}
	case outcome == kernel.OutcomeStopped:
		t.Status = taskCancelled
		t.StatusMessage = "the Turn was stopped"
	default:
		t.Status = taskFailed
		t.StatusMessage = "the Turn finished " + outcome
		data, _ := json.Marshal(v)
		t.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the Turn finished " + outcome, Data: data}
	}
	return t
}

// inputKey names an input wait of a Turn: unique over the Turn's life,
// since an answer appends a record and a new wait follows a new claim.
func inputKey(v projection.TurnView) string {
	return fmt.Sprintf("input-%d-%d", v.Attempts, v.LastTurnSeq)
}

// elicitSchema is the form schema of an input wait: the Turn's schema when
// it is an object's, else one property "input" of it (wrapped), since a form
// asks for an object.
func elicitSchema(schema json.RawMessage) (s any, wrapped bool) {
	var obj map[string]any
	if len(schema) > 0 && json.Unmarshal(schema, &obj) == nil && obj["type"] == "object" {
		return obj, false
	}
	var inner any = map[string]any{}
	if len(schema) > 0 && string(schema) != "null" {
		inner = json.RawMessage(schema)
	}
	return map[string]any{"type": "object", "properties": map[string]any{"input": inner}, "required": []string{"input"}}, true
}

// declaresTasks reports whether the client declared the extension: in the
// request's client capabilities (2026-07-28) or its session's (2025-11-25).
func declaresTasks(req mcp.Request) bool {
	if p := req.GetParams(); p != nil {
		if caps, ok := p.GetMeta()[metaClientCapabilities].(map[string]any); ok {
			if ext, ok := caps["extensions"].(map[string]any); ok {
				if _, ok := ext[TasksExtension]; ok {
					return true
				}
			}
		}
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
			_, ok := ip.Capabilities.Extensions[TasksExtension]
			return ok
		}
	}
	return false
}

// tasksMiddleware answers a tools/call of dispatch_turn from a client that
// declares the extension with a task: the Turn, once it is on the ledger
// and projected (so that tasks/get finds it at once).
//
// The tasks/ methods answer a client that does not declare the extension
// with the missing-capability error, as the extension requires.
func (h *Handler) tasksMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "tasks/") && !declaresTasks(req) {
			data, _ := json.Marshal(mcp.MissingRequiredClientCapabilityData{
				RequiredCapabilities: &mcp.ClientCapabilities{Extensions: map[string]any{TasksExtension: map[string]any{}}}})
			return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
				Message: method + " needs the " + TasksExtension + " extension: declare it in the client capabilities", Data: data}
		}
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if method != "tools/call" || !ok || p.Name != "dispatch_turn" || !declaresTasks(req) {
			return next(ctx, method, req)
		}
		id, err := identityFrom(ctx)
		if err != nil {
			return h.refusal(err), nil
		}
		args := []byte(p.Arguments)
		if len(args) == 0 {
			args = []byte("{}")
		}
		res, err := h.dispatch(ctx, id, args)
		if err != nil {
			return h.refusal(err), nil
		}
		if err := h.wait(ctx, res.Seq); err != nil {
			return h.refusal(err), nil
		}
		v, err := h.store.Turn(id.project, res.TurnID)
		if err != nil {
			return h.refusal(err), nil
		}
		return h.taskOf(v, "task"), nil
	}
}

type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type taskUpdateParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// ack is the empty acknowledgement of tasks/update and tasks/cancel.
type ack struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

func (h *Handler) addTaskMethods() error {
	if err := mcp.AddReceivingCustomMethod(h.server, "tasks/get", h.taskGet); err != nil {
		return err
	}
	if err := mcp.AddReceivingCustomMethod(h.server, "tasks/update", h.taskUpdate); err != nil {
		return err
	}
	return mcp.AddReceivingCustomMethod(h.server, "tasks/cancel", h.taskCancel)
}

// taskTurn reads the Turn of a task under the read policy.
func (h *Handler) taskTurn(ctx context.Context, taskID string) (identity, projection.TurnView, error) {
	id, err := identityFrom(ctx)
	if err != nil {
		return id, projection.TurnView{}, h.rpcError(err)
	}
	v, err := h.readTurn(ctx, id, taskID)
	if err != nil {
		return id, v, h.rpcError(err)
	}
	return id, v, nil
}

func (h *Handler) taskGet(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*task, error) {
	_, v, err := h.taskTurn(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	return h.taskOf(v, "complete"), nil
}

// taskUpdate provides the input a Turn waits for from an accepted response
// to its outstanding input request; responses to other keys are ignored.
func (h *Handler) taskUpdate(ctx context.Context, _ *mcp.ServerSession, p *taskUpdateParams) (*ack, error) {
	id, v, err := h.taskTurn(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	done := &ack{ResultType: "complete"}
	if v.State != kernel.StateSuspended || v.AwaitingInput == nil {
		return done, nil
	}
	raw, ok := p.InputResponses[inputKey(v)]
	if !ok {
		return done, nil
	}
	var resp struct {
		Action  string          `json:"action"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "an input response is an elicitation result {action, content}"}
	}
	if resp.Action != "accept" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("action %q provides no input: accept with content, or send tasks/cancel to stop the Turn", resp.Action)}
	}
	input := resp.Content
	if _, wrapped := elicitSchema(v.AwaitingInput.Schema); wrapped {
		var c struct {
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(resp.Content, &c); err != nil || c.Input == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the content must be {\"input\": <the answer>}"}
		}
		input = c.Input
	}
	seq, err := h.engine.Execute(ctx, id.project, kernel.ProvideInput{Common: common(id, nil, nil), TurnID: v.TurnID, Input: input})
	if err != nil {
		return nil, h.rpcError(err)
	}
	if err := h.wait(ctx, seq); err != nil {
		return nil, h.rpcError(err)
	}
	return done, nil
}

// taskCancel requests a stop of the Turn and of its descendants; a Turn
// already finished is left as it is.
func (h *Handler) taskCancel(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*ack, error) {
	id, v, err := h.taskTurn(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	if v.State != kernel.StateFinished {
		seq, err := h.stop(ctx, id, stopArgs{TurnID: v.TurnID, Cascade: true})
		if err != nil {
			return nil, h.rpcError(err)
		}
		if err := h.wait(ctx, seq); err != nil {
			return nil, h.rpcError(err)
		}
	}
	return &ack{ResultType: "complete"}, nil
}
