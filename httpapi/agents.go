package httpapi

import (
	"net/http"

	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

type registerBody struct {
	Spec       *kernel.SpecInput `json:"spec"`
	Provenance kernel.Provenance `json:"provenance"`
	Meta       *kernel.Meta      `json:"meta"`
	Trace      *kernel.Trace     `json:"trace"`
}

func (s *Server) registerAgent(w http.ResponseWriter, c *call) error {
	var b registerBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	if b.Spec == nil {
		return kernel.Errorf(kernel.Validation, "spec is required")
	}
	spec, err := b.Spec.Resolve("")
	if err != nil {
		return err
	}
	seq, err := s.engine.Execute(c.ctx, c.project, kernel.RegisterAgent{Common: c.common(b.Meta, b.Trace), Spec: spec, Provenance: b.Provenance})
	if err != nil {
		return err
	}
	return s.agentAfter(w, c, seq, spec.AgentID)
}

func (s *Server) agentAfter(w http.ResponseWriter, c *call, seq uint64, agentID string) error {
	if err := s.wait(c.ctx, seq); err != nil {
		return err
	}
	v, err := s.store.Agent(c.project, agentID, s.cfg.Now())
	if err != nil {
		return err
	}
	return s.ok(w, v)
}

// issued is the response of a credential issue: the summary and the token,
// which is shown this once.
type issued struct {
	Credential projection.CredentialView `json:"credential"`
	Token      string                    `json:"token"`
}

func (s *Server) credentialView(c *call, agentID, credentialID string, seq uint64) (projection.CredentialView, error) {
	if err := s.wait(c.ctx, seq); err != nil {
		return projection.CredentialView{}, err
	}
	creds, err := s.store.Credentials(c.project, agentID, s.cfg.Now())
	if err != nil {
		return projection.CredentialView{}, err
	}
	for _, v := range creds {
		if v.CredentialID == credentialID {
			return v, nil
		}
	}
	return projection.CredentialView{}, kernel.Errorf(kernel.Internal, "credential %s not projected", credentialID)
}

func (s *Server) issueCredential(w http.ResponseWriter, c *call) error {
	agent, err := c.id("agent_id")
	if err != nil {
		return err
	}
	var b contextBody
	if err := s.decode(c, &b, true); err != nil {
		return err
	}
	cred, err := s.engine.IssueCredential(c.ctx, c.project, c.common(b.Meta, b.Trace), agent)
	if err != nil {
		return err
	}
	v, err := s.credentialView(c, agent, cred.CredentialID, cred.Seq)
	if err != nil {
		return err
	}
	return s.ok(w, issued{Credential: v, Token: cred.Token})
}

func (s *Server) revokeCredential(w http.ResponseWriter, c *call) error {
	agent, err := c.id("agent_id")
	if err != nil {
		return err
	}
	cred, err := c.id("credential_id")
	if err != nil {
		return err
	}
	var b contextBody
	if err := s.decode(c, &b, true); err != nil {
		return err
	}
	seq, err := s.engine.Execute(c.ctx, c.project, kernel.RevokeCredential{Common: c.common(b.Meta, b.Trace), AgentID: agent, CredentialID: cred})
	if err != nil {
		return err
	}
	if err := s.wait(c.ctx, seq); err != nil {
		return err
	}
	return s.ok(w, map[string]bool{"ok": true})
}

func (s *Server) listCredentials(w http.ResponseWriter, c *call) error {
	agent, err := c.id("agent_id")
	if err != nil {
		return err
	}
	if _, err := s.query(c); err != nil {
		return err
	}
	if err := s.authorizeRead(c, kernel.ReadCredentials, agent); err != nil {
		return err
	}
	creds, err := s.store.Credentials(c.project, agent, s.cfg.Now())
	if err != nil {
		return err
	}
	return s.ok(w, map[string]any{"project_id": c.project, "agent_id": agent, "items": creds})
}

func (s *Server) getAgent(w http.ResponseWriter, c *call) error {
	agent, err := c.id("agent_id")
	if err != nil {
		return err
	}
	if err := s.authorizeRead(c, kernel.ReadDirectory, agent); err != nil {
		return err
	}
	v, err := s.store.Agent(c.project, agent, s.cfg.Now())
	if err != nil {
		return named(err, "agent", agent)
	}
	return s.ok(w, v)
}

// reportResult is the response of an accepted work-memory report.
type reportResult struct {
	ReportID  string `json:"report_id"`
	ProjectID string `json:"project_id"`
	AgentID   string `json:"agent_id"`
	LedgerSeq uint64 `json:"ledger_seq"`
}

func (s *Server) workMemoryReport(w http.ResponseWriter, c *call) error {
	agent, err := c.id("agent_id")
	if err != nil {
		return err
	}
	raw, err := s.raw(c)
	if err != nil {
		return err
	}
	id, seq, err := s.engine.ReportWorkMemory(c.ctx, c.project, c.common(nil, nil), agent, raw)
	if err != nil {
		return err
	}
	if err := s.wait(c.ctx, seq); err != nil {
		return err
	}
	return s.ok(w, reportResult{ReportID: id, ProjectID: c.project, AgentID: agent, LedgerSeq: seq})
}

type admissionBody struct {
	Agent       *kernel.AgentRef `json:"agent"`
	RequestedBy kernel.AgentRef  `json:"requested_by"`
	Meta        *kernel.Meta     `json:"meta"`
	Trace       *kernel.Trace    `json:"trace"`
}

func (s *Server) setAdmission(w http.ResponseWriter, c *call, drain bool) error {
	agent, err := c.id("agent_id")
	if err != nil {
		return err
	}
	var b admissionBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	if b.Agent == nil {
		return kernel.Errorf(kernel.Validation, "agent is required")
	}
	seq, err := s.engine.Execute(c.ctx, c.project, kernel.SetAgentAdmission{
		Common: c.common(b.Meta, b.Trace), AgentID: agent, Agent: b.Agent, RequestedBy: b.RequestedBy, Drain: drain,
	})
	if err != nil {
		return err
	}
	return s.agentAfter(w, c, seq, agent)
}

func (s *Server) drainAgent(w http.ResponseWriter, c *call) error { return s.setAdmission(w, c, true) }
func (s *Server) resumeAgent(w http.ResponseWriter, c *call) error {
	return s.setAdmission(w, c, false)
}

type heartbeatBody struct {
	Agent *kernel.AgentRef `json:"agent"`
	Meta  *kernel.Meta     `json:"meta"`
	Trace *kernel.Trace    `json:"trace"`
}

func (s *Server) heartbeat(w http.ResponseWriter, c *call) error {
	agent, err := c.id("agent_id")
	if err != nil {
		return err
	}
	var b heartbeatBody
	if err := s.decode(c, &b, true); err != nil {
		return err
	}
	seq, err := s.engine.Execute(c.ctx, c.project, kernel.Heartbeat{Common: c.common(b.Meta, b.Trace), AgentID: agent, Agent: b.Agent})
	if err != nil {
		return err
	}
	return s.agentAfter(w, c, seq, agent)
}

func (s *Server) replaceMetadata(w http.ResponseWriter, c *call) error {
	agent, err := c.id("agent_id")
	if err != nil {
		return err
	}
	raw, err := s.raw(c)
	if err != nil {
		return err
	}
	seq, err := s.engine.Execute(c.ctx, c.project, kernel.ReplaceMetadata{Common: c.common(nil, nil), AgentID: agent, Metadata: raw})
	if err != nil {
		return err
	}
	return s.agentAfter(w, c, seq, agent)
}

func (s *Server) agentFeed(w http.ResponseWriter, c *call) error {
	after, limit, err := s.cursor(c, "after_ledger_seq")
	if err != nil {
		return err
	}
	agent, err := c.id("agent_id")
	if err != nil {
		return err
	}
	if err := s.authorizeRead(c, kernel.ReadAgentFeed, agent); err != nil {
		return err
	}
	if wantsStream(c.r) {
		return s.streamFeed(w, c, after, limit, func(a uint64, n int) (projection.FeedPage, error) {
			fp, err := s.store.AgentFeed(c.project, agent, a, n)
			return fp, named(err, "agent", agent)
		}, func(c *call) error { return s.authorizeRead(c, kernel.ReadAgentFeed, agent) })
	}
	fp, err := s.store.RawFeed(projection.FeedOfAgent, c.project, agent, after, limit)
	if err != nil {
		return named(err, "agent", agent)
	}
	return s.feed(w, c, fp, limit)
}

func (s *Server) projectionAgents(w http.ResponseWriter, c *call) error {
	q, err := s.query(c, "agent_id", "enabled_only", "accepts_work_only", "role", "capability", "limit")
	if err != nil {
		return err
	}
	var f projection.AgentFilter
	if f.AgentID, err = q.id("agent_id"); err != nil {
		return err
	}
	if f.EnabledOnly, err = q.flag("enabled_only"); err != nil {
		return err
	}
	if f.AcceptsWorkOnly, err = q.flag("accepts_work_only"); err != nil {
		return err
	}
	f.Role, f.Capability = q.str("role"), q.str("capability")
	limit, err := s.limit(q)
	if err != nil {
		return err
	}
	if err := s.authorizeRead(c, kernel.ReadDirectory, ""); err != nil {
		return err
	}
	items, err := s.store.Agents(c.project, f, limit, s.cfg.Now())
	if err != nil {
		return err
	}
	return s.ok(w, s.page(c, items, limit))
}

func (s *Server) projectionOffers(w http.ResponseWriter, c *call) error {
	q, err := s.query(c, "turn_kind", "agent_id", "enabled_only", "accepts_work_only", "limit")
	if err != nil {
		return err
	}
	var f projection.OfferFilter
	if f.AgentID, err = q.id("agent_id"); err != nil {
		return err
	}
	if f.EnabledOnly, err = q.flag("enabled_only"); err != nil {
		return err
	}
	if f.AcceptsWorkOnly, err = q.flag("accepts_work_only"); err != nil {
		return err
	}
	f.TurnKind = q.str("turn_kind")
	limit, err := s.limit(q)
	if err != nil {
		return err
	}
	if err := s.authorizeRead(c, kernel.ReadDirectory, ""); err != nil {
		return err
	}
	items, err := s.store.TurnOffers(c.project, f, limit, s.cfg.Now())
	if err != nil {
		return err
	}
	return s.ok(w, s.page(c, items, limit))
}
