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
func (a *Agent) Admitting() bool { return Admitting(a.Spec.Enabled, a.Spec.AcceptsWork, a.Drained) }

// Admitting is the rule of admission: an agent takes new Turns when it is
// enabled, accepts work and is not drained. Dispatch and claims decide by it,
// and the projections show it.
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
		p.register(d)
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
		if d.Registration != nil {
			p.register(d.Registration)
		}
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
		}
		if d.Registration != nil {
			p.register(d.Registration)
		}
		p.Credentials[d.CredentialID] = &Credential{ID: d.CredentialID, AgentID: d.AgentID, TokenHash: d.TokenHash, IssuedAt: e.At, ExpiresAt: d.ExpiresAt}
	case *TurnDispatched, *TurnClaimed, *TurnClaimRenewed, *TurnRecordAppended, *TurnSuspended, *TurnResumed,
		*TurnFinished, *TurnStopRequested, *TurnStopped, *TurnClaimExpired:
		p.evolveTurn(r)
	}
}

// register applies a registration: a new agent, or a new spec for one.
func (p *Project) register(d *AgentRegistered) {
	a := p.Agents[d.Spec.AgentID]
	if a == nil {
		a = &Agent{}
		p.Agents[d.Spec.AgentID] = a
	}
	a.Spec = d.Spec
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
