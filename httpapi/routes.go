package httpapi

import (
	"net/http"

	"github.com/turnledger/turnledger/internal/jsonhttp"
)

// routes registers every route of the coordination API.
func (s *Server) routes() {
	r := registrar{s} // s.router, with each handler observed (metrics.go)
	const p = "/v3r1/projects/:project_id"

	r.Handle(http.MethodGet, "/healthz", s.public(s.healthz))
	r.Handle(http.MethodGet, "/readyz", s.public(s.readyz))
	r.Handle(http.MethodGet, "/openapi.json", s.public(s.openapi))
	r.Handle(http.MethodGet, "/metrics", s.public(s.metrics))

	// Admin surface.
	r.Handle(http.MethodGet, "/admin/v1/projects", s.admin(s.listProjects))
	r.Handle(http.MethodPost, "/admin/v1/projects/:project_id/agent-credential-tokens:request", s.admin(s.requestCredentialTokens))
	r.Handle(http.MethodPost, "/admin/v1/projects/:project_id/agent-join-invites", s.admin(s.createInvite))
	r.Handle(http.MethodPost, "/admin/v1/agent-joins:redeem", s.public(s.redeemJoin))
	r.Handle(http.MethodPost, "/admin/v1/byoa/join:redeem", s.public(s.redeemJoin))

	// Agents and credentials.
	r.Handle(http.MethodPost, p+"/agents:register", s.project(s.registerAgent))
	r.Handle(http.MethodPost, p+"/agents/:agent_id/credentials:issue", s.project(s.issueCredential))
	r.Handle(http.MethodPost, p+"/agents/:agent_id/credentials/:credential_id:revoke", s.project(s.revokeCredential))
	r.Handle(http.MethodGet, p+"/agents/:agent_id/credentials", s.project(s.listCredentials))
	r.Handle(http.MethodGet, p+"/agents/:agent_id", s.project(s.getAgent))
	r.Handle(http.MethodPost, p+"/agents/:agent_id/work-memory-reports", s.project(s.workMemoryReport))
	r.Handle(http.MethodPost, p+"/management/agents/:agent_id:drain", s.project(s.drainAgent))
	r.Handle(http.MethodPost, p+"/management/agents/:agent_id:resume", s.project(s.resumeAgent))
	r.Handle(http.MethodPost, p+"/management/agents/:agent_id:heartbeat-presence", s.project(s.heartbeat))
	r.Handle(http.MethodPut, p+"/management/agents/:agent_id/public-metadata", s.project(s.replaceMetadata))
	r.Handle(http.MethodGet, p+"/agents/:agent_id/feed", s.project(s.agentFeed))

	// Turns.
	r.Handle(http.MethodPost, p+"/turns:dispatch", s.project(s.dispatch))
	r.Handle(http.MethodGet, p+"/turns/:turn_id", s.project(s.getTurn))
	r.Handle(http.MethodGet, p+"/turns/:turn_id/context", s.project(s.turnContext))
	r.Handle(http.MethodGet, p+"/turns/:turn_id/feed", s.project(s.turnFeed))
	r.Handle(http.MethodPost, p+"/management/turns/:turn_id:stop", s.project(s.stopTurn))
	r.Handle(http.MethodPost, p+"/turns/:turn_id:resume", s.project(s.resumeTurn))

	// Claims.
	r.Handle(http.MethodPost, p+"/agents/:agent_id/claims:claim", s.project(s.claim))
	r.Handle(http.MethodPost, p+"/claims:renew", s.project(s.renew))
	r.Handle(http.MethodPost, p+"/claims:reconcile-expired", s.project(s.reconcileExpired))
	r.Handle(http.MethodPost, p+"/turns/:turn_id/semantic-records", s.project(s.appendRecord))
	r.Handle(http.MethodPost, p+"/turns/:turn_id:suspend", s.project(s.suspend))
	r.Handle(http.MethodPost, p+"/turns/:turn_id:finish", s.project(s.finish))

	// Projections.
	r.Handle(http.MethodGet, p+"/projection/agents", s.project(s.projectionAgents))
	r.Handle(http.MethodGet, p+"/projection/turn-offers", s.project(s.projectionOffers))
	r.Handle(http.MethodGet, p+"/projection/turns", s.project(s.projectionTurns))
	r.Handle(http.MethodGet, p+"/projection/turns/:turn_id/lineage", s.project(s.lineage))
	r.Handle(http.MethodGet, p+"/projection/feed", s.project(s.projectFeed))
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
