package kernel

import (
	"sort"
	"time"
)

// Turn states. The table of transitions is in the package doc; Decide is the
// only place that enforces it.
const (
	StateQueued    = "queued"
	StateClaimed   = "claimed"
	StateSuspended = "suspended"
	StateFinished  = "finished"
)

// OutcomeStopped is the outcome of a Turn that a stop request ended while no
// claim held it.
const OutcomeStopped = "stopped"

// Project is the write model of one project: everything Decide needs, folded
// by Evolve from the project's events. The zero value is an empty project
// (use NewProject for one with its maps made).
type Project struct {
	ID  string
	Seq uint64 // ledger_seq of the last event folded

	Agents       map[string]*Agent
	Credentials  map[string]*Credential // by credential id
	Turns        map[string]*Turn
	DispatchKeys map[string]string // DispatchKeyOf(requester, dispatch_key) → turn id
	Invites      map[string]*Invite
	InviteCodes  map[string]string // code hash → invite id
	queues       map[string][]queued
	idem         idemMemory // recent idempotency keys (idempotency.go)
}

// queued is one entry of an agent's queue, ordered by the ledger_seq of the
// Turn's dispatch: the oldest Turn is claimed first, and a resumed or released
// Turn goes back to its old place.
type queued struct {
	order  uint64
	turnID string
}

// Agent is the write model of one agent.
type Agent struct {
	Spec         AgentSpec
	Drained      bool
	ActiveClaims int
	LastSeen     time.Time
}

// Admitting reports whether the agent takes new Turns.
func (a *Agent) Admitting() bool { return a.Spec.Enabled && a.Spec.AcceptsWork && !a.Drained }

// Has reports whether the agent's spec carries the grant.
func (a *Agent) Has(grant string) bool {
	for _, g := range a.Spec.Grants {
		if g == grant {
			return true
		}
	}
	return false
}

// Credential is the write model of one credential.
type Credential struct {
	ID        string
	AgentID   string
	TokenHash string
	IssuedAt  time.Time
	ExpiresAt time.Time
	Revoked   bool
}

// Active reports whether the credential may authenticate at now.
func (c *Credential) Active(now time.Time) bool { return !c.Revoked && now.Before(c.ExpiresAt) }

// Invite is the write model of one join invite.
type Invite struct {
	Data     InviteCreated
	Redeemed int
}

// Turn is the write model of one Turn.
type Turn struct {
	ID            string
	Order         uint64 // ledger_seq of its dispatch
	Dispatch      TurnDispatched
	State         string
	Outcome       string
	StopRequested bool
	Claim         *Claim
	TurnSeq       uint64 // last turn_seq given to a record
}

// Claim is a live lease on a Turn.
type Claim struct {
	ID        string
	AgentID   string
	TokenHash string
	ExpiresAt time.Time
}

// NewProject returns an empty project.
func NewProject(id string) *Project {
	return &Project{
		ID:           id,
		Agents:       map[string]*Agent{},
		Credentials:  map[string]*Credential{},
		Turns:        map[string]*Turn{},
		DispatchKeys: map[string]string{},
		Invites:      map[string]*Invite{},
		InviteCodes:  map[string]string{},
		queues:       map[string][]queued{},
	}
}

func (p *Project) init() {
	if p.Agents == nil {
		*p = *NewProject(p.ID)
	}
}

