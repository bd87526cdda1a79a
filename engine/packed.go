package engine

import (
	"time"

	"github.com/turnledger/turnledger/kernel"
)

// packedTurns is the engine's store of a project's finished Turns
// (kernel.FinishedTurns). A finished Turn is most of a long ledger's write
// model and decisions read little of it, so the store keeps only that (see
// slim): the Turn's bytes as the binary part of a snapshot holds them
// (snapbin.go), a fraction of a Turn's heap, unpacked into a fresh Turn when
// a decision asks for it. The strings many Turns share (agent ids, kinds,
// modes, outcomes) are interned.
type packedTurns struct {
	done map[string][]byte
	strs map[string]string
}

// NewProject returns an empty write model that keeps its finished Turns
// packed, as the engine does: for a tool that folds write models itself and
// saves them with EncodeSnapshot (replay).
func NewProject(id string) *kernel.Project {
	p := kernel.NewProject(id)
	p.Finished = newPackedTurns()
	return p
}

func newPackedTurns() *packedTurns {
	return &packedTurns{done: map[string][]byte{}, strs: map[string]string{}}
}

// Get unpacks the finished Turn with the id, or returns nil.
func (s *packedTurns) Get(id string) *kernel.Turn {
	b, ok := s.done[id]
	if !ok {
		return nil
	}
	r := slimReader{b: b, strs: s.strs}
	t := r.turn()
	if r.err != nil {
		return nil
	}
	return t
}

// Put slims t and keeps it packed; t itself is left as it was.
func (s *packedTurns) Put(t *kernel.Turn) {
	c := *t
	s.slim(&c)
	s.done[c.ID] = appendSlim(nil, &c)
}

func (s *packedTurns) Len() int { return len(s.done) }

// Parents calls fn with the id, the parent (empty for a root) and the
// dispatch's ledger_seq of every Turn the store keeps, reading only those
// fields of the packed bytes.
func (s *packedTurns) Parents(fn func(id, parent string, order uint64)) {
	for id, b := range s.done {
		r := slimReader{b: b}
		if parent, order := r.parent(); r.err == nil {
			fn(id, parent, order)
		}
	}
}

func (s *packedTurns) Each(fn func(t *kernel.Turn)) {
	for id := range s.done {
		if t := s.Get(id); t != nil {
			fn(t)
		}
	}
}

// slim drops from a finished Turn what no decision reads again: its input,
// final payload and record role, its stop time, its claim, its times and its
// schedule (a :retry reads the schedule and the input from the Turn's
// dispatch event on the ledger).
// The projections keep all of it for readers. The fields it keeps are those
// appendSlim writes; a field of kernel.Turn that is neither kept nor dropped
// here fails TestPackedTurnCarriesEveryField.
func (s *packedTurns) slim(t *kernel.Turn) {
	t.Dispatch.Input, t.FinalPayload, t.FinalRecordRole = nil, nil, nil
	t.StopRequestedAt, t.FinishedAt, t.Claim = nil, nil, nil
	t.CreatedAt, t.UpdatedAt = time.Time{}, time.Time{}
	t.Dispatch.Schedule, t.Dispatch.RetryOf, t.NotBefore, t.AwaitingInput = kernel.Schedule{}, "", nil, nil
	t.Dispatch.Tags, t.Dispatch.ContextID, t.TreeStopped = nil, "", false
	d := &t.Dispatch
	for _, p := range []*string{&d.TargetAgent.ProjectID, &d.TargetAgent.AgentID, &d.RequestedBy.ProjectID,
		&d.RequestedBy.AgentID, &d.TurnKind, &d.Authority.Mode, &t.Outcome} {
		*p = s.intern(*p)
	}
}

// intern returns the store's copy of v. The table only grows with the
// distinct values of the fields slim interns: agents, kinds, outcomes.
func (s *packedTurns) intern(v string) string {
	if v == "" {
		return v
	}
	if w, ok := s.strs[v]; ok {
		return w
	}
	s.strs[v] = v
	return v
}
