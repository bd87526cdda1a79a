package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
	"github.com/turnledger/turnledger/internal/jsonhttp"
)

// Who may call a route: it picks the route's wrapper (server.go) and its
// security in the OpenAPI document.
type access int

const (
	anyone    access = iota // no credentials
	admin                   // the admin bearer
	project                 // an agent (three headers) or the admin bearer
	inputWait               // as project, or an input token alone (Authorization: Bearer tli_…)
)

// route is one route of the API, declared once: the router serves it, the
// OpenAPI document describes it (openapi.go) and docs/api.md is checked
// against it (apidoc_test.go).
type route struct {
	method string
	path   string // httprouter syntax, the last segment may end in a custom verb: "/turns/:turn_id:resume"
	access access // who may call it
	handle handler

	// The OpenAPI operation.
	tag, id, summary string
	query            []string // names of components/parameters
	body             string   // request schema; "" when none
	bodyOptional     bool     // an empty body is accepted
	resp             m        // schema of the 200 body
	respType         string   // content type of the 200 body; default application/json
	stream           bool     // also answers text/event-stream
}

// routes is the route table: every route of the coordination API and the
// admin surface, once. The document's groups (tag) are docs/api.md's
// sections.
func (s *Server) routes() []route {
	const p = "/v3r1/projects/:project_id"
	return []route{
		{method: http.MethodGet, path: "/healthz", access: anyone, handle: s.healthz,
			tag: "Service", id: "healthz", summary: "Liveness check.",
			resp: ref("Health")},
		{method: http.MethodGet, path: "/readyz", access: anyone, handle: s.readyz,
			tag: "Service", id: "readyz", summary: "Readiness: backend, projections and claim-reaper settings; 503 when not ready.",
			resp: m{"type": "object", "required": []string{"status"}, "properties": m{"status": m{"type": "string", "enum": []string{"ready", "not_ready"}}}}},
		{method: http.MethodGet, path: "/openapi.json", access: anyone, handle: s.openapi,
			tag: "Service", id: "openapi", summary: "This document.",
			resp: m{"type": "object"}},
		{method: http.MethodGet, path: "/metrics", access: anyone, handle: s.metrics,
			tag: "Service", id: "metrics", summary: "Prometheus metrics (text exposition format); from loopback only unless configured otherwise.",
			resp: m{"type": "string"}, respType: "text/plain"},

		// Admin surface.
		{method: http.MethodGet, path: "/admin/v1/projects", access: admin, handle: s.listProjects,
			tag: "Admin", id: "listProjects", summary: "Every project with an event in the projections (admin).",
			resp: closed(m{"items": m{"type": "array", "items": closed(m{"project_id": tStr})}, "diagnostics": m{"type": "array", "items": ref("Diagnostic")}})},
		{method: http.MethodGet, path: "/admin/v1/trends", access: admin, handle: s.trends,
			tag: "Admin", id: "getTrends", summary: "The last hour of this instance, a point a minute: Turns dispatched and finished by outcome, queued and waiting for input, claim wait and run time p50/p95, projection lag, commands shed or throttled (admin).",
			resp: trendsSchema()},
		{method: http.MethodPost, path: "/admin/v1/projects/:project_id/agent-credential-tokens:request", access: admin, handle: s.requestCredentialTokens,
			tag: "Admin", id: "requestAgentCredentialTokens", summary: "Bootstrap an agent's profile (registering it when new or when a spec is given) and issue a one-time credential.",
			body: "TokensRequestBody", resp: ref("CredentialMaterial")},
		{method: http.MethodPost, path: "/admin/v1/projects/:project_id/agent-join-invites", access: admin, handle: s.createInvite,
			tag: "Admin", id: "createJoinInvite", summary: "Create a scoped join invite; the join code is returned once.",
			body: "InviteBody", resp: ref("InviteCreated")},
		{method: http.MethodPost, path: "/admin/v1/agent-joins:redeem", access: anyone, handle: s.redeemJoin,
			tag: "Admin", id: "redeemJoin", summary: "Redeem a join code: profile metadata and a one-time agent credential token.",
			body: "RedeemBody", resp: ref("CredentialMaterial")},
		{method: http.MethodPost, path: "/admin/v1/byoa/join:redeem", access: anyone, handle: s.redeemJoin,
			tag: "Admin", id: "redeemJoinByoa", summary: "Compatibility alias of /admin/v1/agent-joins:redeem.",
			body: "RedeemBody", resp: ref("CredentialMaterial")},

		// Agents and credentials.
		{method: http.MethodPost, path: p + "/agents:register", access: project, handle: s.registerAgent,
			tag: "Agents", id: "registerAgent", summary: "Register an agent or replace its spec (the agents:register grant, or the admin).",
			body: "RegisterBody", resp: ref("AgentView")},
		{method: http.MethodPost, path: p + "/agents/:agent_id/credentials:issue", access: project, handle: s.issueCredential,
			tag: "Agents", id: "issueCredential", summary: "Issue a credential; the token is returned once.",
			body: "ContextBody", bodyOptional: true, resp: ref("IssuedCredential")},
		{method: http.MethodPost, path: p + "/agents/:agent_id/credentials/:credential_id:revoke", access: project, handle: s.revokeCredential,
			tag: "Agents", id: "revokeCredential", summary: "Revoke a credential.",
			body: "ContextBody", bodyOptional: true, resp: ref("Ok")},
		{method: http.MethodGet, path: p + "/agents/:agent_id/credentials", access: project, handle: s.listCredentials,
			tag: "Agents", id: "listCredentials", summary: "List an agent's credentials (its own, or with credentials:admin).",
			resp: ref("CredentialList")},
		{method: http.MethodGet, path: p + "/agents/:agent_id", access: project, handle: s.getAgent,
			tag: "Agents", id: "getAgent", summary: "The agent truth snapshot.",
			resp: ref("AgentView")},
		{method: http.MethodPost, path: p + "/agents/:agent_id/work-memory-reports", access: project, handle: s.workMemoryReport,
			tag: "Agents", id: "submitWorkMemoryReport", summary: "Submit a work-memory report manifest as the agent.",
			body: "WorkMemoryReport", resp: ref("ReportResult")},
		{method: http.MethodPost, path: p + "/management/agents/:agent_id:drain", access: project, handle: s.drainAgent,
			tag: "Agents", id: "drainAgent", summary: "Stop admitting new Turns to the agent.",
			body: "AdmissionBody", resp: ref("AgentView")},
		{method: http.MethodPost, path: p + "/management/agents/:agent_id:resume", access: project, handle: s.resumeAgent,
			tag: "Agents", id: "resumeAgent", summary: "Admit new Turns to the agent again.",
			body: "AdmissionBody", resp: ref("AgentView")},
		{method: http.MethodPost, path: p + "/management/agents/:agent_id:heartbeat-presence", access: project, handle: s.heartbeat,
			tag: "Agents", id: "heartbeatPresence", summary: "Record the agent's presence.",
			body: "HeartbeatBody", bodyOptional: true, resp: ref("AgentView")},
		{method: http.MethodPut, path: p + "/management/agents/:agent_id/public-metadata", access: project, handle: s.replaceMetadata,
			tag: "Agents", id: "replacePublicMetadata", summary: "Replace the agent's public metadata (the body is the new metadata object).",
			body: "PublicMetadata", resp: ref("AgentView")},
		{method: http.MethodGet, path: p + "/agents/:agent_id/feed", access: project, handle: s.agentFeed,
			tag: "Agents", id: "agentFeed", summary: "The agent's ledger feed; with Accept: text/event-stream, a live stream of it.",
			query: []string{"after_ledger_seq", "limit"}, resp: ref("FeedPage"), stream: true},

		// Turns.
		{method: http.MethodPost, path: p + "/turns:dispatch", access: project, handle: s.dispatch,
			tag: "Turns", id: "dispatchTurn", summary: "Dispatch a root or child Turn.",
			body: "DispatchBody", resp: ref("TurnView")},
		{method: http.MethodGet, path: p + "/turns/:turn_id", access: project, handle: s.getTurn,
			tag: "Turns", id: "getTurn", summary: "The Turn snapshot.",
			resp: ref("TurnView")},
		{method: http.MethodGet, path: p + "/turns/:turn_id/context", access: project, handle: s.turnContext,
			tag: "Turns", id: "turnContext", summary: "The Turn's semantic context, by turn_seq.",
			query: []string{"after_turn_seq", "limit"}, resp: ref("ContextPage")},
		{method: http.MethodGet, path: p + "/turns/:turn_id/feed", access: project, handle: s.turnFeed,
			tag: "Turns", id: "turnFeed", summary: "The Turn's ledger feed; with Accept: text/event-stream, a live stream of it.",
			query: []string{"after_ledger_seq", "limit"}, resp: ref("FeedPage"), stream: true},
		{method: http.MethodPost, path: p + "/management/turns/:turn_id:stop", access: project, handle: s.stopTurn,
			tag: "Turns", id: "stopTurn", summary: "Request a stop of the Turn; with cascade, of it and every descendant not finished, all or none.",
			body: "StopBody", resp: ref("TurnView")},
		{method: http.MethodPost, path: p + "/turns/:turn_id:retry", access: project, handle: s.retryTurn,
			tag: "Turns", id: "retryTurn", summary: "Dispatch a new Turn from a finished one whose outcome is failed, dead, expired, timed_out or stopped.",
			body: "RequestedByBody", resp: ref("TurnView")},
		{method: http.MethodPost, path: p + "/management/turns:bulk-stop", access: project, handle: s.bulkStop,
			tag: "Turns", id: "bulkStopTurns", summary: "Stop the Turns not finished that match a filter, oldest first, up to limit; call again to go on ([management]).",
			body: "BulkBody", resp: closed(m{"stopped": tStrList, "has_more": tBool})},
		{method: http.MethodPost, path: p + "/management/turns:bulk-retry", access: project, handle: s.bulkRetry,
			tag: "Turns", id: "bulkRetryTurns", summary: "Retry the finished Turns that match a filter and that :retry accepts, oldest first, up to limit; answers the new Turns ([management]).",
			body: "BulkBody", resp: closed(m{"retried": tStrList, "has_more": tBool})},
		{method: http.MethodPost, path: p + "/turns/:turn_id:provide-input", access: inputWait, handle: s.provideInput,
			tag: "Turns", id: "provideTurnInput", summary: "Answer a Turn suspended for input: with its input token alone, or as its requester or a management agent. The Turn goes back to its queue with the input as a semantic record.",
			body: "ProvideInputBody", resp: ref("TurnView")},
		{method: http.MethodPost, path: p + "/turns/:turn_id:resume", access: project, handle: s.resumeTurn,
			tag: "Turns", id: "resumeTurn", summary: "Resume a suspended Turn.",
			body: "RequestedByBody", resp: ref("TurnView")},

		// Claims.
		{method: http.MethodPost, path: p + "/agents/:agent_id/claims:claim", access: project, handle: s.claim,
			tag: "Claims", id: "claimTurn", summary: "Claim the next available Turn for the agent; null when none. With wait, hold the request until one is available or the wait ends.",
			query: []string{"wait"}, body: "ClaimBody", resp: m{"anyOf": []any{ref("ClaimResult"), m{"type": "null"}}}},
		{method: http.MethodPost, path: p + "/claims:renew", access: project, handle: s.renew,
			tag: "Claims", id: "renewClaim", summary: "Renew an active claim by its lease (the claim TTL, the agent's claim_ttl_s, or the lease_s it asked).",
			body: "FencedBody", resp: ref("RenewResult")},
		{method: http.MethodPost, path: p + "/claims:release", access: project, handle: s.releaseClaim,
			tag: "Claims", id: "releaseClaim", summary: "Hand a live claim back (a worker that stops gracefully): the Turn goes back to its old place in the queue, the attempt not counted.",
			body: "FencedBody", resp: ref("TurnView")},
		{method: http.MethodPost, path: p + "/claims:reconcile-expired", access: project, handle: s.reconcileExpired,
			tag: "Claims", id: "reconcileExpiredClaims", summary: "Release the project's expired claims.",
			body: "ContextBody", bodyOptional: true, resp: ref("ReconcileResult")},
		{method: http.MethodPost, path: p + "/turns/:turn_id/semantic-records", access: project, handle: s.appendRecord,
			tag: "Claims", id: "appendSemanticRecord", summary: "Append a semantic record under the active claim.",
			body: "RecordBody", resp: ref("RecordResult")},
		{method: http.MethodPost, path: p + "/turns/:turn_id:suspend", access: project, handle: s.suspend,
			tag: "Claims", id: "suspendTurn", summary: "Suspend the claimed Turn (the claim is released).",
			body: "SuspendBody", resp: ref("SuspendResult")},
		{method: http.MethodPost, path: p + "/turns/:turn_id:finish", access: project, handle: s.finish,
			tag: "Claims", id: "finishTurn", summary: "Finish the claimed Turn with an outcome.",
			body: "FinishBody", resp: ref("TurnView")},

		// Projections.
		{method: http.MethodGet, path: p + "/projection/agents", access: project, handle: s.projectionAgents,
			tag: "Projections", id: "listAgents", summary: "Agent directory entries.",
			query: []string{"agent_id_filter", "enabled_only", "accepts_work_only", "role", "capability", "limit"}, resp: ref("AgentPage")},
		{method: http.MethodGet, path: p + "/projection/turn-offers", access: project, handle: s.projectionOffers,
			tag: "Projections", id: "listTurnOffers", summary: "Canonical Turn offers: one per (agent, capability).",
			query: []string{"turn_kind", "agent_id_filter", "enabled_only", "accepts_work_only", "limit"}, resp: ref("OfferPage")},
		{method: http.MethodGet, path: p + "/projection/turns", access: project, handle: s.projectionTurns,
			tag: "Projections", id: "listTurns", summary: "Projected Turns in dispatch order, oldest first unless order=newest; after_ledger_seq is the cursor (a dispatch ledger_seq), which goes on in the order asked for.",
			query: []string{"target_agent_id", "turn_kind", "state", "outcome", "priority", "awaiting_input", "tag", "context_id", "stop_requested_only", "after_ledger_seq", "order", "limit"}, resp: ref("TurnPage")},
		{method: http.MethodGet, path: p + "/projection/turns/:turn_id/lineage", access: project, handle: s.lineage,
			tag: "Projections", id: "turnLineage", summary: "The Turn's lineage: ancestors, itself, descendants.",
			query: []string{"limit"}, resp: ref("LineagePage")},
		{method: http.MethodGet, path: p + "/projection/feed", access: project, handle: s.projectFeed,
			tag: "Projections", id: "projectFeed", summary: "The project's ledger feed; with Accept: text/event-stream, a live stream of it.",
			query: []string{"after_ledger_seq", "limit"}, resp: ref("FeedPage"), stream: true},
	}
}

// handleRoutes registers every route of the table on the router, each
// handler behind the wrapper of its access and observed (metrics.go).
func (s *Server) handleRoutes() {
	for _, rt := range s.routes() {
		s.router.Handle(rt.method, rt.path, s.observed(rt.id, rt.method, s.guard(rt.access, rt.handle)))
	}
}

// guard wraps a handler in the wrapper of who may call it.
func (s *Server) guard(a access, h handler) httprouter.Handle {
	switch a {
	case anyone:
		return s.public(h)
	case admin:
		return s.admin(h)
	case inputWait:
		return s.projectRoute(h, true)
	}
	return s.project(h)
}

func (s *Server) healthz(w http.ResponseWriter, c *call) error {
	return s.ok(w, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, c *call) error {
	if s.cfg.Ready == nil {
		return s.ok(w, map[string]string{"status": "ready"})
	}
	report, ready := s.cfg.Ready(c.ctx)
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	jsonhttp.Write(w, status, report)
	return nil
}
