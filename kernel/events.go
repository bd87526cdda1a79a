package kernel

import (
	"encoding/json"
	"time"
)

// Event types. The name is written here once and never derived from a Go type.
const (
	EvAgentRegistered    = "agent.registered"
	EvAgentDrained       = "agent.drained"
	EvAgentResumed       = "agent.resumed"
	EvAgentHeartbeat     = "agent.heartbeat"
	EvAgentMetadataSet   = "agent.public_metadata_replaced"
	EvAgentWorkMemory    = "agent.work_memory_reported"
	EvCredentialIssued   = "credential.issued"
	EvCredentialRevoked  = "credential.revoked"
	EvInviteCreated      = "invite.created"
	EvInviteRedeemed     = "invite.redeemed"
	EvTurnDispatched     = "turn.dispatched"
	EvTurnClaimed        = "turn.claimed"
	EvTurnClaimRenewed   = "turn.claim_renewed"
	EvTurnRecordAppended = "turn.record_appended"
	EvTurnSuspended      = "turn.suspended"
	EvTurnResumed        = "turn.resumed"
	EvTurnFinished       = "turn.finished"
	EvTurnStopRequested  = "turn.stop_requested"
	EvTurnStopped        = "turn.stopped"
	EvTurnClaimExpired   = "turn.claim_expired"
)

// Aggregates: the third token of an event's subject.
const (
	AggAgent      = "agent"
	AggCredential = "credential"
	AggInvite     = "invite"
	AggTurn       = "turn"
)

// codec is the table of every event type and version the kernel reads and
// writes, with the Go type of its data. It is a value built here, not filled by
// init functions in other files.
var codec = map[codecKey]eventType{
	{EvAgentRegistered, 1}:    {AggAgent, func() any { return new(AgentRegistered) }},
	{EvAgentDrained, 1}:       {AggAgent, func() any { return new(AgentDrained) }},
	{EvAgentResumed, 1}:       {AggAgent, func() any { return new(AgentResumed) }},
	{EvAgentHeartbeat, 1}:     {AggAgent, func() any { return new(AgentHeartbeat) }},
	{EvAgentMetadataSet, 1}:   {AggAgent, func() any { return new(AgentMetadataReplaced) }},
	{EvAgentWorkMemory, 1}:    {AggAgent, func() any { return new(AgentWorkMemoryReported) }},
	{EvCredentialIssued, 1}:   {AggCredential, func() any { return new(CredentialIssued) }},
	{EvCredentialRevoked, 1}:  {AggCredential, func() any { return new(CredentialRevoked) }},
	{EvInviteCreated, 1}:      {AggInvite, func() any { return new(InviteCreated) }},
	{EvInviteRedeemed, 1}:     {AggInvite, func() any { return new(InviteRedeemed) }},
	{EvTurnDispatched, 1}:     {AggTurn, func() any { return new(TurnDispatched) }},
	{EvTurnClaimed, 1}:        {AggTurn, func() any { return new(TurnClaimed) }},
	{EvTurnClaimRenewed, 1}:   {AggTurn, func() any { return new(TurnClaimRenewed) }},
	{EvTurnRecordAppended, 1}: {AggTurn, func() any { return new(TurnRecordAppended) }},
	{EvTurnSuspended, 1}:      {AggTurn, func() any { return new(TurnSuspended) }},
	{EvTurnResumed, 1}:        {AggTurn, func() any { return new(TurnResumed) }},
	{EvTurnFinished, 1}:       {AggTurn, func() any { return new(TurnFinished) }},
	{EvTurnStopRequested, 1}:  {AggTurn, func() any { return new(TurnStopRequested) }},
	{EvTurnStopped, 1}:        {AggTurn, func() any { return new(TurnStopped) }},
	{EvTurnClaimExpired, 1}:   {AggTurn, func() any { return new(TurnClaimExpired) }},
}

// AgentRef names an agent of a project.
type AgentRef struct {
	ProjectID string `json:"project_id"`
	AgentID   string `json:"agent_id"`
}

