package mcpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// toolFunc runs a tool for the caller and returns its structured answer.
type toolFunc func(ctx context.Context, id identity, args []byte) (any, error)

// m is a JSON object (a schema).
type m = map[string]any

var (
	tStr    = m{"type": "string"}
	tBool   = m{"type": "boolean"}
	tInt    = m{"type": "integer", "minimum": 0}
	tObj    = m{"type": "object"}
	tTime   = m{"type": "string", "format": "date-time"}
	tStrs   = m{"type": "array", "items": tStr}
	tAgent  = obj(m{"project_id": tStr, "agent_id": tStr}, "project_id", "agent_id")
	tClaim  = desc(obj(m{"project_id": tStr, "turn_id": tStr, "agent_id": tStr, "token": tStr, "expires_at": tTime}, "project_id", "turn_id", "agent_id", "token", "expires_at"), "The claim object exactly as claim_turn returned it.")
	tMeta   = desc(m{"type": "object", "properties": m{"note": tStr, "reason": tStr, "annotations": m{}}}, "Optional note, reason and annotations recorded with the event.")
	tTrace  = m{"type": "object", "properties": m{"trace_id": tStr, "parent_trace_id": tStr, "recursion_depth": tInt}}
	tTurn   = desc(m{"type": "object", "required": []string{"project_id", "turn_id", "state"}, "properties": m{"project_id": tStr, "turn_id": tStr, "turn_kind": tStr, "state": m{"type": "string", "enum": kernel.TurnStates()}, "outcome": m{"type": []string{"string", "null"}}, "stop_requested": tBool, "target_agent": tAgent, "requested_by": tAgent, "input": m{}, "awaiting_input": m{"type": []string{"object", "null"}}, "final_payload": m{}, "ledger_seq": tInt}}, "The Turn snapshot (the HTTP API's TurnView).")
	tPage   = m{"type": "object", "required": []string{"project_id", "items", "limit", "diagnostics"}, "properties": m{"project_id": tStr, "items": m{"type": "array"}, "limit": tInt, "diagnostics": m{"type": "array"}, "next_after_ledger_seq": tInt, "next_after_turn_seq": tInt, "has_more": tBool}}
	tLimit  = desc(m{"type": "integer", "minimum": 1}, "Page size (default 50).")
	tAfter  = desc(tInt, "Cursor: the next_after_ledger_seq of the previous page; 0 or absent starts at the beginning.")
	tTurnID = desc(tStr, "The Turn's id (turn_...).")
)

