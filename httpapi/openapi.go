package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/turnledger/turnledger/kernel"
)

// The OpenAPI 3.1 document of every route the Server serves, built once from
// the route table (routes.go) and served at GET /openapi.json without
// credentials. openapi_test.go checks it both ways against the table (a
// route missing from either side fails) and validates real responses of a
// lifecycle against its schemas, so it cannot drift from the code unnoticed.
//
// Response objects are closed (additionalProperties: false) and list every
// field as required: a field added to a response must be added here too.

// OpenAPI returns the OpenAPI 3.1 document (JSON) of the coordination API.
// Callers must not modify the returned bytes.
func OpenAPI() []byte {
	openAPIOnce.Do(func() {
		// The table of a zero Server: only its metadata is read, never its
		// handlers.
		b, err := json.MarshalIndent(buildOpenAPI(new(Server).routes()), "", "  ")
		if err != nil {
			panic("httpapi: encode the OpenAPI document: " + err.Error())
		}
		openAPIDoc = append(b, '\n')
	})
	return openAPIDoc
}

// The document, built on first use. A sync.Once rather than a variable made
// by sync.OnceValue: the table holds the handler that serves the document,
// so such a variable would be initialized from itself.
var (
	openAPIOnce sync.Once
	openAPIDoc  []byte
)

func (s *Server) openapi(w http.ResponseWriter, c *call) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(OpenAPI())
	return nil
}

type m = map[string]any

func ref(name string) m { return m{"$ref": "#/components/schemas/" + name} }

func nullable(s m) m {
	if t, ok := s["type"].(string); ok && len(s) <= 2 {
		out := m{}
		for k, v := range s {
			out[k] = v
		}
		out["type"] = []string{t, "null"}
		return out
	}
	return m{"anyOf": []any{s, m{"type": "null"}}}
}

var (
	tStr      = m{"type": "string"}
	tBool     = m{"type": "boolean"}
	tInt      = m{"type": "integer"}
	tSeq      = m{"type": "integer", "minimum": 0}
	tClaimTTL = m{"type": "integer", "minimum": 1, "maximum": kernel.MaxClaimTTLS, "description": "the lease of the agent's claims in seconds (default: the server's claim TTL)"}
	tTag      = m{"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"}
	tPriority = m{"type": "integer", "minimum": kernel.MinPriority, "maximum": kernel.MaxPriority, "description": "1 runs first; 3 by default"}
	tTime     = m{"type": "string", "format": "date-time"}
	tAny      = m{}
	tObj      = m{"type": "object"}
	tStrList  = m{"type": "array", "items": tStr}
	tID       = m{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,128}$"}
)

// tContextID is a context_id: the conversation a Turn belongs to.
var tContextID = m{"type": "string", "pattern": "^[\\x21-\\x7e]{1,200}$", "description": "groups the Turns of one conversation (A2A's contextId); kept by a retry, not inherited by children"}

// closed is a response object: every property required, no others.
func closed(props m) m {
	req := make([]string, 0, len(props))
	for k := range props {
		req = append(req, k)
	}
	slices.Sort(req)
	return m{"type": "object", "properties": props, "required": req, "additionalProperties": false}
}

// closedExcept is closed with the named properties optional.
func closedExcept(props m, optional ...string) m {
	s := closed(props)
	var req []string
	for _, k := range s["required"].([]string) {
		if !slices.Contains(optional, k) {
			req = append(req, k)
		}
	}
	s["required"] = req
	return s
}

