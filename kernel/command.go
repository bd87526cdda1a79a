package kernel

import (
	"time"
)

// Command is one request to change a project, decided by Decide into at
// most one event. Each command type declares its own decision and its name
// beside its aggregate (turn.go, agent.go, credential.go, invite.go), so a
// command without either does not compile.
type Command interface {
	// Name is the command's stable name. It scopes idempotency keys, which
	// the ledger remembers, so it never changes with a Go rename.
	Name() string
	decide(d decider) (*Event, error)
	common() Common
}

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

// Decide is the one place where the rules of the domain live: given the
// project's state, a command and the time, it returns the events the command
// causes (at most one; none when the command changes nothing, such as a
// repeated idempotent dispatch or a claim with nothing to claim) or an *Error.
// It never reads the clock, draws ids, logs or does I/O, and never changes p
// (a zero Project is read as an empty one).
func Decide(p *Project, cmd Command, now time.Time) ([]Event, error) {
	if p.Agents == nil {
		p = NewProject(p.ID)
	}
	c := cmd.common()
	if err := validateCommon(c); err != nil {
		return nil, err
	}
	d := decider{p: p, now: now.UTC(), c: c}
	var events []Event
	if m, ok := cmd.(multiDecider); ok {
		evs, err := m.decideAll(d)
		if err != nil {
			return nil, err
		}
		events = evs
	} else {
		ev, err := cmd.decide(d)
		if err != nil || ev == nil {
			return nil, err
		}
		events = []Event{*ev}
	}
	key := ScopedKey(cmd)
	for i := range events {
		events[i].Idem = key
	}
	return events, nil
}

// multiDecider is a command that may decide several events, appended all or
// none (a cascading stop).
type multiDecider interface {
	decideAll(d decider) ([]Event, error)
}

type decider struct {
	p   *Project
	now time.Time
	c   Common
}

// event builds an event of the project with the command's actor, meta and trace.
func (d decider) event(typ, aggregate, id string, data any) *Event {
	return &Event{
		Type: typ, V: 1, ProjectID: d.p.ID, Aggregate: aggregate, ID: id,
		At: d.now, Actor: d.c.Caller.Actor(), Data: data, Meta: d.c.Meta, Trace: d.c.Trace,
	}
}

func (d decider) agent(id string) (*Agent, error) {
	if !ValidID(id) {
		return nil, invalid("agent id %q must be 1 to 128 letters, digits, '_' or '-'", id)
	}
	a := d.p.Agents[id]
	if a == nil {
		return nil, Errorf(NotFound, "agent %s not found in project %s", id, d.p.ID)
	}
	return a, nil
}

func (d decider) turn(id string) (*Turn, error) {
	if !ValidID(id) {
		return nil, invalid("turn id %q must be 1 to 128 letters, digits, '_' or '-'", id)
	}
	t := d.p.Turn(id)
	if t == nil {
		return nil, Errorf(NotFound, "turn %s not found in project %s", id, d.p.ID)
	}
	return t, nil
}

// sameProject enforces that every project_id a body names is the path's.
func (d decider) sameProject(field, project string) error {
	if project == "" {
		return invalid("%s.project_id is required", field)
	}
	if project != d.p.ID {
		return Errorf(Forbidden, "%s.project_id %q does not match project %s of the path", field, project, d.p.ID)
	}
	return nil
}

// bodyAgent checks the agent a body names against the agent of the path. A
// missing reference (nil) is allowed where the body may omit it.
func (d decider) bodyAgent(ref *AgentRef, agentID string) error {
	if ref == nil {
		return nil
	}
	if err := d.sameProject("agent", ref.ProjectID); err != nil {
		return err
	}
	if ref.AgentID != agentID {
		return invalid("agent.agent_id %q does not match agent %s of the path", ref.AgentID, agentID)
	}
	return nil
}

// actingAs checks a requested_by reference: in this project, an existing
// agent, and the caller itself unless the caller is the admin.
func (d decider) actingAs(ref AgentRef) error {
	if err := d.sameProject("requested_by", ref.ProjectID); err != nil {
		return err
	}
	if _, err := d.agent(ref.AgentID); err != nil {
		return err
	}
	if !d.c.Caller.Admin && ref.AgentID != d.c.Caller.AgentID {
		return Errorf(Forbidden, "requested_by names agent %s but the caller is %s", ref.AgentID, d.c.Caller.AgentID)
	}
	return nil
}
