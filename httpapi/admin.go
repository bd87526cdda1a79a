package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// profileSpec is the agent spec an admin route may carry for a new agent;
// fields left out take the defaults of defaultSpec.
type profileSpec struct {
	Role           *string         `json:"role"`
	Description    string          `json:"description"`
	Enabled        *bool           `json:"enabled"`
	AcceptsWork    *bool           `json:"accepts_work"`
	Capacity       *int            `json:"capacity"`
	Capabilities   []string        `json:"capabilities"`
	Grants         []string        `json:"grants"`
	PublicMetadata json.RawMessage `json:"public_metadata"`
}

// spec fills the defaults: role "agent", enabled, accepting work, capacity 1,
// no capabilities or grants, empty public metadata.
func (p *profileSpec) spec(agentID string) kernel.AgentSpec {
	s := kernel.AgentSpec{AgentID: agentID, Role: "agent", Enabled: true, AcceptsWork: true, Capacity: 1,
		Capabilities: []string{}, Grants: []string{}, PublicMetadata: json.RawMessage(`{}`)}
	if p == nil {
		return s
	}
	if p.Role != nil {
		s.Role = *p.Role
	}
	if p.Enabled != nil {
		s.Enabled = *p.Enabled
	}
	if p.AcceptsWork != nil {
		s.AcceptsWork = *p.AcceptsWork
	}
	if p.Capacity != nil {
		s.Capacity = *p.Capacity
	}
	if p.Capabilities != nil {
		s.Capabilities = p.Capabilities
	}
	if p.Grants != nil {
		s.Grants = p.Grants
	}
	if p.PublicMetadata != nil {
		s.PublicMetadata = p.PublicMetadata
	}
	s.Description = p.Description
	return s
}

type tokensRequestBody struct {
	AgentID    string             `json:"agent_id"`
	Spec       *profileSpec       `json:"spec"`
	Provenance *kernel.Provenance `json:"provenance"`
	Meta       *kernel.Meta       `json:"meta"`
	Trace      *kernel.Trace      `json:"trace"`
}

// credentialMaterial is the response of the admin bootstrap and of a join:
// the agent's profile, the credential summary and, beside them (never inside
// the profile), the token, shown this once.
type credentialMaterial struct {
	Profile    profile                   `json:"profile"`
	Credential projection.CredentialView `json:"credential"`
	Token      string                    `json:"agent_credential_token"`
}

type profile struct {
	ProjectID   string               `json:"project_id"`
	AgentID     string               `json:"agent_id"`
	ProfileKind string               `json:"profile_kind,omitempty"`
	RuntimeKind string               `json:"runtime_kind,omitempty"`
	InviteID    string               `json:"invite_id,omitempty"`
	Agent       projection.AgentView `json:"agent"`
}

// requestCredentialTokens bootstraps an agent under admin policy: it
// registers the agent when a spec is given (or the agent is new), issues a
// credential, and returns the profile and the token once.
func (s *Server) requestCredentialTokens(w http.ResponseWriter, c *call) error {
	var b tokensRequestBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	if !kernel.ValidID(b.AgentID) {
		return kernel.Errorf(kernel.Validation, "agent_id must be 1 to 128 letters, digits, '_' or '-'")
	}
	// Whether the agent exists is read from the write model, caught up with
	// the ledger: a projection behind another instance's registration would
	// have the agent re-registered with the default spec.
	exists := false
	if err := s.engine.View(c.ctx, c.project, func(p *kernel.Project) error {
		exists = p.Agents[b.AgentID] != nil
		return nil
	}); err != nil {
		return err
	}
	if b.Spec != nil || !exists {
		prov := kernel.Provenance{Kind: "admin_bootstrap"}
		if b.Provenance != nil {
			prov = *b.Provenance
		}
		if _, err := s.engine.Execute(c.ctx, c.project, kernel.RegisterAgent{
			Common: c.common(b.Meta, b.Trace), Spec: b.Spec.spec(b.AgentID), Provenance: prov,
		}); err != nil {
			return err
		}
	}
	cred, err := s.engine.IssueCredential(c.ctx, c.project, c.common(b.Meta, b.Trace), b.AgentID, "bootstrap")
	if err != nil {
		return err
	}
	return s.material(w, c, c.project, cred, profile{})
}