// body is a request object: unknown fields are refused, the named ones
// required.
func body(props m, required ...string) m {
	s := m{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func pageOf(item m, cursor ...string) m {
	props := m{
		"project_id":  tStr,
		"items":       m{"type": "array", "items": item},
		"limit":       tInt,
		"diagnostics": m{"type": "array", "items": ref("Diagnostic")},
	}
	for _, c := range cursor {
		switch c {
		case "has_more":
			props[c] = tBool
		default:
			props[c] = tSeq
		}
	}
	return closed(props)
}

func schemas() m {
	metaTrace := m{"meta": nullable(ref("Meta")), "trace": nullable(ref("Trace"))}
	with := func(props m) m {
		for k, v := range metaTrace {
			props[k] = v
		}
		return props
	}
	profileSpec := body(m{
		"role": tStr, "description": tStr, "enabled": tBool, "accepts_work": tBool, "capacity": tInt,
		"capabilities": tStrList, "grants": tStrList, "public_metadata": tObj, "claim_ttl_s": nullable(tClaimTTL),
	})
	return m{
		"ErrorBody": closed(m{"error": tStr, "message": tStr}),
		// A feed read below the retention horizon (horizon.go).
		"GoneError":  closed(m{"error": tStr, "message": tStr, "horizon_ledger_seq": tInt}),
		"Diagnostic": closed(m{"code": tStr, "message": tStr}),
		"Health":     closed(m{"status": tStr}),
		"Ok":         closed(m{"ok": m{"const": true}}),
		"AgentRef":   closed(m{"project_id": tStr, "agent_id": tStr}),
		"TurnRef":    closed(m{"project_id": tStr, "turn_id": tStr}),
		"ClaimToken": closed(m{"project_id": tStr, "turn_id": tStr, "agent_id": tStr, "token": tStr, "expires_at": tTime}),
		"Meta":       body(m{"note": tStr, "reason": tStr, "annotations": nullable(tObj)}),
		"Trace":      body(m{"trace_id": tStr, "parent_trace_id": nullable(tStr), "recursion_depth": tInt}),
		"AgentSpec": closedExcept(m{
			"agent_id": tID, "role": tStr, "description": tStr, "enabled": tBool, "accepts_work": tBool,
			"capacity": tInt, "capabilities": tStrList, "grants": tStrList, "public_metadata": tObj,
			"claim_ttl_s": tClaimTTL,
		}, "claim_ttl_s"),
		"Provenance": closed(m{"kind": tStr, "external_ref": tStr, "payload_hash": nullable(tStr)}),
		"Backoff": body(m{
			"initial_s": m{"type": "number", "exclusiveMinimum": 0, "maximum": 86400, "description": "seconds before the first retry (default 1)"},
			"factor":    m{"type": "number", "minimum": 1, "maximum": 100, "description": "multiplies the delay for each further attempt (default 2)"},
			"max_s":     m{"type": "number", "maximum": 86400, "description": "the longest delay (default 60, and at least initial_s)"},
		}),
		"ProfileSpec": profileSpec,

		"TurnView": closed(turnView()),
		"SuspendResult": func() m {
			props := turnView()
			props["input_token"] = m{"type": "string", "description": "returned once: answers the wait alone (Authorization: Bearer <input_token>)"}
			props["input_url"] = m{"type": "string", "format": "uri", "description": "the absolute URL of the Turn's :provide-input"}
			return closedExcept(props, "input_token", "input_url")
		}(),
		"AgentView": closed(m{
			"project_id": tStr, "agent_id": tStr, "role": tStr, "description": tStr, "enabled": tBool,
			"accepts_work": tBool, "drained": tBool, "admitting": tBool, "capacity": tInt, "active_claims": tInt,
			"free_capacity": tInt, "capabilities": tStrList, "grants": tStrList, "public_metadata": tAny,
			"provenance": ref("Provenance"), "registered_at": tTime, "updated_at": tTime, "last_seen_at": nullable(tTime),
			"presence":   m{"type": "string", "enum": []string{"online", "offline", "never"}},
			"ledger_seq": tSeq, "claim_ttl_s": nullable(tClaimTTL),
		}),
		"TurnOffer": closed(m{
			"agent_id": tStr, "turn_kind": tStr, "role": tStr, "enabled": tBool, "accepts_work": tBool, "drained": tBool,
			"admitting": tBool, "capacity": tInt, "free_capacity": tInt, "queued": tInt,
			"presence": m{"type": "string", "enum": []string{"online", "offline", "never"}},
		}),
		"CredentialView": closed(m{
			"credential_id": tStr, "project_id": tStr, "agent_id": tStr,
			"status":    m{"type": "string", "enum": []string{"active", "revoked", "expired"}},
			"issued_at": tTime, "expires_at": tTime, "revoked_at": nullable(tTime), "via": tStr,
		}),
		"LineageItem": closed(m{
			"turn_id": tStr, "parent_turn_id": nullable(tStr), "depth": tInt,
			"relation": m{"type": "string", "enum": []string{"ancestor", "self", "descendant"}},
			"state":    tStr, "outcome": nullable(tStr), "turn_kind": tStr, "target_agent": ref("AgentRef"),
		}),
		"ContextItem": closed(m{"turn_seq": tSeq, "role": tStr, "payload": tAny, "claim_id": tStr, "agent_id": tStr, "at": tTime, "ledger_seq": tSeq}),
		"FeedItem": closed(m{
			"ledger_seq": tSeq, "type": tStr, "v": tInt, "project_id": tStr, "aggregate": tStr, "id": tStr, "at": tTime,
			"actor": closedExcept(m{"kind": tStr, "agent_id": tStr}, "agent_id"),
			"data":  tAny, "meta": nullable(ref("Meta")), "trace": nullable(ref("Trace")),
		}),

		"AgentPage":   pageOf(ref("AgentView")),
		"OfferPage":   pageOf(ref("TurnOffer")),
		"LineagePage": pageOf(ref("LineageItem")),
		"TurnPage":    pageOf(ref("TurnView"), "next_after_ledger_seq", "has_more"),
		"ContextPage": pageOf(ref("ContextItem"), "next_after_turn_seq", "has_more"),
		"FeedPage":    pageOf(ref("FeedItem"), "next_after_ledger_seq", "has_more"),

		"ClaimResult":      closed(m{"claim": ref("ClaimToken"), "turn": ref("TurnView")}),
		"RenewResult":      closed(m{"claim": ref("ClaimToken"), "stop_requested": tBool, "ledger_seq": tSeq}),
		"RecordResult":     closed(m{"project_id": tStr, "turn_id": tStr, "turn_seq": tSeq, "stop_requested": tBool, "ledger_seq": tSeq}),
		"ReconcileResult":  closed(m{"project_id": tStr, "released_turn_ids": tStrList, "ledger_seq": tSeq}),
		"ReportResult":     closed(m{"report_id": tStr, "project_id": tStr, "agent_id": tStr, "ledger_seq": tSeq}),
		"IssuedCredential": closed(m{"credential": ref("CredentialView"), "token": tStr}),
		"CredentialList":   closed(m{"project_id": tStr, "agent_id": tStr, "items": m{"type": "array", "items": ref("CredentialView")}}),
		"Profile": closedExcept(m{
			"project_id": tStr, "agent_id": tStr, "profile_kind": tStr, "runtime_kind": tStr, "invite_id": tStr, "agent": ref("AgentView"),
		}, "profile_kind", "runtime_kind", "invite_id"),
		"CredentialMaterial": closed(m{"profile": ref("Profile"), "credential": ref("CredentialView"), "agent_credential_token": tStr}),
		"JoinInvite": closed(m{
			"invite_id": tStr, "project_id": tStr, "agent_id": tStr, "profile_kind": tStr, "runtime_kind": tStr,
			"expires_at": tTime, "single_use": tBool,
		}),
		"InviteCreated": closed(m{"invite": ref("JoinInvite"), "join_code": tStr}),

		// Request bodies.
		"ContextBody":     body(with(m{})),
		"RegisterBody":    body(with(m{"spec": ref("AgentSpec"), "provenance": ref("Provenance")}), "spec", "provenance"),
		"AdmissionBody":   body(with(m{"agent": ref("AgentRef"), "requested_by": ref("AgentRef")}), "agent", "requested_by"),
		"HeartbeatBody":   body(with(m{"agent": ref("AgentRef")})),
		"RequestedByBody": body(with(m{"requested_by": ref("AgentRef")}), "requested_by"),
		"StopBody": body(with(m{"requested_by": ref("AgentRef"), "cascade": m{"type": "boolean", "description": fmt.Sprintf(
			"stop every descendant not finished too, each by its own event with one request_id, all or none; at most %d Turns", kernel.MaxCascade)}}), "requested_by"),
		"PublicMetadata": tObj,
		"WorkMemoryReport": body(m{
			"kind": m{"const": "agent_work_memory_report_manifest.v1"}, "request_id": tStr, "summary": tStr,
			"records":       m{"type": "array", "items": body(m{"role": tStr, "payload": tObj, "source_refs": m{"type": "array"}}, "role", "payload")},
			"final_payload": nullable(tObj), "declared_project_id": tStr, "declared_agent_id": tStr,
		}, "kind", "request_id", "records", "declared_project_id", "declared_agent_id"),
		"DispatchBody": body(with(m{
			"requested_by": ref("AgentRef"), "target_agent": ref("AgentRef"), "input": tAny,
			"turn_kind": tStr, "dispatch_key": tStr,
			"authority": m{"oneOf": []any{
				body(m{"mode": m{"const": "root_request"}, "request_id": tStr, "parent_claim": m{"type": "null"}}, "mode", "request_id"),
				body(m{"mode": m{"const": "child_derivation"}, "parent_claim": ref("ClaimToken"), "request_id": tStr}, "mode", "parent_claim"),
			}},
			"priority":      tPriority,
			"not_before":    m{"type": "string", "format": "date-time", "description": "not claimable before this time"},
			"claim_by":      m{"type": "string", "format": "date-time", "description": "finished as expired if still never claimed then; in the future, not after deadline"},
			"deadline":      m{"type": "string", "format": "date-time", "description": "finished as timed_out if not finished then; in the future"},
			"max_attempts":  m{"type": "integer", "minimum": 1, "maximum": kernel.MaxAttemptsLimit, "description": "claims allowed; a claim that expires on the last one finishes the Turn as dead (default: no limit)"},
			"retry_backoff": ref("Backoff"),
			"tags":          m{"type": "array", "items": tTag, "maxItems": kernel.MaxTags, "description": "what the requester knows the Turn by; not inherited by children"},
			"context_id":    tContextID,
		}), "requested_by", "target_agent", "input", "turn_kind", "dispatch_key", "authority"),
		"ClaimBody": body(with(m{"agent": ref("AgentRef"), "lease_s": m{"type": "integer", "minimum": 1, "maximum": kernel.MaxClaimTTLS,
			"description": "a lease of its own, at most the agent's claim_ttl_s (default: the agent's, else the server's claim TTL)"}}), "agent"),
		"FencedBody": body(with(m{"claim": ref("ClaimToken")}), "claim"),
		"SuspendBody": body(with(m{"claim": ref("ClaimToken"), "awaiting_input": body(m{
			"prompt":   m{"type": "string", "minLength": 1, "maxLength": kernel.MaxPromptLen, "description": "the question, for a person or another agent"},
			"schema":   nullable(m{"type": "object", "description": "a JSON Schema of the expected input, shown to whoever answers"}),
			"input_by": nullable(m{"type": "string", "format": "date-time", "description": "the Turn ends as timed_out if no input arrives by then"}),
		}, "prompt")}), "claim"),
		"ProvideInputBody": body(with(m{"input": tObj}), "input"),
		"BulkBody": body(with(m{
			"requested_by": ref("AgentRef"),
			"filter": body(m{
				"state": m{"type": "string", "enum": kernel.TurnStates()}, "target_agent_id": tID, "turn_kind": tStr, "tag": tTag,
				"outcome": m{"type": "string", "enum": kernel.AllOutcomes}, "awaiting_input": tBool,
			}),
			"limit":  m{"type": "integer", "minimum": 1, "maximum": kernel.MaxBulk, "description": "Turns to act on at most (default 100)"},
			"reason": m{"type": "string", "maxLength": kernel.MaxTextLen, "description": "kept as meta.reason of every event"},
		}), "requested_by"),
		"RecordBody": body(with(m{"claim": ref("ClaimToken"), "payload": tObj, "role": tStr}), "claim", "payload", "role"),
		"FinishBody": body(with(m{
			"claim": ref("ClaimToken"), "outcome": tStr, "final_payload": nullable(tObj), "final_record_role": tStr,
			"retry": m{"type": "boolean", "description": "with outcome failed: queue the Turn again after its backoff while attempts remain, else finish it as dead"},
		}), "claim", "outcome"),
		"TokensRequestBody": body(with(m{"agent_id": tID, "spec": nullable(ref("ProfileSpec")), "provenance": nullable(ref("Provenance"))}), "agent_id"),
		"InviteBody": body(with(m{
			"agent_id": tID, "profile_kind": tStr, "runtime_kind": tStr,
			"expires_in_seconds": nullable(m{"type": "integer", "minimum": 1}), "single_use": nullable(tBool),
			"spec": nullable(ref("ProfileSpec")),
		}), "agent_id"),
		"RedeemBody": body(m{"join_code": tStr}, "join_code"),
	}
}

func parameters() m {
	q := func(name, desc string, schema m) m {
		return m{"name": name, "in": "query", "required": false, "description": desc, "schema": schema}
	}
	path := func(name string) m {
		return m{"name": name, "in": "path", "required": true, "schema": tID}
	}
	flag := m{"type": "string", "enum": []string{"true", "false", "1", "0", ""}}
	return m{
		"project_id":          path("project_id"),
		"agent_id":            path("agent_id"),
		"turn_id":             path("turn_id"),
		"credential_id":       path("credential_id"),
		"after_ledger_seq":    q("after_ledger_seq", "Cursor: only items after this ledger_seq (default 0).", tSeq),
		"after_turn_seq":      q("after_turn_seq", "Cursor: only records after this turn_seq (default 0).", tSeq),
		"limit":               q("limit", "Page size, 1 to 500 (default 50).", m{"type": "integer", "minimum": 1, "maximum": 500}),
		"wait":                q("wait", "Long poll: a Go duration from 0s to 60s (default 0s: answer at once).", m{"type": "string", "examples": []string{"30s"}}),
		"agent_id_filter":     q("agent_id", "Only this agent.", tID),
		"target_agent_id":     q("target_agent_id", "Only Turns targeting this agent.", tID),
		"turn_kind":           q("turn_kind", "Only this Turn kind.", tStr),
		"state":               q("state", "Only Turns in this state.", m{"type": "string", "enum": kernel.TurnStates()}),
		"outcome":             q("outcome", "Only Turns with this outcome.", tStr),
		"stop_requested_only": q("stop_requested_only", "Only Turns with a stop requested.", flag),
		"priority":            q("priority", "Only Turns of this priority (1 to 5).", tPriority),
		"awaiting_input":      q("awaiting_input", "Only Turns suspended for input (true).", flag),
		"order":               q("order", "Turn list order: oldest (the default) or newest dispatch first; after_ledger_seq then pages on in that order.", m{"type": "string", "enum": []string{OrderOldest, OrderNewest}}),
		"context_id":          q("context_id", "Only Turns of this context_id.", tContextID),
		"tag":                 m{"name": "tag", "in": "query", "description": "Only Turns carrying this tag; repeat it for Turns carrying all of them.", "schema": m{"type": "array", "items": tTag}, "style": "form", "explode": true},
		"enabled_only":        q("enabled_only", "Only enabled agents.", flag),
		"accepts_work_only":   q("accepts_work_only", "Only agents accepting work and not drained.", flag),
		"role":                q("role", "Only agents of this role.", tStr),
		"capability":          q("capability", "Only agents with this capability.", tStr),
		IdempotencyHeader: m{"name": IdempotencyHeader, "in": "header", "required": false,
			"schema":      m{"type": "string", "minLength": 1, "maxLength": maxIdempotencyKey, "pattern": "^[\\x20-\\x7e]+$"},
			"description": "Makes the request safe to retry: a retry with the same key and body, from the same caller to the same route, within 24 hours, gets the first request's answer (secrets included) and changes nothing; the same key with another body is a 422. 1 to 255 printable ASCII characters."},
		"Last-Event-ID": m{"name": "Last-Event-ID", "in": "header", "required": false, "schema": tSeq,
			"description": "Event streams: resume after this ledger_seq (wins over after_ledger_seq)."},
	}
}

// pathParams returns the names of the {params} of a path.
func pathParams(path string) []string {
	var out []string
	for {
		i := strings.IndexByte(path, '{')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(path[i:], '}')
		out = append(out, path[i+1:i+j])
		path = path[i+j:]
	}
}

func buildOpenAPI(routes []route) m {
	errResp := func(desc string) m {
		return m{"description": desc, "content": m{"application/json": m{"schema": ref("ErrorBody")}}}
	}
	paths := m{}
	for _, op := range routes {
		path := openAPIPath(op.path)
		var params []any
		for _, p := range pathParams(path) {
			params = append(params, m{"$ref": "#/components/parameters/" + p})
		}
		for _, p := range op.query {
			params = append(params, m{"$ref": "#/components/parameters/" + p})
		}
		if op.stream {
			params = append(params, m{"$ref": "#/components/parameters/Last-Event-ID"})
		}
		if op.method != http.MethodGet {
			params = append(params, m{"$ref": "#/components/parameters/" + IdempotencyHeader})
		}
		respType := op.respType
		if respType == "" {
			respType = "application/json"
		}
		content := m{respType: m{"schema": op.resp}}
		if op.stream {
			// A Media Type Object has no description: the stream's is its
			// schema's, and the response's says when it is sent.
			content["text/event-stream"] = m{"schema": m{"type": "string",
				"description": "One event per feed item: `id: <ledger_seq>`, `event: <type>`, `data: <FeedItem JSON>`; `: heartbeat` comments; an `error` event with an ErrorBody when access is lost."}}
		}
		desc := "OK"
		if op.stream {
			desc = "OK: a page, or with Accept: text/event-stream a live stream of the items."
		}
		responses := m{
			"200":     m{"description": desc, "content": content},
			"4XX":     errResp("Refused: ErrorBody with the error name and a message (400, 401, 403, 404, 409, 410, 413, 422, 429)."),
			"default": errResp("An error: ErrorBody with the error name and a message (503 with Retry-After when shed or not ready, 500)."),
		}
		if op.stream {
			responses["410"] = m{"description": "Gone: after_ledger_seq (or Last-Event-ID) lies below the retention horizon; the body names the horizon. An event stream instead sends a `: gone` comment and an `error` event with this body, and ends.",
				"content": m{"application/json": m{"schema": ref("GoneError")}}}
		}
		o := m{"operationId": op.id, "summary": op.summary, "tags": []string{op.tag}, "responses": responses}
		if params != nil {
			o["parameters"] = params
		}
		switch op.access {
		case anyone:
			o["security"] = []any{}
		case admin:
			o["security"] = []any{m{"adminBearer": []string{}}}
		case project:
			o["security"] = []any{m{"adminBearer": []string{}}, m{"agentBearer": []string{}, "agentProject": []string{}, "agentId": []string{}}}
		case inputWait:
			o["security"] = []any{m{"adminBearer": []string{}}, m{"agentBearer": []string{}, "agentProject": []string{}, "agentId": []string{}}, m{"inputToken": []string{}}}
		}
		if op.body != "" {
			o["requestBody"] = m{"required": !op.bodyOptional, "content": m{"application/json": m{"schema": ref(op.body)}}}
		}
		item, _ := paths[path].(m)
		if item == nil {
			item = m{}
			paths[path] = item
		}
		item[strings.ToLower(op.method)] = o
	}
	return m{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"info": m{
			"title":       "turnledger coordination API",
			"version":     "v3r1",
			"description": "The agent work coordination HTTP API (spec 000) as turnledger serves it, with its admin surface, long-poll claims and event streams. Errors have the body {error, message}.",
		},
		"servers": []any{m{"url": "http://127.0.0.1:8000"}},
		"tags": []any{
			m{"name": "Service", "description": "Health, readiness, this document and metrics."},
			m{"name": "Admin", "description": "The admin surface: bootstrap, join invites and their redemption."},
			m{"name": "Agents", "description": "Registration, credentials, agent snapshots, management and feeds."},
			m{"name": "Turns", "description": "Dispatch, snapshots, context, feeds, stop and resume."},
			m{"name": "Claims", "description": "Claiming (with long polls), renewing, records, suspend and finish."},
			m{"name": "Projections", "description": "Read-only pages: agents, offers, Turns, lineage, the project feed."},
		},
		"paths": paths,
		"components": m{
			"schemas":    schemas(),
			"parameters": parameters(),
			"securitySchemes": m{
				"adminBearer":  m{"type": "http", "scheme": "bearer", "description": "The admin bearer token (TURNLEDGER_ADMIN_TOKEN or <data>/admin-token)."},
				"agentBearer":  m{"type": "http", "scheme": "bearer", "description": "An agent credential token, with X-Svc-Project-Id and X-Svc-Agent-Id."},
				"agentProject": m{"type": "apiKey", "in": "header", "name": HeaderProject},
				"agentId":      m{"type": "apiKey", "in": "header", "name": HeaderAgent},
				"inputToken":   m{"type": "http", "scheme": "bearer", "description": "The input token a suspend for input returned (tli_…), alone: it answers that one wait, once."},
			},
		},
	}
}

// turnView is the properties of a Turn snapshot (TurnView, and SuspendResult
// which adds the input token).
func turnView() m {
	return m{
		"project_id": tStr, "turn_id": tStr, "turn_kind": tStr,
		"state":             m{"type": "string", "enum": kernel.TurnStates()},
		"outcome":           nullable(tStr),
		"stop_requested":    tBool,
		"stop_requested_at": nullable(tTime),
		"target_agent":      ref("AgentRef"), "requested_by": ref("AgentRef"),
		"input": tAny, "dispatch_key": tStr,
		"authority": closedExcept(m{"mode": m{"type": "string", "enum": []string{"root_request", "child_derivation"}}, "request_id": tStr, "parent_turn_id": tStr}, "request_id", "parent_turn_id"),
		"parent":    nullable(ref("TurnRef")), "root_turn_id": tStr, "depth": tInt,
		"claim":    nullable(closed(m{"claim_id": tStr, "agent_id": tStr, "claimed_at": tTime, "expires_at": tTime})),
		"attempts": tInt, "last_turn_seq": tSeq, "final_payload": tAny, "final_record_role": nullable(tStr),
		"priority": tPriority, "not_before": nullable(tTime), "claim_by": nullable(tTime), "deadline": nullable(tTime),
		"max_attempts": nullable(tInt), "retry_backoff": nullable(ref("Backoff")), "retry_of": nullable(tStr),
		"awaiting_input": nullable(closed(m{"prompt": tStr, "schema": nullable(tObj), "input_by": nullable(tTime)})),
		"tags":           m{"type": "array", "items": tStr},
		"context_id":     nullable(tStr),
		"created_at":     tTime, "updated_at": tTime, "finished_at": nullable(tTime), "ledger_seq": tSeq,
	}
}
