package kernel

import (
	"encoding/json"
	"time"
)

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

// Event types of the agent aggregate. The name is written here once and never
// derived from a Go type.
const (
	EvAgentRegistered  = "agent.registered"
	EvAgentDrained     = "agent.drained"
	EvAgentResumed     = "agent.resumed"
	EvAgentHeartbeat   = "agent.heartbeat"
	EvAgentMetadataSet = "agent.public_metadata_replaced"
	EvAgentWorkMemory  = "agent.work_memory_reported"
)

// agentEvents is the codec's table of the agent events: type and version, with the Go
// type of their data.
var agentEvents = map[codecKey]eventType{
	{EvAgentRegistered, 1}:  {AggAgent, func() any { return new(AgentRegistered) }},
	{EvAgentDrained, 1}:     {AggAgent, func() any { return new(AgentDrained) }},
	{EvAgentResumed, 1}:     {AggAgent, func() any { return new(AgentResumed) }},
	{EvAgentHeartbeat, 1}:   {AggAgent, func() any { return new(AgentHeartbeat) }},
	{EvAgentMetadataSet, 1}: {AggAgent, func() any { return new(AgentMetadataReplaced) }},
	{EvAgentWorkMemory, 1}:  {AggAgent, func() any { return new(AgentWorkMemoryReported) }},
}

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

// AgentRef names an agent of a project.
type AgentRef struct {
	ProjectID string `json:"project_id"`
	AgentID   string `json:"agent_id"`
}

// AgentSpec is the registration spec of an agent.
type AgentSpec struct {
	AgentID        string          `json:"agent_id"`
	Role           string          `json:"role"`
	Description    string          `json:"description"`
	Enabled        bool            `json:"enabled"`
	AcceptsWork    bool            `json:"accepts_work"`
	Capacity       int             `json:"capacity"`
	Capabilities   []string        `json:"capabilities"`
	Grants         []string        `json:"grants"`
	PublicMetadata json.RawMessage `json:"public_metadata"`
	// ClaimTTLS is the lease of the agent's claims in seconds (0: the
	// server's default); a claim may ask a shorter one.
	ClaimTTLS int `json:"claim_ttl_s,omitempty"`
}

// Provenance says where a registration came from.
type Provenance struct {
	Kind        string  `json:"kind"`
	ExternalRef string  `json:"external_ref"`
	PayloadHash *string `json:"payload_hash"`
}

// AgentRegistered: an agent was registered, or its spec replaced by a new
// registration.
type AgentRegistered struct {
	Spec       AgentSpec  `json:"spec"`
	Provenance Provenance `json:"provenance"`
}

// AgentDrained: the agent stops admitting new Turns.
type AgentDrained struct {
	RequestedBy AgentRef `json:"requested_by"`
}

// AgentResumed: the agent admits new Turns again.
type AgentResumed struct {
	RequestedBy AgentRef `json:"requested_by"`
}

// AgentHeartbeat: the agent said it is present.
type AgentHeartbeat struct{}

// AgentMetadataReplaced: the agent's public metadata was replaced.
type AgentMetadataReplaced struct {
	PublicMetadata json.RawMessage `json:"public_metadata"`
}

// AgentWorkMemoryReported: the agent submitted a work-memory report.
type AgentWorkMemoryReported struct {
	ReportID string           `json:"report_id"`
	Manifest WorkMemoryReport `json:"manifest"`
}

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
	ClaimTTLS      *int            `json:"claim_ttl_s"`
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
	if in.ClaimTTLS != nil {
		s.ClaimTTLS = *in.ClaimTTLS
	}
	s.Description = in.Description
	return s, nil
}

// RegisterAgent registers an agent or replaces its spec.
type RegisterAgent struct {
	Common
	Spec       AgentSpec
	Provenance Provenance
}

// Name is the command's stable name (see Command).
func (RegisterAgent) Name() string { return "register_agent" }

func (cmd RegisterAgent) decide(d decider) (*Event, error) {
	if err := d.p.require(d.c.Caller, d.now, GrantRegister); err != nil {
		return nil, err
	}
	if err := validateSpec(cmd.Spec); err != nil {
		return nil, err
	}
	if err := textField("provenance.kind", cmd.Provenance.Kind, 128, true); err != nil {
		return nil, err
	}
	if err := textField("provenance.external_ref", cmd.Provenance.ExternalRef, MaxTextLen, false); err != nil {
		return nil, err
	}
	return d.event(EvAgentRegistered, AggAgent, cmd.Spec.AgentID, &AgentRegistered{Spec: cmd.Spec, Provenance: cmd.Provenance}), nil
}

// SetAgentAdmission drains (Drain true) or resumes an agent.
type SetAgentAdmission struct {
	Common
	AgentID     string
	Agent       *AgentRef // the body's agent reference, checked against AgentID
	RequestedBy AgentRef
	Drain       bool
}