func obj(props m, required ...string) m {
	o := m{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func desc(s m, d string) m {
	c := make(m, len(s)+1)
	for k, v := range s {
		c[k] = v
	}
	c["description"] = d
	return c
}

// with adds meta and trace to the properties of an input schema.
func with(props m) m {
	props["meta"] = tMeta
	props["trace"] = tTrace
	return props
}

// addTools registers the tools, in the order of tools/list.
func (h *Handler) addTools() {
	h.tool("dispatch_turn", "Dispatch a Turn",
		"Ask another agent to do a piece of work: creates a Turn queued for target_agent_id with your input. Use it to delegate; the answer is the new Turn (state queued). Follow it with get_turn, or subscribe to turnledger://turns/{turn_id}. A client that declares the io.modelcontextprotocol/tasks extension gets a task whose taskId is the Turn id. requested_by defaults to you. Reuse a dispatch_key to make a retry of the same dispatch safe. To dispatch a child of a Turn you hold a claim on, set authority {parent_claim: <claim>} (mode child_derivation; the default mode is root_request, its request_id the dispatch_key).",
		obj(with(m{
			"target_agent_id": desc(tStr, "The agent that should do the work (see list_agents)."),
			"target_agent":    desc(tAgent, "Alternative to target_agent_id: {project_id, agent_id}."),
			"input":           desc(tObj, "The work to do: a JSON object the target understands."),
			"turn_kind":       desc(tStr, "The kind of work, one of the target's capabilities."),
			"dispatch_key":    desc(tStr, "Optional key: a dispatch with the same key and body answers the same Turn (retry safely with it). Default: a fresh key."),
			"requested_by":    desc(tAgent, "Defaults to you."),
			"authority":       m{"type": "object", "properties": m{"mode": tStr, "request_id": tStr, "parent_claim": tClaim}},
			"priority":        desc(m{"type": "integer"}, "1 runs first."),
			"not_before":      tTime, "claim_by": tTime, "deadline": tTime,
			"max_attempts":  m{"type": "integer", "minimum": 1},
			"retry_backoff": m{"type": "object", "properties": m{"initial_s": m{"type": "number"}, "factor": m{"type": "number"}, "max_s": m{"type": "number"}}},
			"tags":          tStrs,
		}), "turn_kind"),
		tTurn, h.dispatchTurn)
	h.tool("claim_turn", "Claim the next Turn",
		"Take the next Turn queued for you, to work on it. Answers {claim, turn}: keep the claim object and pass it to append_record, renew_claim, suspend_turn and finish_turn. Answers {claim: null, turn: null} when nothing is queued; with wait_s, waits up to that many seconds for work first (a long poll). Call it in a loop to serve work.",
		obj(with(m{"wait_s": desc(m{"type": "number", "minimum": 0}, "Seconds to wait for a Turn when none is queued (0 to 60; default 0).")})),
		obj(m{"claim": m{"anyOf": []any{tClaim, m{"type": "null"}}}, "turn": m{"anyOf": []any{tTurn, m{"type": "null"}}}}, "claim", "turn"), h.claimTurn)
	h.tool("append_record", "Record progress on a claimed Turn",
		"Append a semantic record (a step, a finding, a partial result) to the Turn you hold a claim on. Answers its turn_seq, and stop_requested: when true, stop working and finish the Turn with outcome stopped.",
		obj(with(m{"turn_id": tTurnID, "claim": tClaim, "payload": desc(m{}, "The record: any JSON value."), "role": desc(tStr, "Who speaks: assistant (the default), tool, ...")}), "claim", "payload"),
		obj(m{"project_id": tStr, "turn_id": tStr, "turn_seq": tInt, "stop_requested": tBool, "ledger_seq": tInt}), h.appendRecord)
	h.tool("renew_claim", "Keep a claim alive",
		"Extend your claim on a Turn by the claim TTL before claim.expires_at, while you are still working on it. Answers the claim with its new expiry (use it from now on) and stop_requested.",
		obj(with(m{"claim": tClaim}), "claim"),
		obj(m{"claim": tClaim, "stop_requested": tBool, "ledger_seq": tInt}), h.renewClaim)
	h.tool("suspend_turn", "Suspend a claimed Turn",
		"Release your claim and park the Turn. With awaiting_input {prompt, schema}, the Turn waits for its requester (or a person) to answer with provide_input, then is queued again with the answer as a semantic record. Answers the Turn (and, for an input wait, the input token and URL to hand to whoever answers).",
		obj(with(m{"turn_id": tTurnID, "claim": tClaim, "awaiting_input": obj(m{"prompt": desc(tStr, "The question."), "schema": desc(tObj, "JSON Schema of the answer (optional)."), "input_by": tTime}, "prompt")}), "claim"),
		tTurn, h.suspendTurn)
	h.tool("provide_input", "Answer a Turn waiting for input",
		"Answer the question of a Turn suspended with awaiting_input (you must be its requester or a management agent). input must match the Turn's awaiting_input.schema. The Turn is queued again.",
		obj(with(m{"turn_id": tTurnID, "input": desc(m{}, "The answer.")}), "turn_id", "input"),
		tTurn, h.provideInput)
	h.tool("finish_turn", "Finish a claimed Turn",
		"Finish the Turn you hold a claim on with an outcome (succeeded, failed, stopped, ...) and its final_payload, the result the requester reads. With outcome failed and retry true, the Turn is queued again for another attempt instead (within max_attempts).",
		obj(with(m{"turn_id": tTurnID, "claim": tClaim, "outcome": desc(m{"type": "string", "enum": kernel.AllOutcomes}, "succeeded when the work is done."), "final_payload": desc(m{}, "The result."), "final_record_role": desc(tStr, "The role of the final record (default assistant)."), "retry": tBool}), "claim", "outcome"),
		tTurn, h.finishTurn)
	h.tool("stop_turn", "Stop a Turn",
		"Ask a Turn to stop: a queued or suspended Turn is finished stopped at once; a claimed one is asked to stop (its worker sees stop_requested). With cascade, also every descendant not finished. requested_by defaults to you.",
		obj(with(m{"turn_id": tTurnID, "cascade": tBool, "requested_by": tAgent}), "turn_id"),
		tTurn, h.stopTurn)
	h.tool("retry_turn", "Retry a finished Turn",
		"Dispatch a new Turn with the same request as a finished one whose outcome is failed, dead, expired, timed_out or stopped. Answers the new Turn.",
		obj(with(m{"turn_id": tTurnID, "requested_by": tAgent}), "turn_id"),
		tTurn, h.retryTurn)
	h.tool("get_turn", "Read a Turn",
		"Read a Turn's snapshot: its state (queued, claimed, suspended, finished), outcome, awaiting_input and final_payload. Use it to follow a Turn you dispatched.",
		obj(m{"turn_id": tTurnID}, "turn_id"), tTurn, h.getTurn)
	h.tool("get_turn_context", "Read a Turn's records",
		"Read the semantic records of a Turn in turn_seq order: the progress records, the answers to its input requests (role input), the final record. (What the Turn was dispatched with is the input field of get_turn.) Page with after_turn_seq.",
		obj(m{"turn_id": tTurnID, "after_turn_seq": tInt, "limit": tLimit}, "turn_id"), tPage, h.getTurnContext)
	h.tool("list_turns", "List Turns",
		"List the Turns you may read, oldest dispatch first, filtered by target agent, kind, state, outcome, tags or awaiting_input. Page with after_ledger_seq.",
		obj(m{"target_agent_id": tStr, "turn_kind": tStr, "state": m{"type": "string", "enum": kernel.TurnStates()}, "outcome": tStr, "priority": m{"type": "integer"}, "awaiting_input": tBool, "tags": tStrs, "stop_requested_only": tBool, "after_ledger_seq": tAfter, "limit": tLimit}),
		tPage, h.listTurns)
	h.tool("read_feed", "Read a ledger feed",
		"Read the events of a Turn (feed turn, with turn_id), of an agent (feed agent, agent_id defaults to you) or of the whole project (feed project), in ledger order. Page with after_ledger_seq.",
		obj(m{"feed": m{"type": "string", "enum": []string{"turn", "agent", "project"}}, "turn_id": tTurnID, "agent_id": tStr, "after_ledger_seq": tAfter, "limit": tLimit}, "feed"),
		tPage, h.readFeed)
	h.tool("list_agents", "List agents",
		"List the project's agents: their roles, capabilities (the turn kinds they take), whether they accept work and their presence. Use it to pick a target for dispatch_turn.",
		obj(m{"agent_id": tStr, "enabled_only": tBool, "accepts_work_only": tBool, "role": tStr, "capability": tStr, "limit": tLimit}),
		tPage, h.listAgents)
}

// tool registers one tool.
func (h *Handler) tool(name, title, description string, in, out m, f toolFunc) {
	t := &mcp.Tool{Name: name, Title: title, Description: description, InputSchema: in, OutputSchema: out}
	h.tools = append(h.tools, t)
	h.server.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id, err := identityFrom(ctx)
		if err != nil {
			return h.refusal(err), nil
		}
		args := []byte(req.Params.Arguments)
		if len(args) == 0 || string(args) == "null" {
			args = []byte("{}")
		}
		v, err := f(ctx, id, args)
		if err != nil {
			return h.refusal(err), nil
		}
		return toolResult(v)
	})
}