// TurnRef names a Turn of a project.
type TurnRef struct {
	ProjectID string `json:"project_id"`
	TurnID    string `json:"turn_id"`
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

// WorkMemoryReport is the work-memory report manifest of the spec.
type WorkMemoryReport struct {
	Kind              string             `json:"kind"`
	RequestID         string             `json:"request_id"`
	Summary           string             `json:"summary"`
	Records           []WorkMemoryRecord `json:"records"`
	FinalPayload      json.RawMessage    `json:"final_payload"`
	DeclaredProjectID string             `json:"declared_project_id"`
	DeclaredAgentID   string             `json:"declared_agent_id"`
}

// WorkMemoryRecord is one record of a work-memory report.
type WorkMemoryRecord struct {
	Role       string          `json:"role"`
	Payload    json.RawMessage `json:"payload"`
	SourceRefs []any           `json:"source_refs"`
}

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

// Authority is how a Turn was authorised: a root request or a derivation from
// a parent claim.
type Authority struct {
	Mode         string `json:"mode"` // AuthorityRoot or AuthorityChild
	RequestID    string `json:"request_id,omitempty"`
	ParentTurnID string `json:"parent_turn_id,omitempty"`
	ParentClaim  string `json:"parent_claim_id,omitempty"`
}

// Authority modes.
const (
	AuthorityRoot  = "root_request"
	AuthorityChild = "child_derivation"
)

// TurnDispatched: a Turn was created and queued for its target agent.
type TurnDispatched struct {
	TargetAgent AgentRef        `json:"target_agent"`
	RequestedBy AgentRef        `json:"requested_by"`
	Input       json.RawMessage `json:"input"`
	TurnKind    string          `json:"turn_kind"`
	DispatchKey string          `json:"dispatch_key"`
	BodyHash    string          `json:"body_hash"`
	Authority   Authority       `json:"authority"`
	RootTurnID  string          `json:"root_turn_id"`
	Depth       int             `json:"depth"`
}

// TurnClaimed: an agent took the Turn under a fenced lease. Only the claim
// token's hash is kept.
type TurnClaimed struct {
	ClaimID   string    `json:"claim_id"`
	AgentID   string    `json:"agent_id"`
	TokenHash string    `json:"token_hash"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TurnClaimRenewed: the claim's lease was extended.
type TurnClaimRenewed struct {
	ClaimID   string    `json:"claim_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TurnRecordAppended: a semantic record was appended under the claim.
type TurnRecordAppended struct {
	ClaimID string          `json:"claim_id"`
	TurnSeq uint64          `json:"turn_seq"`
	Role    string          `json:"role"`
	Payload json.RawMessage `json:"payload"`
}

// TurnSuspended: the claim holder suspended the Turn; the claim is released.
type TurnSuspended struct {
	ClaimID string `json:"claim_id"`
}

// TurnResumed: a suspended Turn went back to the queue.
type TurnResumed struct {
	RequestedBy AgentRef `json:"requested_by"`
}

// TurnFinished: the claim holder finished the Turn. The final record, when
// there is a final payload, takes the next turn_seq.
type TurnFinished struct {
	ClaimID         string          `json:"claim_id"`
	Outcome         string          `json:"outcome"`
	FinalPayload    json.RawMessage `json:"final_payload"`
	FinalRecordRole string          `json:"final_record_role"`
	TurnSeq         uint64          `json:"turn_seq,omitempty"`
}

// TurnStopRequested: a stop was asked of a claimed Turn; the holder sees the
// flag and is expected to finish.
type TurnStopRequested struct {
	RequestedBy AgentRef `json:"requested_by"`
}

// TurnStopped: a stop of an unclaimed Turn (queued or suspended) ended it.
type TurnStopped struct {
	RequestedBy AgentRef `json:"requested_by"`
}

// TurnClaimExpired: an expired claim was released. The Turn goes back to the
// queue, or ends as stopped when a stop had been requested.
type TurnClaimExpired struct {
	ClaimID string `json:"claim_id"`
	Stopped bool   `json:"stopped"`
}