// Name is the command's stable name (see Command).
func (SetAgentAdmission) Name() string { return "set_agent_admission" }

func (cmd SetAgentAdmission) decide(d decider) (*Event, error) {
	if err := d.p.require(d.c.Caller, d.now, GrantManage); err != nil {
		return nil, err
	}
	a, err := d.agent(cmd.AgentID)
	if err != nil {
		return nil, err
	}
	if err := d.bodyAgent(cmd.Agent, cmd.AgentID); err != nil {
		return nil, err
	}
	if err := d.actingAs(cmd.RequestedBy); err != nil {
		return nil, err
	}
	if a.Drained == cmd.Drain {
		return nil, nil
	}
	if cmd.Drain {
		return d.event(EvAgentDrained, AggAgent, cmd.AgentID, &AgentDrained{RequestedBy: cmd.RequestedBy}), nil
	}
	return d.event(EvAgentResumed, AggAgent, cmd.AgentID, &AgentResumed{RequestedBy: cmd.RequestedBy}), nil
}

// Presence is a coarse signal, not a fact the ledger needs every 30 s of:
// an agent is seen by every event it causes (a claim, a renewal, a record,
// a finish …) and by a heartbeat, and a heartbeat is recorded only when
// the agent has not been seen for HeartbeatQuiet. A working agent then
// records no heartbeat at all, and an idle one whose client reports every
// 30 s records one every 5 minutes instead of 10 (the answer is the agent
// as it stands, online). PresenceWindow, the time after which an agent
// not seen is offline, outlasts the quiet interval and a client's
// reporting interval (up to 2 minutes), so an agent that keeps reporting
// never shows offline; one that stops shows offline 7 minutes after it was
// last seen, where a claim's expiry (a minute by default) already says
// that its work has stopped.
const (
	HeartbeatQuiet = 5 * time.Minute
	PresenceWindow = 7 * time.Minute
)

// Heartbeat records the agent's presence (unless it was seen less than
// HeartbeatQuiet ago: then nothing is recorded).
type Heartbeat struct {
	Common
	AgentID string
	Agent   *AgentRef
}

// Name is the command's stable name (see Command).
func (Heartbeat) Name() string { return "heartbeat" }

func (cmd Heartbeat) decide(d decider) (*Event, error) {
	if err := d.p.requireSelfOr(d.c.Caller, d.now, cmd.AgentID, GrantManage); err != nil {
		return nil, err
	}
	if _, err := d.agent(cmd.AgentID); err != nil {
		return nil, err
	}
	if err := d.bodyAgent(cmd.Agent, cmd.AgentID); err != nil {
		return nil, err
	}
	if a, _ := d.agent(cmd.AgentID); !a.LastSeen.IsZero() && d.now.Sub(a.LastSeen) < HeartbeatQuiet {
		return nil, nil // seen recently: presence is known, nothing to record
	}
	return d.event(EvAgentHeartbeat, AggAgent, cmd.AgentID, &AgentHeartbeat{}), nil
}

// ReplaceMetadata replaces the agent's public metadata.
type ReplaceMetadata struct {
	Common
	AgentID  string
	Metadata json.RawMessage
}

// Name is the command's stable name (see Command).
func (ReplaceMetadata) Name() string { return "replace_metadata" }

func (cmd ReplaceMetadata) decide(d decider) (*Event, error) {
	if err := d.p.requireSelfOr(d.c.Caller, d.now, cmd.AgentID, GrantManage); err != nil {
		return nil, err
	}
	if _, err := d.agent(cmd.AgentID); err != nil {
		return nil, err
	}
	if err := objectField("public_metadata", cmd.Metadata, MaxMetadataBytes); err != nil {
		return nil, err
	}
	return d.event(EvAgentMetadataSet, AggAgent, cmd.AgentID, &AgentMetadataReplaced{PublicMetadata: cmd.Metadata}), nil
}

// ReportWorkMemory records a work-memory report (already validated by
// ParseWorkMemoryReport).
type ReportWorkMemory struct {
	Common
	AgentID  string
	ReportID string
	Report   WorkMemoryReport
}

// Name is the command's stable name (see Command).
func (ReportWorkMemory) Name() string { return "report_work_memory" }

func (cmd ReportWorkMemory) decide(d decider) (*Event, error) {
	if _, err := d.p.Check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	if d.c.Caller.Admin || d.c.Caller.AgentID != cmd.AgentID {
		return nil, Errorf(Forbidden, "a work-memory report is submitted by the agent itself")
	}
	if _, err := d.agent(cmd.AgentID); err != nil {
		return nil, err
	}
	if err := checkReport(cmd.Report, d.p.ID, cmd.AgentID); err != nil {
		return nil, err
	}
	return d.event(EvAgentWorkMemory, AggAgent, cmd.AgentID, &AgentWorkMemoryReported{ReportID: cmd.ReportID, Manifest: cmd.Report}), nil
}
