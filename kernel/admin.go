package kernel

import (
	"encoding/json"
	"time"
)

// How a credential came to be: the via of its summary.
const (
	ViaIssue     = "issue"     // credentials:issue (POST .../credentials)
	ViaBootstrap = "bootstrap" // the admin's agent-credential-tokens:request
	ViaJoin      = "join"      // a redeemed join invite
)

// Provenance kinds the service itself writes.
const (
	// ProvenanceAdminBootstrap is the provenance of an agent registered by
	// the admin's bootstrap when the request names none.
	ProvenanceAdminBootstrap = "admin_bootstrap"
	// ProvenanceJoinInvite is the provenance of an agent registered by
	// redeeming a join invite; its external_ref is the invite id.
	ProvenanceJoinInvite = "join_invite"
)

// Agent spec defaults: what a field left out of a SpecInput takes.
const (
	DefaultRole     = "agent"
	DefaultCapacity = 1
)

// SpecInput is the agent spec as every route takes it: agents:register,
// agent-credential-tokens:request and agent-join-invites. Fields left out take
// the defaults (role "agent", enabled, accepting work, capacity 1, no
// capabilities or grants, empty public metadata). agent_id may be left out
// where the request names the agent outside the spec; when given, it must be
// that agent.
type SpecInput struct {
	AgentID        string          `json:"agent_id"`
	Role           *string         `json:"role"`
	Description    string          `json:"description"`
	Enabled        *bool           `json:"enabled"`
	AcceptsWork    *bool           `json:"accepts_work"`
	Capacity       *int            `json:"capacity"`
	Capabilities   []string        `json:"capabilities"`
	Grants         []string        `json:"grants"`
	PublicMetadata json.RawMessage `json:"public_metadata"`
}

// Resolve returns the spec of the agent agentID (empty when the request names
// the agent only inside the spec) with the defaults filled in. A nil input is
// the default spec. It does not validate the spec: Decide does.
func (in *SpecInput) Resolve(agentID string) (AgentSpec, error) {
	s := AgentSpec{AgentID: agentID, Role: DefaultRole, Enabled: true, AcceptsWork: true, Capacity: DefaultCapacity,
		Capabilities: []string{}, Grants: []string{}, PublicMetadata: json.RawMessage(`{}`)}
	if in == nil {
		return s, nil
	}
	switch {
	case agentID == "":
		s.AgentID = in.AgentID
	case in.AgentID != "" && in.AgentID != agentID:
		return AgentSpec{}, invalid("spec.agent_id %q differs from agent_id %q: leave spec.agent_id out or make them equal", in.AgentID, agentID)
	}
	if in.Role != nil {
		s.Role = *in.Role
	}
	if in.Enabled != nil {
		s.Enabled = *in.Enabled
	}
	if in.AcceptsWork != nil {
		s.AcceptsWork = *in.AcceptsWork
	}
	if in.Capacity != nil {
		s.Capacity = *in.Capacity
	}
	if in.Capabilities != nil {
		s.Capabilities = in.Capabilities
	}
	if in.Grants != nil {
		s.Grants = in.Grants
	}
	if in.PublicMetadata != nil {
		s.PublicMetadata = in.PublicMetadata
	}
	s.Description = in.Description
	return s, nil
}

// Bootstrap is the admin's agent-credential-tokens:request: it registers the
// agent when Spec is given or the agent is new (with the default spec then),
// and issues a credential whose token hashes to TokenHash. Its outcome is one
// credential.issued event that carries the registration, so the two halves
// land together or not at all.
type Bootstrap struct {
	Common
	AgentID      string
	Spec         *SpecInput  // nil: keep the agent's spec, or the default one for a new agent
	Provenance   *Provenance // nil: admin_bootstrap
	CredentialID string
	TokenHash    string
	ExpiresAt    time.Time
}

func (d decider) bootstrap(cmd Bootstrap) (*Event, error) {
	if err := d.p.require(d.c.Caller, d.now, GrantCredentialIssue); err != nil {
		return nil, err
	}
	if !ValidID(cmd.AgentID) {
		return nil, invalid("agent_id must be 1 to 128 letters, digits, '_' or '-'")
	}
	if !cmd.ExpiresAt.After(d.now) {
		return nil, invalid("a credential must expire after it is issued")
	}
	ev := &CredentialIssued{CredentialID: cmd.CredentialID, AgentID: cmd.AgentID, TokenHash: cmd.TokenHash,
		ExpiresAt: cmd.ExpiresAt.UTC(), Via: ViaBootstrap}
	if cmd.Spec != nil || d.p.Agents[cmd.AgentID] == nil {
		spec, err := cmd.Spec.Resolve(cmd.AgentID)
		if err != nil {
			return nil, err
		}
		prov := Provenance{Kind: ProvenanceAdminBootstrap}
		if cmd.Provenance != nil {
			prov = *cmd.Provenance
		}
		reg, err := d.register(RegisterAgent{Common: d.c, Spec: spec, Provenance: prov})
		if err != nil {
			return nil, err
		}
		ev.Registration = reg.Data.(*AgentRegistered)
	}
	return d.event(EvCredentialIssued, AggCredential, cmd.CredentialID, ev), nil
}

// InviteRequest is what the admin asks of a new join invite; the defaults
// and bounds are applied by Engine.CreateInvite.
type InviteRequest struct {
	AgentID          string
	ProfileKind      string
	RuntimeKind      string
	ExpiresInSeconds *int64 // nil: Config.InviteTTL; at most Config.MaxInviteTTL
	SingleUse        *bool  // nil: true
	Spec             *SpecInput
}

// invite resolves the request into the invite's data (without id, code hash
// and expiry) and its lifetime.
func (r InviteRequest) invite(cfg Config) (InviteCreated, time.Duration, error) {
	ttl := cfg.InviteTTL
	if r.ExpiresInSeconds != nil {
		max := int64(cfg.MaxInviteTTL / time.Second)
		if *r.ExpiresInSeconds < 1 || *r.ExpiresInSeconds > max {
			return InviteCreated{}, 0, invalid("expires_in_seconds must be between 1 and %d", max)
		}
		ttl = time.Duration(*r.ExpiresInSeconds) * time.Second
	}
	single := true
	if r.SingleUse != nil {
		single = *r.SingleUse
	}
	spec, err := r.Spec.Resolve(r.AgentID)
	if err != nil {
		return InviteCreated{}, 0, err
	}
	return InviteCreated{AgentID: r.AgentID, ProfileKind: r.ProfileKind, RuntimeKind: r.RuntimeKind, SingleUse: single, Spec: spec}, ttl, nil
}
