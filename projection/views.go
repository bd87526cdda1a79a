package projection

import (
	"encoding/json"
	"time"

	"github.com/turnledger/turnledger/kernel"
)

// Turn states and the stopped outcome: the kernel's, named here for readers
// of the projection's API.
const (
	StateQueued    = kernel.StateQueued
	StateClaimed   = kernel.StateClaimed
	StateSuspended = kernel.StateSuspended
	StateFinished  = kernel.StateFinished
	OutcomeStopped = kernel.OutcomeStopped
)

// Credential statuses.
const (
	CredentialActive  = "active"
	CredentialRevoked = "revoked"
	CredentialExpired = "expired"
)

// Agent presence values.
const (
	PresenceOnline  = "online"
	PresenceOffline = "offline"
	PresenceNever   = "never"
)

// Lineage relations.
const (
	RelationAncestor   = "ancestor"
	RelationSelf       = "self"
	RelationDescendant = "descendant"
)

// TurnView is the Turn snapshot.
type TurnView struct {
	ProjectID       string          `json:"project_id"`
	TurnID          string          `json:"turn_id"`
	TurnKind        string          `json:"turn_kind"`
	State           string          `json:"state"`
	Outcome         *string         `json:"outcome"`
	StopRequested   bool            `json:"stop_requested"`
	StopRequestedAt *time.Time      `json:"stop_requested_at"` // when the stop was asked; null without one
	TargetAgent     kernel.AgentRef `json:"target_agent"`
	RequestedBy     kernel.AgentRef `json:"requested_by"`
	Input           json.RawMessage `json:"input"`
	DispatchKey     string          `json:"dispatch_key"`
	Authority       AuthorityView   `json:"authority"`
	Parent          *kernel.TurnRef `json:"parent"`
	RootTurnID      string          `json:"root_turn_id"`
	Depth           int             `json:"depth"`
	Claim           *ClaimView      `json:"claim"`
	Attempts        int             `json:"attempts"`
	LastTurnSeq     uint64          `json:"last_turn_seq"`
	// The schedule (issue of scheduling): the effective priority, and null
	// for what the dispatch did not ask. not_before is when the Turn may be
	// claimed next (a retry's backoff moves it).
	Priority     int             `json:"priority"`
	NotBefore    *time.Time      `json:"not_before"`
	ClaimBy      *time.Time      `json:"claim_by"`
	Deadline     *time.Time      `json:"deadline"`
	MaxAttempts  *int            `json:"max_attempts"`
	RetryBackoff *kernel.Backoff `json:"retry_backoff"`
	RetryOf      *string         `json:"retry_of"`
	// AwaitingInput is the question of a Turn suspended for input; null
	// otherwise. The input token is never shown.
	AwaitingInput *AwaitingInputView `json:"awaiting_input"`
	// Tags are the Turn\'s tags, [] when it has none.
	Tags            []string        `json:"tags"`
	ContextID       *string         `json:"context_id"` // the conversation of the Turn (A2A's contextId); null without one
	FinalPayload    json.RawMessage `json:"final_payload"`
	FinalRecordRole *string         `json:"final_record_role"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	LedgerSeq       uint64          `json:"ledger_seq"`
}

// AwaitingInputView is what a Turn suspended for input asks.
type AwaitingInputView struct {
	Prompt  string          `json:"prompt"`
	Schema  json.RawMessage `json:"schema"`
	InputBy *time.Time      `json:"input_by"`
}

// AuthorityView is how a Turn was authorised. The parent claim is never
// shown; the parent Turn is.
type AuthorityView struct {
	Mode         string `json:"mode"`
	RequestID    string `json:"request_id,omitempty"`
	ParentTurnID string `json:"parent_turn_id,omitempty"`
}

// ClaimView is the live claim of a Turn. It never carries the claim token or
// its hash.
type ClaimView struct {
	ClaimID   string    `json:"claim_id"`
	AgentID   string    `json:"agent_id"`
	ClaimedAt time.Time `json:"claimed_at"`
	ExpiresAt time.Time `json:"expires_at"`
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

// ContextPage is a page of semantic context.
type ContextPage struct {
	Items []ContextItem `json:"items"`
	// NextAfterTurnSeq is the cursor for the next page: the last item's
	// turn_seq, or the after_turn_seq asked for when the page is empty.
	NextAfterTurnSeq uint64 `json:"next_after_turn_seq"`
	// HasMore says whether records follow this page.
	HasMore bool `json:"has_more"`
}

// TurnFilter selects Turns. Empty fields do not filter.
type TurnFilter struct {
	TargetAgentID     string
	TurnKind          string
	State             string
	Outcome           string
	StopRequestedOnly bool
	Priority          int // 0: any
	AwaitingInputOnly bool
	Tags              []string // every one of them
	ContextID         string
	// VisibleTo, when set, keeps only the Turns whose target agent or
	// requester is this agent (the read policy of an agent).
	VisibleTo string
	// AfterSeq is the cursor: only Turns dispatched after this ledger_seq,
	// or with NewestFirst before it (0: from the start of the order).
	AfterSeq uint64
	// NewestFirst walks the Turns newest dispatch first instead of oldest
	// first; the cursor then goes on past AfterSeq in that order.
	NewestFirst bool
}

// TurnsPage is a page of Turns in dispatch order.
type TurnsPage struct {
	Items []TurnView
	// NextAfterSeq is the cursor for the next page: the dispatch ledger_seq
	// of the last Turn examined and passed (which may be past the last one
	// returned), or the cursor asked for when nothing was.
	NextAfterSeq uint64
	// HasMore says whether Turns may follow: the page stopped at its limit,
	// its scan budget or its byte budget before the end of the index.
	HasMore bool
}

// LineageItem is one Turn of a lineage.
type LineageItem struct {
	TurnID       string          `json:"turn_id"`
	ParentTurnID *string         `json:"parent_turn_id"`
	Depth        int             `json:"depth"`
	Relation     string          `json:"relation"`
	State        string          `json:"state"`
	Outcome      *string         `json:"outcome"`
	TurnKind     string          `json:"turn_kind"`
	TargetAgent  kernel.AgentRef `json:"target_agent"`
}

// FeedItem is one ledger event as the feeds show it: the event envelope with
// its ledger_seq, and data with every token_hash and code_hash field removed.
type FeedItem struct {
	LedgerSeq uint64          `json:"ledger_seq"`
	Type      string          `json:"type"`
	V         int             `json:"v"`
	ProjectID string          `json:"project_id"`
	Aggregate string          `json:"aggregate"`
	ID        string          `json:"id"`
	At        time.Time       `json:"at"`
	Actor     kernel.Actor    `json:"actor"`
	Data      json.RawMessage `json:"data"`
	Meta      *kernel.Meta    `json:"meta"`
	Trace     *kernel.Trace   `json:"trace"`
}

// FeedPage is a page of a ledger feed.
type FeedPage struct {
	Items []FeedItem `json:"items"`
	// NextAfterLedgerSeq is the cursor for the next page: the last item's
	// ledger_seq, or the after_ledger_seq asked for when the page is empty.
	NextAfterLedgerSeq uint64 `json:"next_after_ledger_seq"`
	// HasMore says whether items follow this page now.
	HasMore bool `json:"has_more"`
}

// AgentView is the agent truth snapshot and a directory entry.
type AgentView struct {
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
	Provenance     ProvenanceView  `json:"provenance"`
	RegisteredAt   time.Time       `json:"registered_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	LastSeenAt     *time.Time      `json:"last_seen_at"`
	Presence       string          `json:"presence"`
	LedgerSeq      uint64          `json:"ledger_seq"`
	// ClaimTTLS is the lease of the agent's claims in seconds; null for the
	// server's default.
	ClaimTTLS *int `json:"claim_ttl_s"`
}