// toolsListMiddleware answers tools/list in the order the tools were added
// (the SDK sorts them by name).
func (h *Handler) toolsListMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/list" {
			return next(ctx, method, req)
		}
		res, err := next(ctx, method, req)
		if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil && lr.NextCursor == "" {
			lr.Tools = slices.Clone(h.tools)
		}
		return res, err
	}
}

// toolResult is a tool's answer: the JSON as structured content and as text.
func toolResult(v any) (*mcp.CallToolResult, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}, StructuredContent: json.RawMessage(data)}, nil
}

// refusal is a tool result with isError and the HTTP API's error body.
func (h *Handler) refusal(err error) *mcp.CallToolResult {
	name, msg := faceauth.ErrorBody(h.cfg.Logger, err)
	data, _ := json.Marshal(jsonhttp.ErrorBody{Error: string(name), Message: msg})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}, StructuredContent: json.RawMessage(data)}
}

var discard = slog.New(slog.DiscardHandler)

func decode(args []byte, dst any) error { return jsonhttp.DecodeBytes(args, dst) }

// wait blocks until the projections committed seq.
func (h *Handler) wait(ctx context.Context, seq uint64) error {
	return faceauth.Wait(ctx, h.store, seq, h.cfg.WaitTimeout)
}

// turnAt is the Turn a command changed at seq, for the command's answer
// (projection.Store.Answer, as httpapi answers): t is the engine's Turn as
// the command left it, or nil.
func (h *Handler) turnAt(ctx context.Context, project, turnID string, seq uint64, t *kernel.Turn) (projection.TurnView, error) {
	return faceauth.Answer(ctx, h.store, project, turnID, seq, t, h.cfg.WaitTimeout)
}

