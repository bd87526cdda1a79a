package kernel

import (
	"cmp"
	"slices"
)

// Project is the write model of one project: everything Decide needs, folded
// by Evolve from the project's events. The zero value is an empty project
// (use NewProject for one with its maps made).
type Project struct {
	ID  string
	Seq uint64 // ledger_seq of the last event folded

	Agents       map[string]*Agent
	Credentials  map[string]*Credential // by credential id
	Turns        map[string]*Turn       // the Turns not finished; Turn finds any (finished.go)
	Finished     FinishedTurns          // the finished Turns; nil keeps them in a map (finished.go)
	DispatchKeys map[string]string      // DispatchKeyOf(requester, dispatch_key) → turn id; DispatchedAs finds any (finished.go)
	Invites      map[string]*Invite
	InviteCodes  map[string]string      // code hash → invite id
	queues       map[string]*agentQueue // the queued Turns of each agent (queue.go)
	queued       map[string]*queueEntry // turn id → its place in its agent's queue
	children     map[string][]string    // turn id → its children's ids, in order of dispatch
	timers       timers                 // the Turns with a next due time (queue.go)
	idem         idemMemory             // recent idempotency keys (idempotency.go)
	authChanges  uint64                 // events folded that changed Agents or Credentials (the engine's auth view, authview.go)
}

// NewProject returns an empty project.
func NewProject(id string) *Project {
	return &Project{
		ID:           id,
		Agents:       map[string]*Agent{},
		Credentials:  map[string]*Credential{},
		Turns:        map[string]*Turn{},
		Finished:     finishedMap{},
		DispatchKeys: map[string]string{},
		Invites:      map[string]*Invite{},
		InviteCodes:  map[string]string{},
		queues:       map[string]*agentQueue{},
		queued:       map[string]*queueEntry{},
		children:     map[string][]string{},
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
//
// It also remembers the answer of an event that carries an idempotency key
// (idempotency.go), so that the memory is rebuilt from the ledger after a
// restart and on every instance.
func Evolve(p *Project, r Recorded) {
	evolveState(p, r)
	p.remember(r)
}

func evolveState(p *Project, r Recorded) {
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
	}
	if e.Aggregate == AggTurn {
		p.evolveTurn(r)
	}
}

// AuthChanges counts the events folded that changed Agents or Credentials:
// a view of them made at one count is current while the count stays.
func (p *Project) AuthChanges() uint64 { return p.authChanges }

// Reindex rebuilds the agents' queues and the timers from p.Turns, for a
// write model put together from a snapshot rather than folded.
func (p *Project) Reindex() {
	p.init()
	p.queues, p.queued, p.timers, p.children = map[string]*agentQueue{}, map[string]*queueEntry{}, timers{}, map[string][]string{}
	type link struct {
		order      uint64
		id, parent string
	}
	var links []link
	add := func(id, parent string, order uint64) {
		if parent != "" {
			links = append(links, link{order, id, parent})
		}
	}
	for _, t := range p.Turns {
		if t.State == StateQueued {
			p.enqueue(t)
		}
		p.timers.track(t)
		add(t.ID, t.Dispatch.Authority.ParentTurnID, t.Order)
	}
	switch f := p.Finished.(type) {
	case nil:
	case parentLister:
		f.Parents(add)
	default:
		f.Each(func(t *Turn) { add(t.ID, t.Dispatch.Authority.ParentTurnID, t.Order) })
	}
	slices.SortFunc(links, func(a, b link) int { return cmp.Compare(a.order, b.order) })
	for _, l := range links {
		p.children[l.parent] = append(p.children[l.parent], l.id)
	}
}

// parentLister is a store of finished Turns that lists their parent links
// (the Turn, its parent when it has one, its dispatch's ledger_seq) without
// making each Turn: what Reindex needs of them.
type parentLister interface {
	Parents(fn func(id, parent string, order uint64))
}