// ProvenanceView says where an agent's registration came from: the
// kernel's Provenance, shown as it is.
type ProvenanceView = kernel.Provenance

// AgentFilter selects agents. Empty fields do not filter.
type AgentFilter struct {
	AgentID         string
	EnabledOnly     bool
	AcceptsWorkOnly bool // accepts_work and not drained
	Role            string
	Capability      string
}

// TurnOffer is a canonical Turn offer: one agent offering to take Turns of
// one kind (one of its capabilities). See the package doc.
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

// OfferFilter selects Turn offers. Empty fields do not filter.
type OfferFilter struct {
	TurnKind        string
	AgentID         string
	EnabledOnly     bool
	AcceptsWorkOnly bool // accepts_work and not drained
}

// CredentialView is a credential summary. It never carries the token or its
// hash.
type CredentialView struct {
	CredentialID string     `json:"credential_id"`
	ProjectID    string     `json:"project_id"`
	AgentID      string     `json:"agent_id"`
	Status       string     `json:"status"`
	IssuedAt     time.Time  `json:"issued_at"`
	ExpiresAt    time.Time  `json:"expires_at"`
	RevokedAt    *time.Time `json:"revoked_at"`
	Via          string     `json:"via"`
}

// Stored records: what the buckets hold where a view has derived fields.

// turnRecord is a Turn's kernel state, folded by kernel.EvolveTurn (claim
// token hash removed), and the agents who may read it (kernel.TurnReaders).
// View is derived on load, never stored.
type turnRecord struct {
	Turn    kernel.Turn `json:"turn"`
	Readers []string    `json:"readers"`
	View    TurnView    `json:"-"`
}