// caughtUp makes a read see every write of the project made before it
// (httpapi's Server.caughtUp): authentication brought the engine up to the
// ledger; the read waits for the projections to reach it too.
func (h *Handler) caughtUp(ctx context.Context, id identity) error {
	return h.wait(ctx, h.engine.Folded(id.project))
}

func common(id identity, meta *kernel.Meta, trace *kernel.Trace) kernel.Common {
	return kernel.Common{Caller: id.caller, Meta: meta, Trace: trace}
}

func (id identity) ref() kernel.AgentRef {
	return kernel.AgentRef{ProjectID: id.project, AgentID: id.agent}
}

func (id identity) refOr(r *kernel.AgentRef) kernel.AgentRef {
	if r == nil {
		return id.ref()
	}
	return *r
}

func validID(name, v string) error {
	if !kernel.ValidID(v) {
		return kernel.Errorf(kernel.Validation, "%s %q must be 1 to 128 letters, digits, '_' or '-'", name, v)
	}
	return nil
}

type dispatchArgs struct {
	TargetAgentID string           `json:"target_agent_id"`
	TargetAgent   *kernel.AgentRef `json:"target_agent"`
	RequestedBy   *kernel.AgentRef `json:"requested_by"`
	Input         json.RawMessage  `json:"input"`
	TurnKind      string           `json:"turn_kind"`
	DispatchKey   string           `json:"dispatch_key"`
	Authority     struct {
		Mode        string             `json:"mode"`
		RequestID   string             `json:"request_id"`
		ParentClaim *kernel.ClaimToken `json:"parent_claim"`
	} `json:"authority"`
	kernel.Schedule
	Tags  []string      `json:"tags"`
	Meta  *kernel.Meta  `json:"meta"`
	Trace *kernel.Trace `json:"trace"`
}

// dispatch runs a dispatch and answers the new Turn's id and ledger_seq.
func (h *Handler) dispatch(ctx context.Context, id identity, args []byte) (engine.DispatchResult, error) {
	var b dispatchArgs
	if err := decode(args, &b); err != nil {
		return engine.DispatchResult{}, err
	}
	target := kernel.AgentRef{ProjectID: id.project, AgentID: b.TargetAgentID}
	switch {
	case b.TargetAgent != nil && b.TargetAgentID != "":
		return engine.DispatchResult{}, kernel.Errorf(kernel.Validation, "give target_agent_id or target_agent, not both")
	case b.TargetAgent != nil:
		target = *b.TargetAgent
	}
	if b.Authority.Mode == "" {
		b.Authority.Mode = "root_request"
		if b.Authority.ParentClaim != nil {
			b.Authority.Mode = "child_derivation"
		}
	}
	if b.DispatchKey == "" {
		b.DispatchKey = "mcp-" + rand.Text()
	}
	if b.Authority.Mode == "root_request" && b.Authority.RequestID == "" {
		b.Authority.RequestID = b.DispatchKey
	}
	return h.engine.Dispatch(ctx, id.project, kernel.Dispatch{
		Common: common(id, b.Meta, b.Trace), RequestedBy: id.refOr(b.RequestedBy), TargetAgent: target,
		Input: b.Input, TurnKind: b.TurnKind, DispatchKey: b.DispatchKey,
		Mode: b.Authority.Mode, RequestID: b.Authority.RequestID, ParentClaim: b.Authority.ParentClaim,
		Schedule: b.Schedule, Tags: b.Tags,
	})
}

func (h *Handler) dispatchTurn(ctx context.Context, id identity, args []byte) (any, error) {
	res, err := h.dispatch(ctx, id, args)
	if err != nil {
		return nil, err
	}
	return h.turnAt(ctx, id.project, res.TurnID, res.Seq, res.Turn)
}

type claimArgs struct {
	WaitS float64       `json:"wait_s"`
	Meta  *kernel.Meta  `json:"meta"`
	Trace *kernel.Trace `json:"trace"`
}

// claimAnswer is claim_turn's answer; both null when nothing was claimed.
type claimAnswer struct {
	Claim *kernel.ClaimToken   `json:"claim"`
	Turn  *projection.TurnView `json:"turn"`
}

