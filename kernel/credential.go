package kernel

import "time"

// Event types of the credential aggregate. The name is written here once and never
// derived from a Go type.
const (
	EvCredentialIssued  = "credential.issued"
	EvCredentialRevoked = "credential.revoked"
)

// credentialEvents is the codec's table of the credential events: type and version, with the Go
// type of their data.
var credentialEvents = map[codecKey]eventType{
	{EvCredentialIssued, 1}:  {AggCredential, func() any { return new(CredentialIssued) }},
	{EvCredentialRevoked, 1}: {AggCredential, func() any { return new(CredentialRevoked) }},
}

// How a credential came to be: the via of its summary.
const (
	ViaIssue     = "issue"     // credentials:issue (POST .../credentials)
	ViaBootstrap = "bootstrap" // the admin's agent-credential-tokens:request
	ViaJoin      = "join"      // a redeemed join invite
)

// Credential is one credential as the events made it.
type Credential struct {
	ID        string
	AgentID   string
	TokenHash string
	Via       string // ViaIssue, ViaBootstrap or ViaJoin
	IssuedAt  time.Time
	IssuedSeq uint64
	ExpiresAt time.Time
	Revoked   bool
	RevokedAt *time.Time
}

// Active reports whether the credential may authenticate at now.
func (c *Credential) Active(now time.Time) bool { return !c.Revoked && now.Before(c.ExpiresAt) }

// CredentialIssued: a credential was issued. Only the token's hash is kept.
type CredentialIssued struct {
	CredentialID string    `json:"credential_id"`
	AgentID      string    `json:"agent_id"`
	TokenHash    string    `json:"token_hash"`
	ExpiresAt    time.Time `json:"expires_at"`
	Via          string    `json:"via,omitempty"` // ViaIssue (when empty), ViaBootstrap or ViaJoin
	// Registration, when set, registered the agent (or replaced its spec)
	// in the same event, before the credential: the admin's bootstrap.
	Registration *AgentRegistered `json:"registration,omitempty"`
}

// CredentialRevoked: a credential stopped working.
type CredentialRevoked struct {
	CredentialID string `json:"credential_id"`
	AgentID      string `json:"agent_id"`
}

// IssueCredential issues a credential whose token hashes to TokenHash.
type IssueCredential struct {
	Common
	AgentID      string
	CredentialID string
	TokenHash    string
	ExpiresAt    time.Time
}

// Name is the command's stable name (see Command).
func (IssueCredential) Name() string { return "issue_credential" }

func (cmd IssueCredential) decide(d decider) (*Event, error) {
	if err := d.p.require(d.c.Caller, d.now, GrantCredentialIssue); err != nil {
		return nil, err
	}
	if _, err := d.agent(cmd.AgentID); err != nil {
		return nil, err
	}
	if !cmd.ExpiresAt.After(d.now) {
		return nil, invalid("a credential must expire after it is issued")
	}
	return d.event(EvCredentialIssued, AggCredential, cmd.CredentialID, &CredentialIssued{
		CredentialID: cmd.CredentialID, AgentID: cmd.AgentID, TokenHash: cmd.TokenHash, ExpiresAt: cmd.ExpiresAt.UTC(), Via: ViaIssue,
	}), nil
}

// RevokeCredential revokes a credential; revoking a revoked one does nothing.
type RevokeCredential struct {
	Common
	AgentID      string
	CredentialID string
}

// Name is the command's stable name (see Command).
func (RevokeCredential) Name() string { return "revoke_credential" }

func (cmd RevokeCredential) decide(d decider) (*Event, error) {
	if err := d.p.requireSelfOr(d.c.Caller, d.now, cmd.AgentID, GrantCredentialAdmin); err != nil {
		return nil, err
	}
	if _, err := d.agent(cmd.AgentID); err != nil {
		return nil, err
	}
	cred := d.p.Credentials[cmd.CredentialID]
	if cred == nil || cred.AgentID != cmd.AgentID {
		return nil, Errorf(NotFound, "credential %s of agent %s not found", cmd.CredentialID, cmd.AgentID)
	}
	if cred.Revoked {
		return nil, nil
	}
	return d.event(EvCredentialRevoked, AggCredential, cred.ID, &CredentialRevoked{CredentialID: cred.ID, AgentID: cred.AgentID}), nil
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

// Name is the command's stable name (see Command).
func (Bootstrap) Name() string { return "bootstrap" }

func (cmd Bootstrap) decide(d decider) (*Event, error) {
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
		reg, err := RegisterAgent{Common: d.c, Spec: spec, Provenance: prov}.decide(d)
		if err != nil {
			return nil, err
		}
		ev.Registration = reg.Data.(*AgentRegistered)
	}
	return d.event(EvCredentialIssued, AggCredential, cmd.CredentialID, ev), nil
}

// CredentialOf returns the credential whose state (EvolveCredential) the
// event changes.
func CredentialOf(e Event) (string, bool) {
	switch d := e.Data.(type) {
	case *CredentialIssued:
		return d.CredentialID, d.CredentialID != ""
	case *InviteRedeemed:
		return d.CredentialID, d.CredentialID != ""
	case *CredentialRevoked:
		return d.CredentialID, d.CredentialID != ""
	}
	return "", false
}

// EvolveCredential folds one event of CredentialOf into the credential's
// state c (nil before its issue) and returns the state after it; nil for a
// revocation of an unknown credential. It never fails.
func EvolveCredential(c *Credential, r Recorded) *Credential {
	e := r.Event
	switch d := e.Data.(type) {
	case *CredentialIssued:
		via := d.Via
		if via == "" {
			via = ViaIssue
		}
		return &Credential{ID: d.CredentialID, AgentID: d.AgentID, TokenHash: d.TokenHash, Via: via, IssuedAt: e.At, IssuedSeq: r.Seq, ExpiresAt: d.ExpiresAt}
	case *InviteRedeemed:
		return &Credential{ID: d.CredentialID, AgentID: d.AgentID, TokenHash: d.TokenHash, Via: ViaJoin, IssuedAt: e.At, IssuedSeq: r.Seq, ExpiresAt: d.ExpiresAt}
	case *CredentialRevoked:
		if c != nil && !c.Revoked {
			c.Revoked, c.RevokedAt = true, ptr(e.At)
		}
	}
	return c
}
