package kernel

import "time"

// Event types of the invite aggregate. The name is written here once and never
// derived from a Go type.
const (
	EvInviteCreated  = "invite.created"
	EvInviteRedeemed = "invite.redeemed"
)

// inviteEvents is the codec's table of the invite events: type and version, with the Go
// type of their data.
var inviteEvents = map[codecKey]eventType{
	{EvInviteCreated, 1}:  {AggInvite, func() any { return new(InviteCreated) }},
	{EvInviteRedeemed, 1}: {AggInvite, func() any { return new(InviteRedeemed) }},
}

// InviteCreated: a join invite was created. Only the code's hash is kept.
type InviteCreated struct {
	InviteID    string    `json:"invite_id"`
	AgentID     string    `json:"agent_id"`
	ProfileKind string    `json:"profile_kind"`
	RuntimeKind string    `json:"runtime_kind"`
	ExpiresAt   time.Time `json:"expires_at"`
	SingleUse   bool      `json:"single_use"`
	CodeHash    string    `json:"code_hash"`
	Spec        AgentSpec `json:"spec"`
}

// InviteRedeemed: a join code was redeemed and a credential issued with it.
type InviteRedeemed struct {
	InviteID     string    `json:"invite_id"`
	AgentID      string    `json:"agent_id"`
	CredentialID string    `json:"credential_id"`
	TokenHash    string    `json:"token_hash"`
	ExpiresAt    time.Time `json:"expires_at"`
	// Registration, when set, registered the invited agent, new until then,
	// in the same event, with the invite's spec and provenance join_invite.
	Registration *AgentRegistered `json:"registration,omitempty"`
}

// Invite is the write model of one join invite.
type Invite struct {
	Data     InviteCreated
	Redeemed int
}

// InviteRequest is what the admin asks of a new join invite; the defaults
// and bounds are applied by Engine.CreateInvite.
type InviteRequest struct {
	AgentID          string
	ProfileKind      string
	RuntimeKind      string
	ExpiresInSeconds *int64 // nil: the engine's default TTL; at most its maximum
	SingleUse        *bool  // nil: true
	Spec             *SpecInput
}

// Invite resolves the request into the invite's data (without id, code hash
// and expiry) and its lifetime: defaultTTL when the request asks none, at
// most maxTTL.
func (r InviteRequest) Invite(defaultTTL, maxTTL time.Duration) (InviteCreated, time.Duration, error) {
	ttl := defaultTTL
	if r.ExpiresInSeconds != nil {
		max := int64(maxTTL / time.Second)
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

// CreateInvite creates a join invite whose code hashes to CodeHash.
type CreateInvite struct {
	Common
	Invite InviteCreated
}

// Name is the command's stable name (see Command).
func (CreateInvite) Name() string { return "create_invite" }

func (cmd CreateInvite) decide(d decider) (*Event, error) {
	if !d.c.Caller.Admin {
		return nil, Errorf(Forbidden, "join invites are created by the admin")
	}
	inv := cmd.Invite
	if !ValidID(inv.AgentID) {
		return nil, invalid("agent_id must be 1 to 128 letters, digits, '_' or '-'")
	}
	if !ValidName(inv.ProfileKind) || !ValidName(inv.RuntimeKind) {
		return nil, invalid("profile_kind and runtime_kind must be names of 1 to 128 characters without spaces")
	}
	if !inv.ExpiresAt.After(d.now) {
		return nil, invalid("an invite must expire after it is created")
	}
	if _, ok := d.p.Agents[inv.AgentID]; !ok {
		inv.Spec.AgentID = inv.AgentID
		if err := validateSpec(inv.Spec); err != nil {
			return nil, err
		}
	}
	return d.event(EvInviteCreated, AggInvite, inv.InviteID, &inv), nil
}

// RedeemInvite redeems the invite whose code hashes to CodeHash and issues
// a credential whose token hashes to TokenHash.
type RedeemInvite struct {
	Common
	CodeHash     string
	CredentialID string
	TokenHash    string
	ExpiresAt    time.Time
}

// Name is the command's stable name (see Command).
func (RedeemInvite) Name() string { return "redeem_invite" }

func (cmd RedeemInvite) decide(d decider) (*Event, error) {
	id, ok := d.p.InviteCodes[cmd.CodeHash]
	if !ok {
		return nil, Errorf(Unauthorized, "invalid join code")
	}
	inv := d.p.Invites[id]
	if !d.now.Before(inv.Data.ExpiresAt) {
		return nil, Errorf(Unauthorized, "the join code expired at %s", inv.Data.ExpiresAt.Format(time.RFC3339))
	}
	if inv.Data.SingleUse && inv.Redeemed > 0 {
		return nil, Errorf(Conflict, "the join invite %s has already been redeemed", id)
	}
	// Whoever holds the code acts as the invited agent: the event's actor.
	d.c.Caller = Caller{AgentID: inv.Data.AgentID}
	data := &InviteRedeemed{
		InviteID: id, AgentID: inv.Data.AgentID, CredentialID: cmd.CredentialID, TokenHash: cmd.TokenHash, ExpiresAt: cmd.ExpiresAt.UTC(),
	}
	if d.p.Agents[inv.Data.AgentID] == nil {
		// A new agent is registered by the same event, so the redemption
		// is all or nothing.
		spec := inv.Data.Spec
		spec.AgentID = inv.Data.AgentID
		if err := validateSpec(spec); err != nil {
			return nil, err
		}
		data.Registration = &AgentRegistered{Spec: spec, Provenance: Provenance{Kind: ProvenanceJoinInvite, ExternalRef: id}}
	}
	return d.event(EvInviteRedeemed, AggInvite, id, data), nil
}