func (h *Handler) claimTurn(ctx context.Context, id identity, args []byte) (any, error) {
	var b claimArgs
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	wait := time.Duration(b.WaitS * float64(time.Second))
	if b.WaitS < 0 || wait > h.cfg.MaxClaimWait {
		return nil, kernel.Errorf(kernel.Validation, "wait_s must be from 0 to %g seconds", h.cfg.MaxClaimWait.Seconds())
	}
	claim := func() (*engine.ClaimResult, uint64, error) {
		return h.engine.Claim(ctx, id.project, common(id, b.Meta, b.Trace), id.agent, &kernel.AgentRef{ProjectID: id.project, AgentID: id.agent})
	}
	// Once the first attempt found nothing the call waits on notifications:
	// it gives back its in-flight slots and counts as waiting, as the HTTP
	// API's long poll does (httpapi's claimWaiting).
	counted := false
	defer func() {
		if counted {
			h.claims.Add(-1)
		}
	}()
	waiting := func() {
		counted = true
		h.claims.Add(1)
		if id.detach != nil {
			id.detach()
		}
	}
	res, seq, err := h.engine.WaitClaim(ctx, h.store, id.project, id.agent, wait, h.stopCtx.Done(), waiting, claim)
	if err != nil || res == nil {
		return claimAnswer{}, err
	}
	v, err := h.turnAt(ctx, id.project, res.TurnID, seq, res.Turn)
	if err != nil {
		return nil, err
	}
	return claimAnswer{Claim: &res.Token, Turn: &v}, nil
}

type fencedArgs struct {
	TurnID string            `json:"turn_id"`
	Claim  kernel.ClaimToken `json:"claim"`
	Meta   *kernel.Meta      `json:"meta"`
	Trace  *kernel.Trace     `json:"trace"`
}

// turnOf is the Turn a claimed-Turn tool acts on: turn_id, or the claim's.
func turnOf(turnID string, c kernel.ClaimToken) (string, error) {
	if turnID == "" {
		turnID = c.TurnID
	}
	if turnID != c.TurnID {
		return "", kernel.Errorf(kernel.Validation, "turn_id %q is not the Turn of the claim (%q)", turnID, c.TurnID)
	}
	return turnID, validID("turn_id", turnID)
}

type recordAnswer struct {
	ProjectID     string `json:"project_id"`
	TurnID        string `json:"turn_id"`
	TurnSeq       uint64 `json:"turn_seq"`
	StopRequested bool   `json:"stop_requested"`
	LedgerSeq     uint64 `json:"ledger_seq"`
}

func (h *Handler) appendRecord(ctx context.Context, id identity, args []byte) (any, error) {
	var b struct {
		fencedArgs
		Payload json.RawMessage `json:"payload"`
		Role    string          `json:"role"`
	}
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	turnID, err := turnOf(b.TurnID, b.Claim)
	if err != nil {
		return nil, err
	}
	if b.Role == "" {
		b.Role = "assistant"
	}
	res, err := h.engine.Fenced(ctx, id.project, kernel.AppendRecord{
		Common: common(id, b.Meta, b.Trace), TurnID: turnID, Claim: b.Claim, Role: b.Role, Payload: b.Payload,
	})
	if err != nil {
		return nil, err
	}
	ctxW, cancel := context.WithTimeout(ctx, h.cfg.WaitTimeout)
	defer cancel()
	if err := h.store.WaitNear(ctxW, res.Seq); err != nil {
		return nil, faceauth.NotYet(res.Seq)
	}
	return recordAnswer{ProjectID: id.project, TurnID: turnID, TurnSeq: res.TurnSeq, StopRequested: res.StopRequested, LedgerSeq: res.Seq}, nil
}

type renewAnswer struct {
	Claim         kernel.ClaimToken `json:"claim"`
	StopRequested bool              `json:"stop_requested"`
	LedgerSeq     uint64            `json:"ledger_seq"`
}

func (h *Handler) renewClaim(ctx context.Context, id identity, args []byte) (any, error) {
	var b fencedArgs
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	res, err := h.engine.Fenced(ctx, id.project, kernel.Renew{Common: common(id, b.Meta, b.Trace), Claim: b.Claim})
	if err != nil {
		return nil, err
	}
	if err := h.wait(ctx, res.Seq); err != nil {
		return nil, err
	}
	return renewAnswer{Claim: res.Claim, StopRequested: res.StopRequested, LedgerSeq: res.Seq}, nil
}

// suspendAnswer is the answer of a suspend for input: the Turn, and once,
// the input token and the URL that answers the wait with it.
type suspendAnswer struct {
	projection.TurnView
	InputToken string `json:"input_token"`
	InputURL   string `json:"input_url"`
}