// Evolve folds one recorded event into the project. It never fails and never
// looks anywhere but its arguments, so a replay rebuilds the same state. It
// changes p in place: the engine owns p and never shares it while deciding.
func Evolve(p *Project, r Recorded) {
	p.init()
	e := r.Event
	if r.Seq > p.Seq {
		p.Seq = r.Seq
	}
	if e.Actor.Kind == ActorAgent {
		if a := p.Agents[e.Actor.AgentID]; a != nil && e.At.After(a.LastSeen) {
			a.LastSeen = e.At
		}
	}
	switch d := e.Data.(type) {
	case *AgentRegistered:
		a := p.Agents[d.Spec.AgentID]
		if a == nil {
			a = &Agent{}
			p.Agents[d.Spec.AgentID] = a
		}
		a.Spec = d.Spec
	case *AgentDrained:
		if a := p.Agents[e.ID]; a != nil {
			a.Drained = true
		}
	case *AgentResumed:
		if a := p.Agents[e.ID]; a != nil {
			a.Drained = false
		}
	case *AgentHeartbeat:
		if a := p.Agents[e.ID]; a != nil && e.At.After(a.LastSeen) {
			a.LastSeen = e.At
		}
	case *AgentMetadataReplaced:
		if a := p.Agents[e.ID]; a != nil {
			a.Spec.PublicMetadata = d.PublicMetadata
		}
	case *AgentWorkMemoryReported:
		// Reports live in the feeds; the write model needs nothing of them.
	case *CredentialIssued:
		p.Credentials[d.CredentialID] = &Credential{ID: d.CredentialID, AgentID: d.AgentID, TokenHash: d.TokenHash, IssuedAt: e.At, ExpiresAt: d.ExpiresAt}
	case *CredentialRevoked:
		if c := p.Credentials[d.CredentialID]; c != nil {
			c.Revoked = true
		}
	case *InviteCreated:
		p.Invites[d.InviteID] = &Invite{Data: *d}
		p.InviteCodes[d.CodeHash] = d.InviteID
	case *InviteRedeemed:
		if inv := p.Invites[d.InviteID]; inv != nil {
			inv.Redeemed++
			if _, ok := p.Agents[d.AgentID]; !ok {
				p.Agents[d.AgentID] = &Agent{Spec: inv.Data.Spec}
			}
		}
		p.Credentials[d.CredentialID] = &Credential{ID: d.CredentialID, AgentID: d.AgentID, TokenHash: d.TokenHash, IssuedAt: e.At, ExpiresAt: d.ExpiresAt}
	case *TurnDispatched:
		t := &Turn{ID: e.ID, Order: r.Seq, Dispatch: *d, State: StateQueued}
		p.Turns[e.ID] = t
		if d.DispatchKey != "" {
			p.DispatchKeys[DispatchKeyOf(d.RequestedBy.AgentID, d.DispatchKey)] = e.ID
		}
		p.enqueue(t)
	case *TurnClaimed:
		t := p.Turns[e.ID]
		if t == nil {
			return
		}
		p.dequeue(t)
		t.State = StateClaimed
		t.Claim = &Claim{ID: d.ClaimID, AgentID: d.AgentID, TokenHash: d.TokenHash, ExpiresAt: d.ExpiresAt}
		if a := p.Agents[d.AgentID]; a != nil {
			a.ActiveClaims++
		}
	case *TurnClaimRenewed:
		if t := p.Turns[e.ID]; t != nil && t.Claim != nil {
			t.Claim.ExpiresAt = d.ExpiresAt
		}
	case *TurnRecordAppended:
		if t := p.Turns[e.ID]; t != nil && d.TurnSeq > t.TurnSeq {
			t.TurnSeq = d.TurnSeq
		}
	case *TurnSuspended:
		if t := p.Turns[e.ID]; t != nil {
			p.release(t)
			t.State = StateSuspended
		}
	case *TurnResumed:
		if t := p.Turns[e.ID]; t != nil {
			t.State = StateQueued
			p.enqueue(t)
		}
	case *TurnFinished:
		if t := p.Turns[e.ID]; t != nil {
			p.release(t)
			t.State, t.Outcome = StateFinished, d.Outcome
			if d.TurnSeq > t.TurnSeq {
				t.TurnSeq = d.TurnSeq
			}
		}
	case *TurnStopRequested:
		if t := p.Turns[e.ID]; t != nil {
			t.StopRequested = true
		}
	case *TurnStopped:
		if t := p.Turns[e.ID]; t != nil {
			p.dequeue(t)
			p.release(t)
			t.StopRequested = true
			t.State, t.Outcome = StateFinished, OutcomeStopped
		}
	case *TurnClaimExpired:
		if t := p.Turns[e.ID]; t != nil {
			p.release(t)
			if d.Stopped {
				t.State, t.Outcome = StateFinished, OutcomeStopped
			} else {
				t.State = StateQueued
				p.enqueue(t)
			}
		}
	}
}

// release drops the Turn's claim, if any, and frees the agent's capacity.
func (p *Project) release(t *Turn) {
	if t.Claim == nil {
		return
	}
	if a := p.Agents[t.Claim.AgentID]; a != nil && a.ActiveClaims > 0 {
		a.ActiveClaims--
	}
	t.Claim = nil
}

func (p *Project) enqueue(t *Turn) {
	agent := t.Dispatch.TargetAgent.AgentID
	q := p.queues[agent]
	i := sort.Search(len(q), func(i int) bool { return q[i].order >= t.Order })
	if i < len(q) && q[i].turnID == t.ID {
		return
	}
	q = append(q, queued{})
	copy(q[i+1:], q[i:])
	q[i] = queued{order: t.Order, turnID: t.ID}
	p.queues[agent] = q
}

func (p *Project) dequeue(t *Turn) {
	agent := t.Dispatch.TargetAgent.AgentID
	q := p.queues[agent]
	i := sort.Search(len(q), func(i int) bool { return q[i].order >= t.Order })
	if i < len(q) && q[i].turnID == t.ID {
		p.queues[agent] = append(q[:i], q[i+1:]...)
	}
}

// NextQueued returns the oldest queued Turn of the agent, or nil.
func (p *Project) NextQueued(agentID string) *Turn {
	q := p.queues[agentID]
	if len(q) == 0 {
		return nil
	}
	return p.Turns[q[0].turnID]
}

// Queued returns how many Turns wait in the agent's queue.
func (p *Project) Queued(agentID string) int { return len(p.queues[agentID]) }

// DispatchKeyOf is the key of a dispatch in Project.DispatchKeys: dispatch
// keys are scoped to their requester, so two requesters never collide on one.
func DispatchKeyOf(requester, dispatchKey string) string { return requester + "\x00" + dispatchKey }