func (s *Server) material(w http.ResponseWriter, c *call, project string, cred kernel.IssuedCredential, p profile) error {
	c.project = project
	v, err := s.credentialView(c, cred.AgentID, cred.CredentialID, cred.Seq)
	if err != nil {
		return err
	}
	agent, err := s.store.Agent(project, cred.AgentID, s.cfg.Now())
	if err != nil {
		return err
	}
	p.ProjectID, p.AgentID, p.Agent = project, cred.AgentID, agent
	return s.ok(w, credentialMaterial{Profile: p, Credential: v, Token: cred.Token})
}

type inviteBody struct {
	AgentID          string        `json:"agent_id"`
	ProfileKind      string        `json:"profile_kind"`
	RuntimeKind      string        `json:"runtime_kind"`
	ExpiresInSeconds *int64        `json:"expires_in_seconds"`
	SingleUse        *bool         `json:"single_use"`
	Spec             *profileSpec  `json:"spec"`
	Meta             *kernel.Meta  `json:"meta"`
	Trace            *kernel.Trace `json:"trace"`
}

// inviteView is the Join invite of the contract.
type inviteView struct {
	InviteID    string    `json:"invite_id"`
	ProjectID   string    `json:"project_id"`
	AgentID     string    `json:"agent_id"`
	ProfileKind string    `json:"profile_kind"`
	RuntimeKind string    `json:"runtime_kind"`
	ExpiresAt   time.Time `json:"expires_at"`
	SingleUse   bool      `json:"single_use"`
}

func (s *Server) createInvite(w http.ResponseWriter, c *call) error {
	var b inviteBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	single := true
	if b.SingleUse != nil {
		single = *b.SingleUse
	}
	var ttl time.Duration
	if b.ExpiresInSeconds != nil {
		if *b.ExpiresInSeconds < 1 || *b.ExpiresInSeconds > int64(s.engine.Config().MaxInviteTTL/time.Second) {
			return kernel.Errorf(kernel.Validation, "expires_in_seconds must be between 1 and %d", int64(s.engine.Config().MaxInviteTTL/time.Second))
		}
		ttl = time.Duration(*b.ExpiresInSeconds) * time.Second
	}
	created, err := s.engine.CreateInvite(c.ctx, c.project, c.common(b.Meta, b.Trace), kernel.InviteCreated{
		AgentID: b.AgentID, ProfileKind: b.ProfileKind, RuntimeKind: b.RuntimeKind, SingleUse: single, Spec: b.Spec.spec(b.AgentID),
	}, ttl)
	if err != nil {
		return err
	}
	if err := s.wait(c.ctx, created.Seq); err != nil {
		return err
	}
	inv := created.Invite
	return s.ok(w, map[string]any{
		"invite": inviteView{InviteID: inv.InviteID, ProjectID: c.project, AgentID: inv.AgentID, ProfileKind: inv.ProfileKind,
			RuntimeKind: inv.RuntimeKind, ExpiresAt: inv.ExpiresAt, SingleUse: inv.SingleUse},
		"join_code": created.Code,
	})
}

type redeemBody struct {
	JoinCode string `json:"join_code"`
}

func (s *Server) redeemJoin(w http.ResponseWriter, c *call) error {
	var b redeemBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	if b.JoinCode == "" {
		return kernel.Errorf(kernel.Validation, "join_code is required")
	}
	// The caller of a redeem is whoever holds the code: keys are scoped to it.
	res, err := s.engine.RedeemInviteKeyed(c.ctx, kernel.Common{Idem: c.idempotency("join:" + kernel.HashSecret(b.JoinCode))}, b.JoinCode)
	if err != nil {
		return err
	}
	return s.material(w, c, res.ProjectID, res.Credential, profile{
		ProfileKind: res.Invite.ProfileKind, RuntimeKind: res.Invite.RuntimeKind, InviteID: res.Invite.InviteID,
	})
}
