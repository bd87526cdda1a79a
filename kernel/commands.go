package kernel

import (
	"encoding/json"
	"time"
)

// Command is one request to change a project. Each command type below is
// decided by Decide into at most one event.
type Command interface{ common() Common }

// Common carries what every command has: who asks and the optional
// operation metadata and trace context that travel into the event.
type Common struct {
	Caller Caller
	Meta   *Meta
	Trace  *Trace
	Idem   *Idempotency // the request's idempotency key, if any (see idempotency.go)
}

func (c Common) common() Common { return c }

// ClaimToken is the fencing token a claim holder presents. Token is the
// secret; the kernel only ever sees its hash (TokenHash), computed by the
// engine.
type ClaimToken struct {
	ProjectID string    `json:"project_id"`
	TurnID    string    `json:"turn_id"`
	AgentID   string    `json:"agent_id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

type (
	// RegisterAgent registers an agent or replaces its spec.
	RegisterAgent struct {
		Common
		Spec       AgentSpec
		Provenance Provenance
	}
	// IssueCredential issues a credential whose token hashes to TokenHash.
	IssueCredential struct {
		Common
		AgentID      string
		CredentialID string
		TokenHash    string
		ExpiresAt    time.Time
	}
	// RevokeCredential revokes a credential; revoking a revoked one does nothing.
	RevokeCredential struct {
		Common
		AgentID      string
		CredentialID string
	}
	// SetAgentAdmission drains (Drain true) or resumes an agent.
	SetAgentAdmission struct {
		Common
		AgentID     string
		Agent       *AgentRef // the body's agent reference, checked against AgentID
		RequestedBy AgentRef
		Drain       bool
	}
	// Heartbeat records the agent's presence.
	Heartbeat struct {
		Common
		AgentID string
		Agent   *AgentRef
	}
	// ReplaceMetadata replaces the agent's public metadata.
	ReplaceMetadata struct {
		Common
		AgentID  string
		Metadata json.RawMessage
	}
	// ReportWorkMemory records a work-memory report (already validated by
	// ParseWorkMemoryReport).
	ReportWorkMemory struct {
		Common
		AgentID  string
		ReportID string
		Report   WorkMemoryReport
	}
	// CreateInvite creates a join invite whose code hashes to CodeHash.
	CreateInvite struct {
		Common
		Invite InviteCreated
	}
	// RedeemInvite redeems the invite whose code hashes to CodeHash and issues
	// a credential whose token hashes to TokenHash.
	RedeemInvite struct {
		Common
		CodeHash     string
		CredentialID string
		TokenHash    string
		ExpiresAt    time.Time
	}
	// Dispatch creates a Turn.
	Dispatch struct {
		Common
		TurnID      string
		RequestedBy AgentRef
		TargetAgent AgentRef
		Input       json.RawMessage
		TurnKind    string
		DispatchKey string
		Mode        string
		RequestID   string
		ParentClaim *ClaimToken
		ParentHash  string // hash of ParentClaim.Token
		BodyHash    string // hash of the request, for idempotency
		MaxDepth    int
	}
	// ClaimNext claims the agent's oldest queued Turn, if its capacity allows.
	ClaimNext struct {
		Common
		AgentID   string
		Agent     *AgentRef
		ClaimID   string
		TokenHash string
		ExpiresAt time.Time
	}
	// Renew extends a live claim to ExpiresAt.
	Renew struct {
		Common
		Claim     ClaimToken
		TokenHash string
		ExpiresAt time.Time
	}
	// AppendRecord appends a semantic record under a live claim.
	AppendRecord struct {
		Common
		TurnID    string
		Claim     ClaimToken
		TokenHash string
		Role      string
		Payload   json.RawMessage
	}
	// Suspend suspends a claimed Turn and releases its claim.
	Suspend struct {
		Common
		TurnID    string
		Claim     ClaimToken
		TokenHash string
	}
	// Finish finishes a claimed Turn.
	Finish struct {
		Common
		TurnID          string
		Claim           ClaimToken
		TokenHash       string
		Outcome         string
		FinalPayload    json.RawMessage
		FinalRecordRole string
	}
	// Stop requests a stop of a Turn.
	Stop struct {
		Common
		TurnID      string
		RequestedBy AgentRef
	}
	// Resume returns a suspended Turn to its agent's queue.
	Resume struct {
		Common
		TurnID      string
		RequestedBy AgentRef
	}
	// ExpireClaim releases the Turn's claim if it has expired at the time of
	// the decision.
	ExpireClaim struct {
		Common
		TurnID string
	}
)
