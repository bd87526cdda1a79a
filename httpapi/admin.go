package httpapi

import (
	"net/http"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

type tokensRequestBody struct {
	AgentID    string             `json:"agent_id"`
	Spec       *kernel.SpecInput  `json:"spec"`
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

// requestCredentialTokens bootstraps an agent under admin policy: one
// kernel command registers the agent when a spec is given (or the agent is
// new) and issues a credential; the profile and the token are returned once.
func (s *Server) requestCredentialTokens(w http.ResponseWriter, c *call) error {
	var b tokensRequestBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	cred, err := s.engine.Bootstrap(c.ctx, c.project, kernel.Bootstrap{
		Common: c.common(b.Meta, b.Trace), AgentID: b.AgentID, Spec: b.Spec, Provenance: b.Provenance,
	})
	if err != nil {
		return err
	}
	return s.material(w, c, c.project, cred, profile{})
}

func (s *Server) material(w http.ResponseWriter, c *call, project string, cred engine.IssuedCredential, p profile) error {
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
	AgentID          string            `json:"agent_id"`
	ProfileKind      string            `json:"profile_kind"`
	RuntimeKind      string            `json:"runtime_kind"`
	ExpiresInSeconds *int64            `json:"expires_in_seconds"`
	SingleUse        *bool             `json:"single_use"`
	Spec             *kernel.SpecInput `json:"spec"`
	Meta             *kernel.Meta      `json:"meta"`
	Trace            *kernel.Trace     `json:"trace"`
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
	created, err := s.engine.CreateInvite(c.ctx, c.project, c.common(b.Meta, b.Trace), kernel.InviteRequest{
		AgentID: b.AgentID, ProfileKind: b.ProfileKind, RuntimeKind: b.RuntimeKind,
		ExpiresInSeconds: b.ExpiresInSeconds, SingleUse: b.SingleUse, Spec: b.Spec,
	})
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
