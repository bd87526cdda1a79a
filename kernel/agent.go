package kernel

import "time"

// Agent is one agent as the events made it: the state the engine decides on
// and, unchanged, the state the projections show (they fold it with
// EvolveAgent too). ActiveClaims and LastSeen follow from other aggregates'
// events; Evolve keeps them, the projections index them.
type Agent struct {
	Spec         AgentSpec
	Provenance   Provenance
	Drained      bool
	RegisteredAt time.Time
	UpdatedAt    time.Time // the last registration, drain, resume or metadata change
	Seq          uint64    // ledger_seq of the agent's last event
	ActiveClaims int
	LastSeen     time.Time
}

// Admitting reports whether the agent takes new Turns.
func (a *Agent) Admitting() bool { return Admitting(a.Spec.Enabled, a.Spec.AcceptsWork, a.Drained) }

// Admitting is the rule of admission: an agent takes new Turns when it is
// enabled, accepts work and is not drained. Dispatch decides by it, and the
// projections show it.
func Admitting(enabled, acceptsWork, drained bool) bool { return enabled && acceptsWork && !drained }

// AcceptingWork is the accepts_work filter of the directory and the offers:
// the agent accepts work and is not drained (enabled or not).
func AcceptingWork(acceptsWork, drained bool) bool { return acceptsWork && !drained }

// Has reports whether the agent's spec carries the grant.
func (a *Agent) Has(grant string) bool {
	for _, g := range a.Spec.Grants {
		if g == grant {
			return true
		}
	}
	return false
}

// registration returns the registration an event carries: an
// agent.registered, or a bootstrap's credential.issued or an
// invite.redeemed that registered the agent.
func registration(e Event) *AgentRegistered {
	switch d := e.Data.(type) {
	case *AgentRegistered:
		return d
	case *CredentialIssued:
		return d.Registration
	case *InviteRedeemed:
		return d.Registration
	}
	return nil
}

// AgentOf returns the agent whose state (EvolveAgent) the event changes.
func AgentOf(e Event) (string, bool) {
	if reg := registration(e); reg != nil {
		return reg.Spec.AgentID, true
	}
	if e.Aggregate == AggAgent {
		return e.ID, true
	}
	return "", false
}

// EvolveAgent folds one event of AgentOf into the agent's state a (nil
// before its registration) and returns the state after it. An event of an
// agent never registered returns nil. It never fails.
func EvolveAgent(a *Agent, r Recorded) *Agent {
	e := r.Event
	if reg := registration(e); reg != nil {
		if a == nil {
			a = &Agent{RegisteredAt: e.At}
		}
		a.Spec, a.Provenance, a.UpdatedAt, a.Seq = reg.Spec, reg.Provenance, e.At, r.Seq
		return a
	}
	if a == nil {
		return nil
	}
	a.Seq = r.Seq
	switch d := e.Data.(type) {
	case *AgentDrained:
		a.Drained = true
	case *AgentResumed:
		a.Drained = false
	case *AgentMetadataReplaced:
		a.Spec.PublicMetadata = d.PublicMetadata
	default:
		return a // presence and reports change only the agent's ledger_seq
	}
	a.UpdatedAt = e.At
	return a
}

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
