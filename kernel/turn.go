package kernel

import (
	"encoding/json"
	"time"
)

// Turn is one Turn as the events made it: the state the engine decides on and,
// unchanged, the state the projections show (they fold it with EvolveTurn
// too). Time fields are the times of the events that set them.
type Turn struct {
	ID              string
	Order           uint64 // ledger_seq of its dispatch
	Dispatch        TurnDispatched
	State           string
	Outcome         string // set when finished
	StopRequested   bool
	StopRequestedAt *time.Time
	Claim           *Claim
	Attempts        int    // claims taken so far
	TurnSeq         uint64 // last turn_seq given to a record
	FinalPayload    json.RawMessage
	FinalRecordRole *string // set when the holder finished it
	CreatedAt       time.Time
	UpdatedAt       time.Time
	FinishedAt      *time.Time
	Seq             uint64 // ledger_seq of the last event that changed it
}

// Claim is a live lease on a Turn.
type Claim struct {
	ID        string
	AgentID   string
	TokenHash string
	ClaimedAt time.Time
	ExpiresAt time.Time
}

// RootTurnID returns the id of the Turn's root: itself for a root Turn.
func (t *Turn) RootTurnID() string {
	if t.Dispatch.RootTurnID == "" {
		return t.ID
	}
	return t.Dispatch.RootTurnID
}

// FinalTurnSeq is the turn_seq of a finish's final record: the one the event
// carries, or the next after t's last record for an event that carries none.
func FinalTurnSeq(t *Turn, d *TurnFinished) uint64 {
	if d.TurnSeq != 0 {
		return d.TurnSeq
	}
	return t.TurnSeq + 1
}

// FreesWork reports whether a Turn event of type typ can make a Turn
// claimable for its target (a dispatch, a resume, an expired claim released)
// or free some of the target's capacity (a suspend, a finish, a stop): what a
// waiting claim must be woken for. Evolve's Turn cases decide it; a new
// transition that queues a Turn or ends a claim belongs here too.
func FreesWork(typ string) bool {
	switch typ {
	case EvTurnDispatched, EvTurnResumed, EvTurnSuspended, EvTurnFinished, EvTurnStopped, EvTurnClaimExpired:
		return true
	}
	return false
}

// EvolveTurn is the Turn state machine: it folds one event of a Turn's
// aggregate into t, which is nil before the Turn's dispatch, and returns the
// Turn after it (t itself, changed in place, or a new Turn for a dispatch).
// An event of a Turn never dispatched returns nil; a repeated dispatch
// changes nothing. Like Evolve it never fails. What a Turn's change does to
// the rest of the project (queues, agents' capacity) is Evolve's.
func EvolveTurn(t *Turn, r Recorded) *Turn {
	e := r.Event
	if d, ok := e.Data.(*TurnDispatched); ok {
		if t != nil {
			return t
		}
		return &Turn{ID: e.ID, Order: r.Seq, Dispatch: *d, State: StateQueued, CreatedAt: e.At, UpdatedAt: e.At, Seq: r.Seq}
	}
	if t == nil {
		return nil
	}
	finish := func(outcome string) {
		t.State, t.Outcome, t.Claim = StateFinished, outcome, nil
		t.FinishedAt = ptr(e.At)
	}
	switch d := e.Data.(type) {
	case *TurnClaimed:
		t.State = StateClaimed
		t.Claim = &Claim{ID: d.ClaimID, AgentID: d.AgentID, TokenHash: d.TokenHash, ClaimedAt: e.At, ExpiresAt: d.ExpiresAt}
		t.Attempts++
	case *TurnClaimRenewed:
		if t.Claim != nil && t.Claim.ID == d.ClaimID {
			t.Claim.ExpiresAt = d.ExpiresAt
		}
	case *TurnRecordAppended:
		t.TurnSeq = max(t.TurnSeq, d.TurnSeq)
	case *TurnSuspended:
		t.State, t.Claim = StateSuspended, nil
	case *TurnResumed:
		t.State = StateQueued
	case *TurnFinished:
		if !IsNull(d.FinalPayload) {
			t.TurnSeq = max(t.TurnSeq, FinalTurnSeq(t, d))
			t.FinalPayload = d.FinalPayload
		}
		t.FinalRecordRole = ptr(d.FinalRecordRole)
		finish(d.Outcome)
	case *TurnStopRequested:
		t.StopRequested, t.StopRequestedAt = true, ptr(e.At)
	case *TurnStopped:
		t.StopRequested, t.StopRequestedAt = true, ptr(e.At)
		finish(OutcomeStopped)
	case *TurnClaimExpired:
		if d.Stopped {
			t.StopRequested = true
			finish(OutcomeStopped)
		} else {
			t.State, t.Claim = StateQueued, nil
		}
	default:
		return t // a Turn event without a transition: nothing changes
	}
	t.UpdatedAt, t.Seq = e.At, r.Seq
	return t
}

// evolveTurn folds a Turn event into the project: the Turn by EvolveTurn,
// then what its change of state and claim does to the agent's queue and to
// the claim holder's capacity.
func (p *Project) evolveTurn(r Recorded) {
	e := r.Event
	old := p.Turn(e.ID) // a finished one unpacked: it is kept again below
	oldState, oldHolder := "", ""
	if old != nil {
		oldState, oldHolder = old.State, old.holder()
	}
	t := EvolveTurn(old, r)
	if t == nil {
		return
	}
	if t.State == StateFinished && oldState != StateFinished {
		p.slim(t) // snapshot.go
	}
	if old == nil {
		if t.Dispatch.DispatchKey != "" {
			p.DispatchKeys[DispatchKeyOf(t.Dispatch.RequestedBy.AgentID, t.Dispatch.DispatchKey)] = t.ID
		}
	}
	switch {
	case oldState == StateQueued && t.State != StateQueued:
		p.dequeue(t)
	case oldState != StateQueued && t.State == StateQueued:
		p.enqueue(t)
	}
	p.claims.track(t)
	if h := t.holder(); h != oldHolder {
		if a := p.Agents[oldHolder]; a != nil && a.ActiveClaims > 0 {
			a.ActiveClaims--
		}
		if a := p.Agents[h]; a != nil {
			a.ActiveClaims++
		}
	}
	p.keep(t)
}

// holder returns the agent holding the Turn's claim, or "".
func (t *Turn) holder() string {
	if t.Claim == nil {
		return ""
	}
	return t.Claim.AgentID
}

func ptr[T any](v T) *T { return &v }