func (h *Handler) suspendTurn(ctx context.Context, id identity, args []byte) (any, error) {
	var b struct {
		fencedArgs
		AwaitingInput *struct {
			Prompt  string          `json:"prompt"`
			Schema  json.RawMessage `json:"schema"`
			InputBy *time.Time      `json:"input_by"`
		} `json:"awaiting_input"`
	}
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	turnID, err := turnOf(b.TurnID, b.Claim)
	if err != nil {
		return nil, err
	}
	cmd := kernel.Suspend{Common: common(id, b.Meta, b.Trace), TurnID: turnID, Claim: b.Claim}
	if a := b.AwaitingInput; a != nil {
		cmd.AwaitingInput = &kernel.AwaitingInput{Prompt: a.Prompt, Schema: a.Schema, InputBy: a.InputBy}
	}
	res, err := h.engine.Fenced(ctx, id.project, cmd)
	if err != nil {
		return nil, err
	}
	v, err := h.turnAt(ctx, id.project, turnID, res.Seq, res.Turn)
	if err != nil || res.InputToken == "" {
		return v, err
	}
	return suspendAnswer{TurnView: v, InputToken: res.InputToken, InputURL: id.base + "/v3r1/projects/" + id.project + "/turns/" + turnID + ":provide-input"}, nil
}

func (h *Handler) provideInput(ctx context.Context, id identity, args []byte) (any, error) {
	var b struct {
		TurnID string          `json:"turn_id"`
		Input  json.RawMessage `json:"input"`
		Meta   *kernel.Meta    `json:"meta"`
		Trace  *kernel.Trace   `json:"trace"`
	}
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	if err := validID("turn_id", b.TurnID); err != nil {
		return nil, err
	}
	seq, err := h.engine.Execute(ctx, id.project, kernel.ProvideInput{Common: common(id, b.Meta, b.Trace), TurnID: b.TurnID, Input: b.Input})
	if err != nil {
		return nil, err
	}
	return h.turnAt(ctx, id.project, b.TurnID, seq, nil)
}

func (h *Handler) finishTurn(ctx context.Context, id identity, args []byte) (any, error) {
	var b struct {
		fencedArgs
		Outcome         string          `json:"outcome"`
		FinalPayload    json.RawMessage `json:"final_payload"`
		FinalRecordRole string          `json:"final_record_role"`
		Retry           bool            `json:"retry"`
	}
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	turnID, err := turnOf(b.TurnID, b.Claim)
	if err != nil {
		return nil, err
	}
	if len(b.FinalPayload) > 0 && b.FinalRecordRole == "" {
		b.FinalRecordRole = "assistant"
	}
	res, err := h.engine.Fenced(ctx, id.project, kernel.Finish{
		Common: common(id, b.Meta, b.Trace), TurnID: turnID, Claim: b.Claim,
		Outcome: b.Outcome, FinalPayload: b.FinalPayload, FinalRecordRole: b.FinalRecordRole, Retry: b.Retry,
	})
	if err != nil {
		return nil, err
	}
	return h.turnAt(ctx, id.project, turnID, res.Seq, res.Turn)
}

type stopArgs struct {
	TurnID      string           `json:"turn_id"`
	Cascade     bool             `json:"cascade"`
	RequestedBy *kernel.AgentRef `json:"requested_by"`
	Meta        *kernel.Meta     `json:"meta"`
	Trace       *kernel.Trace    `json:"trace"`
}

// stop requests a stop of a Turn and answers its ledger_seq.
func (h *Handler) stop(ctx context.Context, id identity, b stopArgs) (uint64, error) {
	if err := validID("turn_id", b.TurnID); err != nil {
		return 0, err
	}
	return h.engine.Stop(ctx, id.project, kernel.Stop{Common: common(id, b.Meta, b.Trace), TurnID: b.TurnID, RequestedBy: id.refOr(b.RequestedBy), Cascade: b.Cascade})
}

func (h *Handler) stopTurn(ctx context.Context, id identity, args []byte) (any, error) {
	var b stopArgs
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	seq, err := h.stop(ctx, id, b)
	if err != nil {
		return nil, err
	}
	return h.turnAt(ctx, id.project, b.TurnID, seq, nil)
}

func (h *Handler) retryTurn(ctx context.Context, id identity, args []byte) (any, error) {
	var b struct {
		TurnID      string           `json:"turn_id"`
		RequestedBy *kernel.AgentRef `json:"requested_by"`
		Meta        *kernel.Meta     `json:"meta"`
		Trace       *kernel.Trace    `json:"trace"`
	}
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	if err := validID("turn_id", b.TurnID); err != nil {
		return nil, err
	}
	res, err := h.engine.Retry(ctx, id.project, kernel.Retry{Common: common(id, b.Meta, b.Trace), TurnID: b.TurnID, RequestedBy: id.refOr(b.RequestedBy)})
	if err != nil {
		return nil, err
	}
	return h.turnAt(ctx, id.project, res.TurnID, res.Seq, res.Turn)
}

