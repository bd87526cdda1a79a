package kernel

import (
	"sort"
)

// Turn states. The table of transitions is in the package doc; Decide is the
// only place that enforces it.
const (
	StateQueued    = "queued"
	StateClaimed   = "claimed"
	StateSuspended = "suspended"
	StateFinished  = "finished"
)

// TurnStates lists the Turn states in their order of the state table.
func TurnStates() []string {
	return []string{StateQueued, StateClaimed, StateSuspended, StateFinished}
}

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
	Turns        map[string]*Turn       // the Turns not finished; Turn finds any (packed.go)
	DispatchKeys map[string]string      // DispatchKeyOf(requester, dispatch_key) → turn id
	Invites      map[string]*Invite
	InviteCodes  map[string]string // code hash → invite id
	queues       map[string][]queued
	claims       claimIndex        // the live claims by expiry (claims.go)
	strs         map[string]string // interned strings of slim Turns (snapshot.go)
	done         map[string][]byte // the finished Turns, packed (packed.go)
	idem         idemMemory        // recent idempotency keys (idempotency.go)
	authChanges  uint64            // events folded that changed Agents or Credentials (the engine's auth view, authview.go)
}

// queued is one entry of an agent's queue, ordered by the ledger_seq of the
// Turn's dispatch: the oldest Turn is claimed first, and a resumed or released
// Turn goes back to its old place.
type queued struct {
	order  uint64
	turnID string
}

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
	if id, ok := AgentOf(e); ok {
		p.authChanges++
		if a := EvolveAgent(p.Agents[id], r); a != nil {
			p.Agents[id] = a
		}
	}
	if id, ok := CredentialOf(e); ok {
		p.authChanges++
		if c := EvolveCredential(p.Credentials[id], r); c != nil {
			p.Credentials[id] = c
		}
	}
	if e.Actor.Kind == ActorAgent {
		if a := p.Agents[e.Actor.AgentID]; a != nil && e.At.After(a.LastSeen) {
			a.LastSeen = e.At
		}
	}
	switch d := e.Data.(type) {
	case *AgentHeartbeat:
		if a := p.Agents[e.ID]; a != nil && e.At.After(a.LastSeen) {
			a.LastSeen = e.At
		}
	case *InviteCreated:
		p.Invites[d.InviteID] = &Invite{Data: *d}
		p.InviteCodes[d.CodeHash] = d.InviteID
	case *InviteRedeemed:
		if inv := p.Invites[d.InviteID]; inv != nil {
			inv.Redeemed++
		}
	case *TurnDispatched, *TurnClaimed, *TurnClaimRenewed, *TurnRecordAppended, *TurnSuspended, *TurnResumed,
		*TurnFinished, *TurnStopRequested, *TurnStopped, *TurnClaimExpired:
		p.evolveTurn(r)
	}
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
