package client

import (
	"encoding/json"
	"time"
)

// The types below mirror the schemas of the OpenAPI document
// (components/schemas); their names follow it without the View suffix.

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

// ClaimToken is a live claim: whoever holds it may append records, renew,
// suspend and finish the Turn. Token is a secret.
type ClaimToken struct {
	ProjectID string    `json:"project_id"`
	TurnID    string    `json:"turn_id"`
	AgentID   string    `json:"agent_id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Meta is operation metadata.
type Meta struct {
	Note        string          `json:"note,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// Trace is trace context.
type Trace struct {
	TraceID        string  `json:"trace_id,omitempty"`
	ParentTraceID  *string `json:"parent_trace_id,omitempty"`
	RecursionDepth *int    `json:"recursion_depth,omitempty"`
}

// AgentSpec is an agent's spec, the one shape every route that registers
// an agent takes: RegisterAgent (RegisterRequest.Spec),
// RequestAgentCredentialTokens (TokensRequest.Spec) and CreateJoinInvite
// (InviteRequest.Spec). A field left at its zero value is not sent and
// takes the server's default: role "agent", enabled, accepting work,
// capacity 1, no capabilities or grants, public metadata {}, the server's
// claim lease. The three whose default is not their zero value are
// pointers, so that false and 0 can be said; new(…) writes them inline:
//
//	client.AgentSpec{AgentID: "planner", Role: "planner", Grants: []string{"turns:dispatch"},
//		AcceptsWork: new(false), Capacity: new(0)}
//
// AgentID may be left out where the request names the agent outside the
// spec (TokensRequest, InviteRequest); RegisterRequest needs it.
type AgentSpec struct {
	AgentID        string          `json:"agent_id,omitempty"`
	Role           string          `json:"role,omitempty"`
	Description    string          `json:"description,omitempty"`
	Enabled        *bool           `json:"enabled,omitempty"`      // nil: enabled
	AcceptsWork    *bool           `json:"accepts_work,omitempty"` // nil: accepts work
	Capacity       *int            `json:"capacity,omitempty"`     // nil: 1
	Capabilities   []string        `json:"capabilities,omitempty"`
	Grants         []string        `json:"grants,omitempty"`
	PublicMetadata json.RawMessage `json:"public_metadata,omitempty"`
	ClaimTTLS      int             `json:"claim_ttl_s,omitempty"` // the agent's claim lease in seconds; 0: the server's
}

// ProfileSpec is AgentSpec, the one spec shape.
//
// Deprecated: use AgentSpec.
type ProfileSpec = AgentSpec

// Provenance says where a registration came from. Kind is free text of 1
// to 128 characters naming the source (ProvenanceManual, "terraform",
// "ci", …); the service itself writes ProvenanceAdminBootstrap and
// ProvenanceJoinInvite. ExternalRef is the source's own reference (a file,
// a ticket), PayloadHash a hash of what the source registered from, when it
// has one.
type Provenance struct {
	Kind        string  `json:"kind"`
	ExternalRef string  `json:"external_ref"`
	PayloadHash *string `json:"payload_hash"`
}

// Provenance kinds.
const (
	// ProvenanceClient is the kind RegisterAgent sends when the request
	// names none.
	ProvenanceClient = "client"
	// ProvenanceManual: a person registered the agent by hand.
	ProvenanceManual = "manual"
	// ProvenanceAdminBootstrap: registered by RequestAgentCredentialTokens
	// (written by the service).
	ProvenanceAdminBootstrap = "admin_bootstrap"
	// ProvenanceJoinInvite: registered by redeeming a join invite (written
	// by the service; ExternalRef is the invite's id).
	ProvenanceJoinInvite = "join_invite"
)

// Turn is the Turn snapshot.
type Turn struct {
	ProjectID       string          `json:"project_id"`
	TurnID          string          `json:"turn_id"`
	TurnKind        string          `json:"turn_kind"`
	State           string          `json:"state"` // queued, claimed, suspended, finished
	Outcome         *string         `json:"outcome"`
	StopRequested   bool            `json:"stop_requested"`
	StopRequestedAt *time.Time      `json:"stop_requested_at"`
	TargetAgent     AgentRef        `json:"target_agent"`
	RequestedBy     AgentRef        `json:"requested_by"`
	Input           json.RawMessage `json:"input"`
	DispatchKey     string          `json:"dispatch_key"`
	Authority       AuthorityView   `json:"authority"`
	Parent          *TurnRef        `json:"parent"`
	RootTurnID      string          `json:"root_turn_id"`
	Depth           int             `json:"depth"`
	Claim           *Claim          `json:"claim"`
	Attempts        int             `json:"attempts"`
	LastTurnSeq     uint64          `json:"last_turn_seq"`
	// The schedule: the priority the Turn runs at (3 unless the dispatch
	// asked another), and nil for what the dispatch did not ask. NotBefore
	// is when the Turn may be claimed next (a retry's backoff moves it).
	Priority     int        `json:"priority"`
	NotBefore    *time.Time `json:"not_before"`
	ClaimBy      *time.Time `json:"claim_by"`
	Deadline     *time.Time `json:"deadline"`
	MaxAttempts  *int       `json:"max_attempts"`
	RetryBackoff *Backoff   `json:"retry_backoff"`
	RetryOf      *string    `json:"retry_of"` // the Turn this one retries (RetryTurn)
	// AwaitingInput is the question of a Turn suspended for input (nil
	// otherwise); Tags are the Turn's tags.
	AwaitingInput   *AwaitingInput  `json:"awaiting_input"`
	Tags            []string        `json:"tags"`
	ContextID       *string         `json:"context_id"` // the conversation the Turn belongs to (A2A's contextId), nil without one
	FinalPayload    json.RawMessage `json:"final_payload"`
	FinalRecordRole *string         `json:"final_record_role"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	LedgerSeq       uint64          `json:"ledger_seq"`
}

// Backoff is the delay before a retry asked by a failed finish (Retry):
// InitialS seconds after the first attempt, multiplied by Factor for each
// attempt after it, at most MaxS. A field left at zero takes the server's
// default (1, 2 and 60; MaxS at least InitialS).
type Backoff struct {
	InitialS float64 `json:"initial_s,omitempty"`
	Factor   float64 `json:"factor,omitempty"`
	MaxS     float64 `json:"max_s,omitempty"`
}

// AuthorityView is how a Turn was authorised.
type AuthorityView struct {
	Mode         string `json:"mode"`
	RequestID    string `json:"request_id,omitempty"`
	ParentTurnID string `json:"parent_turn_id,omitempty"`
}

// Claim is the live claim of a Turn as a snapshot shows it (no token).
type Claim struct {
	ClaimID   string    `json:"claim_id"`
	AgentID   string    `json:"agent_id"`
	ClaimedAt time.Time `json:"claimed_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Agent is the agent truth snapshot and a directory entry.
type Agent struct {
	ProjectID      string          `json:"project_id"`
	AgentID        string          `json:"agent_id"`
	Role           string          `json:"role"`
	Description    string          `json:"description"`
	Enabled        bool            `json:"enabled"`
	AcceptsWork    bool            `json:"accepts_work"`
	Drained        bool            `json:"drained"`
	Admitting      bool            `json:"admitting"`
	Capacity       int             `json:"capacity"`
	ActiveClaims   int             `json:"active_claims"`
	FreeCapacity   int             `json:"free_capacity"`
	Capabilities   []string        `json:"capabilities"`
	Grants         []string        `json:"grants"`
	PublicMetadata json.RawMessage `json:"public_metadata"`
	Provenance     Provenance      `json:"provenance"`
	RegisteredAt   time.Time       `json:"registered_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	LastSeenAt     *time.Time      `json:"last_seen_at"`
	Presence       string          `json:"presence"`
	LedgerSeq      uint64          `json:"ledger_seq"`
}

// TurnOffer is one agent offering to take Turns of one kind.
type TurnOffer struct {
	AgentID      string `json:"agent_id"`
	TurnKind     string `json:"turn_kind"`
	Role         string `json:"role"`
	Enabled      bool   `json:"enabled"`
	AcceptsWork  bool   `json:"accepts_work"`
	Drained      bool   `json:"drained"`
	Admitting    bool   `json:"admitting"`
	Capacity     int    `json:"capacity"`
	FreeCapacity int    `json:"free_capacity"`
	Queued       int    `json:"queued"`
	Presence     string `json:"presence"`
}

// Credential is a credential summary (never the token).
type Credential struct {
	CredentialID string     `json:"credential_id"`
	ProjectID    string     `json:"project_id"`
	AgentID      string     `json:"agent_id"`
	Status       string     `json:"status"`
	IssuedAt     time.Time  `json:"issued_at"`
	ExpiresAt    time.Time  `json:"expires_at"`
	RevokedAt    *time.Time `json:"revoked_at"`
	Via          string     `json:"via"`
}

// LineageItem is one Turn of a lineage.
type LineageItem struct {
	TurnID       string   `json:"turn_id"`
	ParentTurnID *string  `json:"parent_turn_id"`
	Depth        int      `json:"depth"`
	Relation     string   `json:"relation"`
	State        string   `json:"state"`
	Outcome      *string  `json:"outcome"`
	TurnKind     string   `json:"turn_kind"`
	TargetAgent  AgentRef `json:"target_agent"`
}

// ContextItem is one semantic record of a Turn.
type ContextItem struct {
	TurnSeq   uint64          `json:"turn_seq"`
	Role      string          `json:"role"`
	Payload   json.RawMessage `json:"payload"`
	ClaimID   string          `json:"claim_id"`
	AgentID   string          `json:"agent_id"`
	At        time.Time       `json:"at"`
	LedgerSeq uint64          `json:"ledger_seq"`
}

// Actor is who caused an event.
type Actor struct {
	Kind    string `json:"kind"`
	AgentID string `json:"agent_id,omitempty"`
}

// FeedItem is one ledger event of a feed.
type FeedItem struct {
	LedgerSeq uint64          `json:"ledger_seq"`
	Type      string          `json:"type"`
	V         int             `json:"v"`
	ProjectID string          `json:"project_id"`
	Aggregate string          `json:"aggregate"`
	ID        string          `json:"id"`
	At        time.Time       `json:"at"`
	Actor     Actor           `json:"actor"`
	Data      json.RawMessage `json:"data"`
	Meta      *Meta           `json:"meta"`
	Trace     *Trace          `json:"trace"`
}

// Diagnostic is trouble a projection page reports (lag, failures).
type Diagnostic struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Page is the projection page shape, with the cursor fields of feeds,
// context and the Turn list (absent elsewhere).
type Page[T any] struct {
	ProjectID          string       `json:"project_id"`
	Items              []T          `json:"items"`
	Limit              int          `json:"limit"`
	Diagnostics        []Diagnostic `json:"diagnostics"`
	NextAfterLedgerSeq *uint64      `json:"next_after_ledger_seq,omitempty"`
	NextAfterTurnSeq   *uint64      `json:"next_after_turn_seq,omitempty"`
	HasMore            *bool        `json:"has_more,omitempty"`
}

// More reports whether items follow the page.
func (p *Page[T]) More() bool { return p.HasMore != nil && *p.HasMore }

// ClaimResult is a won claim.
type ClaimResult struct {
	Claim ClaimToken `json:"claim"`
	Turn  Turn       `json:"turn"`
}

// RenewResult is a renewed claim, and whether a stop was requested.
type RenewResult struct {
	Claim         ClaimToken `json:"claim"`
	StopRequested bool       `json:"stop_requested"`
	LedgerSeq     uint64     `json:"ledger_seq"`
}

// RecordResult is an appended semantic record.
type RecordResult struct {
	ProjectID     string `json:"project_id"`
	TurnID        string `json:"turn_id"`
	TurnSeq       uint64 `json:"turn_seq"`
	StopRequested bool   `json:"stop_requested"`
	LedgerSeq     uint64 `json:"ledger_seq"`
}

// ReconcileResult lists the Turns whose expired claims were released.
type ReconcileResult struct {
	ProjectID       string   `json:"project_id"`
	ReleasedTurnIDs []string `json:"released_turn_ids"`
	LedgerSeq       uint64   `json:"ledger_seq"`
}

// ReportResult is an accepted work-memory report.
type ReportResult struct {
	ReportID  string `json:"report_id"`
	ProjectID string `json:"project_id"`
	AgentID   string `json:"agent_id"`
	LedgerSeq uint64 `json:"ledger_seq"`
}

// IssuedCredential is a new credential and its token, shown once.
type IssuedCredential struct {
	Credential Credential `json:"credential"`
	Token      string     `json:"token"`
}

// CredentialList is an agent's credentials.
type CredentialList struct {
	ProjectID string       `json:"project_id"`
	AgentID   string       `json:"agent_id"`
	Items     []Credential `json:"items"`
}

// Profile is an agent's profile metadata from a bootstrap or a join.
type Profile struct {
	ProjectID   string `json:"project_id"`
	AgentID     string `json:"agent_id"`
	ProfileKind string `json:"profile_kind,omitempty"`
	RuntimeKind string `json:"runtime_kind,omitempty"`
	InviteID    string `json:"invite_id,omitempty"`
	Agent       Agent  `json:"agent"`
}

// CredentialMaterial is a profile with a one-time credential token.
type CredentialMaterial struct {
	Profile              Profile    `json:"profile"`
	Credential           Credential `json:"credential"`
	AgentCredentialToken string     `json:"agent_credential_token"`
}

// JoinInvite is a scoped join invite.
type JoinInvite struct {
	InviteID    string    `json:"invite_id"`
	ProjectID   string    `json:"project_id"`
	AgentID     string    `json:"agent_id"`
	ProfileKind string    `json:"profile_kind"`
	RuntimeKind string    `json:"runtime_kind"`
	ExpiresAt   time.Time `json:"expires_at"`
	SingleUse   bool      `json:"single_use"`
}

// InviteCreated is a new invite and its join code, shown once.
type InviteCreated struct {
	Invite   JoinInvite `json:"invite"`
	JoinCode string     `json:"join_code"`
}

// Requests.

// RegisterRequest registers an agent or replaces its spec. A Provenance
// without a Kind is sent with Kind ProvenanceClient.
type RegisterRequest struct {
	Spec       AgentSpec  `json:"spec"`
	Provenance Provenance `json:"provenance"`
	Meta       *Meta      `json:"meta,omitempty"`
	Trace      *Trace     `json:"trace,omitempty"`
}

// Authority says how a dispatch is authorised: Root(requestID) or
// Child(parentClaim).
type Authority struct {
	Mode        string      `json:"mode"`
	RequestID   string      `json:"request_id,omitempty"`
	ParentClaim *ClaimToken `json:"parent_claim,omitempty"`
}

// Root is the authority of a root Turn.
func Root(requestID string) Authority { return Authority{Mode: "root_request", RequestID: requestID} }

// Child is the authority of a child Turn derived from a claim the caller
// holds.
func Child(parent ClaimToken) Authority {
	return Authority{Mode: "child_derivation", ParentClaim: &parent}
}

// AwaitingInput is what a Turn suspended for input asks: a prompt, an
// optional JSON Schema of the answer, and the time by which it must come.
type AwaitingInput struct {
	Prompt  string          `json:"prompt"`
	Schema  json.RawMessage `json:"schema"`
	InputBy *time.Time      `json:"input_by"`
}

// InputWait is what a Turn suspended for input asks (SuspendTurnForInput):
// Prompt, the question (required); Schema, a JSON Schema of the answer
// (encoded as JSON; nil for none), shown to whoever answers; InputBy, the
// time by which the answer must come (nil: no limit), after which the Turn
// ends with outcome timed_out.
type InputWait struct {
	Prompt  string     `json:"prompt"`
	Schema  any        `json:"schema"`
	InputBy *time.Time `json:"input_by"`
}

// InputWaitResult is the answer of SuspendTurnForInput: the Turn, now
// suspended with AwaitingInput, and, this once, the input token and the
// absolute URL that answer the wait (ProvideInputWithToken). InputToken is
// a secret: hand it only to whoever should answer.
type InputWaitResult struct {
	Turn
	InputToken string `json:"input_token"`
	InputURL   string `json:"input_url"`
}

// DispatchRequest dispatches a Turn. Input is encoded as JSON.
//
// The schedule fields are optional; a nil one is not sent and the server's
// default applies (see the package doc, "Scheduling"): Priority 1 (runs
// first) to 5, default 3; NotBefore, the Turn is not claimed before it;
// ClaimBy, a Turn still never claimed then ends as expired; Deadline, a
// Turn not finished then ends as timed_out; MaxAttempts, the claims
// allowed (default no limit); RetryBackoff, the delays of retries.
// ContextID groups the Turns of one conversation (A2A's contextId).
type DispatchRequest struct {
	RequestedBy  AgentRef   `json:"requested_by"`
	TargetAgent  AgentRef   `json:"target_agent"`
	Input        any        `json:"input"`
	TurnKind     string     `json:"turn_kind"`
	DispatchKey  string     `json:"dispatch_key"`
	Authority    Authority  `json:"authority"`
	Priority     *int       `json:"priority,omitempty"`
	NotBefore    *time.Time `json:"not_before,omitempty"`
	ClaimBy      *time.Time `json:"claim_by,omitempty"`
	Deadline     *time.Time `json:"deadline,omitempty"`
	MaxAttempts  *int       `json:"max_attempts,omitempty"`
	RetryBackoff *Backoff   `json:"retry_backoff,omitempty"`
	Tags         []string   `json:"tags,omitempty"` // at most 16, each 1 to 64 of [A-Za-z0-9._:-]
	ContextID    string     `json:"context_id,omitempty"`
	Meta         *Meta      `json:"meta,omitempty"`
	Trace        *Trace     `json:"trace,omitempty"`
}

// FinishRequest finishes a claimed Turn. Outcome is succeeded, failed or
// stopped; FinalPayload (encoded as JSON; nil for none) becomes the final
// context record with FinalRecordRole. Retry, with outcome failed, asks for
// another attempt: the Turn is queued again after its backoff while
// attempts remain (the answer shows it queued, with NotBefore), else it
// ends with outcome dead.
type FinishRequest struct {
	Outcome         string `json:"outcome"`
	FinalPayload    any    `json:"final_payload"`
	FinalRecordRole string `json:"final_record_role,omitempty"`
	Retry           bool   `json:"retry,omitempty"`
	Meta            *Meta  `json:"meta,omitempty"`
	Trace           *Trace `json:"trace,omitempty"`
}

// RetryRequest asks for a new Turn from a finished one (RetryTurn).
// RequestedBy is who asks: the client's own agent when left empty.
type RetryRequest struct {
	RequestedBy AgentRef `json:"requested_by"`
	Meta        *Meta    `json:"meta,omitempty"`
	Trace       *Trace   `json:"trace,omitempty"`
}

// BulkRequest is a bulk action (BulkStopTurns, BulkRetryTurns): the Turns
// Filter matches, oldest dispatch first, at most Limit of them (1 to 1000;
// 0: the server's default, 100). RequestedBy is who acts: the client's own
// agent when left empty (the admin names any agent of the project). Reason
// becomes each event's meta.reason.
type BulkRequest struct {
	RequestedBy AgentRef   `json:"requested_by"`
	Filter      BulkFilter `json:"filter"`
	Limit       int        `json:"limit,omitempty"`
	Reason      string     `json:"reason,omitempty"`
	Meta        *Meta      `json:"meta,omitempty"`
	Trace       *Trace     `json:"trace,omitempty"`
}

// BulkFilter is the filter of a bulk action: the Turn list's filters
// (TurnQuery), with one tag at most. An empty field matches any Turn.
type BulkFilter struct {
	State         string `json:"state,omitempty"`
	TargetAgentID string `json:"target_agent_id,omitempty"`
	TurnKind      string `json:"turn_kind,omitempty"`
	Tag           string `json:"tag,omitempty"`
	Outcome       string `json:"outcome,omitempty"`
	AwaitingInput bool   `json:"awaiting_input,omitempty"`
}

// BulkStopResult lists the Turns a bulk stop stopped (or asked to stop,
// for a claimed Turn: its holder stops it); HasMore says whether more
// match: call again to go on.
type BulkStopResult struct {
	Stopped []string `json:"stopped"`
	HasMore bool     `json:"has_more"`
}

// BulkRetryResult lists the new Turns a bulk retry dispatched, one per
// retried Turn; HasMore says whether more match: call again to go on.
type BulkRetryResult struct {
	Retried []string `json:"retried"`
	HasMore bool     `json:"has_more"`
}

// WorkMemoryReport is a work-memory report manifest.
type WorkMemoryReport struct {
	Kind              string             `json:"kind"` // agent_work_memory_report_manifest.v1
	RequestID         string             `json:"request_id"`
	Summary           string             `json:"summary"`
	Records           []WorkMemoryRecord `json:"records"`
	FinalPayload      any                `json:"final_payload"`
	DeclaredProjectID string             `json:"declared_project_id"`
	DeclaredAgentID   string             `json:"declared_agent_id"`
}

// WorkMemoryRecord is one record of a work-memory report.
type WorkMemoryRecord struct {
	Role       string `json:"role"`
	Payload    any    `json:"payload"`
	SourceRefs []any  `json:"source_refs"`
}

// TokensRequest bootstraps an agent under admin policy.
type TokensRequest struct {
	AgentID    string      `json:"agent_id"`
	Spec       *AgentSpec  `json:"spec,omitempty"`
	Provenance *Provenance `json:"provenance,omitempty"`
}

// InviteRequest creates a join invite.
type InviteRequest struct {
	AgentID          string     `json:"agent_id"`
	ProfileKind      string     `json:"profile_kind"`
	RuntimeKind      string     `json:"runtime_kind"`
	ExpiresInSeconds *int64     `json:"expires_in_seconds,omitempty"`
	SingleUse        *bool      `json:"single_use,omitempty"`
	Spec             *AgentSpec `json:"spec,omitempty"`
}

// FeedQuery is the cursor of a feed page: items after AfterLedgerSeq, at
// most Limit of them (0: the server's default).
type FeedQuery struct {
	AfterLedgerSeq uint64
	Limit          int
}

// AgentQuery filters the agent directory.
type AgentQuery struct {
	AgentID         string
	EnabledOnly     bool
	AcceptsWorkOnly bool
	Role            string
	Capability      string
	Limit           int
}

// OfferQuery filters Turn offers.
type OfferQuery struct {
	TurnKind        string
	AgentID         string
	EnabledOnly     bool
	AcceptsWorkOnly bool
	Limit           int
}

// TurnQuery filters the Turn list; AfterLedgerSeq is its cursor (a
// dispatch ledger_seq: NextAfterLedgerSeq of the previous page).
type TurnQuery struct {
	TargetAgentID     string
	TurnKind          string
	State             string
	Outcome           string
	Priority          int      // 1 to 5; 0: any
	Tags              []string // Turns carrying every one of them
	ContextID         string   // Turns of this context_id
	AwaitingInput     bool     // only Turns suspended for input
	StopRequestedOnly bool
	// NewestFirst lists the newest dispatch first (order=newest); the
	// default is oldest first. AfterLedgerSeq pages on in the order asked.
	NewestFirst    bool
	AfterLedgerSeq uint64
	Limit          int
}