// readableTurn checks that the caller may read the Turn, once the
// projections caught up.
func (h *Handler) readableTurn(ctx context.Context, id identity, turnID string) error {
	if err := validID("turn_id", turnID); err != nil {
		return err
	}
	if err := h.caughtUp(ctx, id); err != nil {
		return err
	}
	return h.engine.ViewFolded(ctx, id.project, func(p *kernel.Project) error {
		return kernel.CanReadTurn(p, id.caller, h.cfg.Now(), turnID)
	})
}

// readTurn is the Turn snapshot, under the read policy.
func (h *Handler) readTurn(ctx context.Context, id identity, turnID string) (projection.TurnView, error) {
	if err := h.readableTurn(ctx, id, turnID); err != nil {
		return projection.TurnView{}, err
	}
	return h.store.Turn(id.project, turnID)
}

func (h *Handler) getTurn(ctx context.Context, id identity, args []byte) (any, error) {
	var b struct {
		TurnID string `json:"turn_id"`
	}
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	return h.readTurn(ctx, id, b.TurnID)
}

// page is the Projection page shape of the HTTP API.
type page struct {
	ProjectID          string   `json:"project_id"`
	Items              any      `json:"items"`
	Limit              int      `json:"limit"`
	Diagnostics        []errAny `json:"diagnostics"`
	NextAfterLedgerSeq *uint64  `json:"next_after_ledger_seq,omitempty"`
	NextAfterTurnSeq   *uint64  `json:"next_after_turn_seq,omitempty"`
	HasMore            *bool    `json:"has_more,omitempty"`
}

// errAny is a diagnostic (none are reported here: the HTTP API's
// /readyz and pages carry them).
type errAny = map[string]string

func (h *Handler) limit(n *int) (int, error) {
	if n == nil {
		return h.cfg.DefaultLimit, nil
	}
	if *n < 1 || *n > h.cfg.MaxLimit {
		return 0, kernel.Errorf(kernel.Validation, "limit must be an integer from 1 to %d, not %d", h.cfg.MaxLimit, *n)
	}
	return *n, nil
}

// contextPage is a page of a Turn's semantic context.
func (h *Handler) contextPage(ctx context.Context, id identity, turnID string, after uint64, limit int) (page, error) {
	if err := h.readableTurn(ctx, id, turnID); err != nil {
		return page{}, err
	}
	cp, err := h.store.Context(id.project, turnID, after, limit)
	if err != nil {
		return page{}, err
	}
	return page{ProjectID: id.project, Items: cp.Items, Limit: limit, Diagnostics: []errAny{}, NextAfterTurnSeq: &cp.NextAfterTurnSeq, HasMore: &cp.HasMore}, nil
}

func (h *Handler) getTurnContext(ctx context.Context, id identity, args []byte) (any, error) {
	var b struct {
		TurnID       string `json:"turn_id"`
		AfterTurnSeq uint64 `json:"after_turn_seq"`
		Limit        *int   `json:"limit"`
	}
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	limit, err := h.limit(b.Limit)
	if err != nil {
		return nil, err
	}
	return h.contextPage(ctx, id, b.TurnID, b.AfterTurnSeq, limit)
}

func (h *Handler) listTurns(ctx context.Context, id identity, args []byte) (any, error) {
	var b struct {
		TargetAgentID     string   `json:"target_agent_id"`
		TurnKind          string   `json:"turn_kind"`
		State             string   `json:"state"`
		Outcome           string   `json:"outcome"`
		Priority          int      `json:"priority"`
		AwaitingInput     bool     `json:"awaiting_input"`
		Tags              []string `json:"tags"`
		StopRequestedOnly bool     `json:"stop_requested_only"`
		AfterLedgerSeq    uint64   `json:"after_ledger_seq"`
		Limit             *int     `json:"limit"`
	}
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	f := projection.TurnFilter{TargetAgentID: b.TargetAgentID, TurnKind: b.TurnKind, State: b.State, Outcome: b.Outcome,
		Priority: b.Priority, AwaitingInputOnly: b.AwaitingInput, Tags: b.Tags, StopRequestedOnly: b.StopRequestedOnly, AfterSeq: b.AfterLedgerSeq}
	if f.TargetAgentID != "" {
		if err := validID("target_agent_id", f.TargetAgentID); err != nil {
			return nil, err
		}
	}
	if err := kernel.CheckTurnState("state", f.State); err != nil {
		return nil, err
	}
	if f.Priority != 0 && (f.Priority < kernel.MinPriority || f.Priority > kernel.MaxPriority) {
		return nil, kernel.Errorf(kernel.Validation, "priority must be an integer from %d to %d; not %d", kernel.MinPriority, kernel.MaxPriority, f.Priority)
	}
	if len(f.Tags) > kernel.MaxTags {
		return nil, kernel.Errorf(kernel.Validation, "tags may name at most %d tags", kernel.MaxTags)
	}
	for _, tag := range f.Tags {
		if err := kernel.CheckTag("tag", tag); err != nil {
			return nil, err
		}
	}
	limit, err := h.limit(b.Limit)
	if err != nil {
		return nil, err
	}
	if err := h.caughtUp(ctx, id); err != nil {
		return nil, err
	}
	if f.VisibleTo, err = h.engine.TurnsVisibleTo(ctx, id.project, id.caller); err != nil {
		return nil, err
	}
	tp, err := h.store.TurnsPage(id.project, f, limit)
	if err != nil {
		return nil, err
	}
	return page{ProjectID: id.project, Items: tp.Items, Limit: limit, Diagnostics: []errAny{}, NextAfterLedgerSeq: &tp.NextAfterSeq, HasMore: &tp.HasMore}, nil
}

func (h *Handler) authorizeRead(ctx context.Context, id identity, action, agentID string) error {
	if err := h.caughtUp(ctx, id); err != nil {
		return err
	}
	return h.engine.ViewFolded(ctx, id.project, func(p *kernel.Project) error {
		return kernel.AuthorizeRead(p, id.caller, h.cfg.Now(), action, agentID)
	})
}

func (h *Handler) readFeed(ctx context.Context, id identity, args []byte) (any, error) {
	var b struct {
		Feed           string `json:"feed"`
		TurnID         string `json:"turn_id"`
		AgentID        string `json:"agent_id"`
		AfterLedgerSeq uint64 `json:"after_ledger_seq"`
		Limit          *int   `json:"limit"`
	}
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	limit, err := h.limit(b.Limit)
	if err != nil {
		return nil, err
	}
	var fp projection.FeedPage
	switch b.Feed {
	case "turn":
		if err := h.readableTurn(ctx, id, b.TurnID); err != nil {
			return nil, err
		}
		fp, err = h.store.TurnFeed(id.project, b.TurnID, b.AfterLedgerSeq, limit)
	case "agent":
		agent := b.AgentID
		if agent == "" {
			agent = id.agent
		}
		if err := validID("agent_id", agent); err != nil {
			return nil, err
		}
		if err := h.authorizeRead(ctx, id, kernel.ReadAgentFeed, agent); err != nil {
			return nil, err
		}
		fp, err = h.store.AgentFeed(id.project, agent, b.AfterLedgerSeq, limit)
	case "project":
		if err := h.authorizeRead(ctx, id, kernel.ReadProjectWide, ""); err != nil {
			return nil, err
		}
		fp, err = h.store.ProjectFeed(id.project, b.AfterLedgerSeq, limit)
	default:
		return nil, kernel.Errorf(kernel.Validation, "feed must be turn, agent or project; not %q", b.Feed)
	}
	if err != nil {
		return nil, err
	}
	return page{ProjectID: id.project, Items: fp.Items, Limit: limit, Diagnostics: []errAny{}, NextAfterLedgerSeq: &fp.NextAfterLedgerSeq, HasMore: &fp.HasMore}, nil
}

func (h *Handler) listAgents(ctx context.Context, id identity, args []byte) (any, error) {
	var b struct {
		AgentID         string `json:"agent_id"`
		EnabledOnly     bool   `json:"enabled_only"`
		AcceptsWorkOnly bool   `json:"accepts_work_only"`
		Role            string `json:"role"`
		Capability      string `json:"capability"`
		Limit           *int   `json:"limit"`
	}
	if err := decode(args, &b); err != nil {
		return nil, err
	}
	if b.AgentID != "" {
		if err := validID("agent_id", b.AgentID); err != nil {
			return nil, err
		}
	}
	limit, err := h.limit(b.Limit)
	if err != nil {
		return nil, err
	}
	if err := h.authorizeRead(ctx, id, kernel.ReadDirectory, ""); err != nil {
		return nil, err
	}
	items, err := h.store.Agents(id.project, projection.AgentFilter{AgentID: b.AgentID, EnabledOnly: b.EnabledOnly, AcceptsWorkOnly: b.AcceptsWorkOnly, Role: b.Role, Capability: b.Capability}, limit, h.cfg.Now())
	if err != nil {
		return nil, err
	}
	return page{ProjectID: id.project, Items: items, Limit: limit, Diagnostics: []errAny{}}, nil
}
