package projection

import (
	"encoding/json"

	"github.com/turnledger/turnledger/kernel"
)

// foldTurn applies a Turn event. The Turn's state is folded by the kernel's
// own state machine (kernel.EvolveTurn); this fold adds only what readers
// need around it: the semantic records, the indexes and the feeds. An event
// of a Turn that was never dispatched is kept in the feeds and changes no
// model.
func (f *folder) foldTurn(r kernel.Recorded) error {
	e := r.Event
	p, id := e.ProjectID, e.ID
	tk := key(p, id)
	rec, err := f.turn(tk)
	if err != nil {
		return err
	}
	if err := f.put(wTurnFeed, seqKey(r.Seq, p, id), nil); err != nil {
		return err
	}
	if rec == nil {
		t := kernel.EvolveTurn(nil, r)
		if t == nil {
			return nil
		}
		return f.dispatched(r, t)
	}
	t := &rec.Turn
	oldState, oldHolder := t.State, holder(t)
	// The semantic record is written with the claim it was made under,
	// which a finish releases: before the Turn moves on.
	switch d := e.Data.(type) {
	case *kernel.TurnRecordAppended:
		if err := f.putContext(r, t, d.TurnSeq, d.Role, d.Payload, d.ClaimID); err != nil {
			return err
		}
	case *kernel.TurnFinished:
		if !kernel.IsNull(d.FinalPayload) {
			if err := f.putContext(r, t, kernel.FinalTurnSeq(t, d), d.FinalRecordRole, d.FinalPayload, d.ClaimID); err != nil {
				return err
			}
		}
	case *kernel.TurnInputProvided:
		if err := f.putContext(r, t, d.TurnSeq, kernel.RoleInput, d.Input, ""); err != nil {
			return err
		}
	case *kernel.TurnRetryScheduled:
		if !kernel.IsNull(d.FinalPayload) {
			if err := f.putContext(r, t, d.TurnSeq, d.FinalRecordRole, d.FinalPayload, d.ClaimID); err != nil {
				return err
			}
		}
	}
	kernel.EvolveTurn(t, r)
	if t.Claim != nil {
		t.Claim.TokenHash = "" // readers never need it
	}
	f.changed = append(f.changed, string(tk))
	if err := f.reindexTurn(p, t, oldState, oldHolder); err != nil {
		return err
	}
	return f.turnAgentFeeds(r, t)
}

// dispatched stores a new Turn with the agents who may read it, and indexes
// it.
func (f *folder) dispatched(r kernel.Recorded, t *kernel.Turn) error {
	p, id := r.Event.ProjectID, t.ID
	var root *kernel.TurnDispatched
	if rootID := t.RootTurnID(); rootID != id {
		rr, err := f.turn(key(p, rootID))
		if err != nil {
			return err
		}
		if rr != nil {
			root = &rr.Turn.Dispatch
		}
	}
	rec := &turnRecord{Turn: *t, Readers: kernel.TurnReaders(p, &t.Dispatch, root)}
	if parent := t.Dispatch.Authority.ParentTurnID; parent != "" {
		if err := f.put(wChildren, seqKey(r.Seq, p, parent), []byte(id)); err != nil {
			return err
		}
	}
	if err := f.put(wByDispatch, seqKey(r.Seq, p), []byte(id)); err != nil {
		return err
	}
	if err := f.put(wByTarget, seqKey(r.Seq, p, t.Dispatch.TargetAgent.AgentID), []byte(id)); err != nil {
		return err
	}
	for _, tag := range t.Dispatch.Tags {
		if err := f.put(wByTag, seqKey(r.Seq, p, tag), []byte(id)); err != nil {
			return err
		}
	}
	for _, a := range rec.Readers {
		if err := f.put(wByAgent, seqKey(r.Seq, p, a), []byte(id)); err != nil {
			return err
		}
	}
	if err := f.reindexTurn(p, &rec.Turn, "", ""); err != nil {
		return err
	}
	k := string(key(p, id))
	f.turnCache[k] = rec
	f.changed = append(f.changed, k)
	return f.turnAgentFeeds(r, &rec.Turn)
}

// putContext stores a semantic record of t at turn_seq seq.
func (f *folder) putContext(r kernel.Recorded, t *kernel.Turn, seq uint64, role string, payload json.RawMessage, claimID string) error {
	agent := r.Event.Actor.AgentID
	if t.Claim != nil && t.Claim.ID == claimID {
		agent = t.Claim.AgentID
	}
	it := ContextItem{TurnSeq: seq, Role: role, Payload: payload, ClaimID: claimID, AgentID: agent, At: r.Event.At, LedgerSeq: r.Seq}
	buf, err := json.Marshal(it)
	if err != nil {
		return err
	}
	return f.put(wContext, seqKey(seq, r.Event.ProjectID, t.ID), buf)
}

// turnAgentFeeds indexes a Turn event in the feeds of the agents involved in
// the Turn (kernel.Involved).
func (f *folder) turnAgentFeeds(r kernel.Recorded, t *kernel.Turn) error {
	p := r.Event.ProjectID
	for _, a := range kernel.Involved(p, &t.Dispatch) {
		if err := f.put(wAgentFeed, seqKey(r.Seq, p, a), nil); err != nil {
			return err
		}
	}
	return nil
}

func holder(t *kernel.Turn) string {
	if t.Claim == nil {
		return ""
	}
	return t.Claim.AgentID
}

// reindexTurn moves the indexes that depend on a Turn's state from the old
// state and claim holder ("" for a new Turn) to t's: the state index, the
// queued counters of the offers, and the active claims of agents.
func (f *folder) reindexTurn(p string, t *kernel.Turn, oldState, oldHolder string) error {
	if oldState != t.State {
		if oldState != "" {
			f.del(wByState, seqKey(t.Order, p, oldState))
		}
		if err := f.put(wByState, seqKey(t.Order, p, t.State), []byte(t.ID)); err != nil {
			return err
		}
		qk := key(p, t.Dispatch.TargetAgent.AgentID, t.Dispatch.TurnKind)
		if oldState == kernel.StateQueued {
			f.addCount(cQueued, qk, -1)
		}
		if t.State == kernel.StateQueued {
			f.addCount(cQueued, qk, 1)
		}
	}
	if h := holder(t); h != oldHolder {
		if oldHolder != "" {
			f.addCount(cClaims, key(p, oldHolder), -1)
		}
		if h != "" {
			f.addCount(cClaims, key(p, h), 1)
		}
	}
	return nil
}

// ViewOf is the public view of a Turn's kernel state: the same state,
// shaped for readers. It decides nothing. A command's answer shows the
// engine's Turn through it (engine.AsOf), which is the view the
// projections fold from the same events.
func ViewOf(project string, t *kernel.Turn) TurnView {
	d := &t.Dispatch
	v := TurnView{
		ProjectID: project, TurnID: t.ID, TurnKind: d.TurnKind, State: t.State,
		StopRequested: t.StopRequested, StopRequestedAt: t.StopRequestedAt,
		TargetAgent: d.TargetAgent, RequestedBy: d.RequestedBy, Input: d.Input, DispatchKey: d.DispatchKey,
		Authority:  AuthorityView{Mode: d.Authority.Mode, RequestID: d.Authority.RequestID, ParentTurnID: d.Authority.ParentTurnID},
		RootTurnID: t.RootTurnID(), Depth: d.Depth, Attempts: t.Attempts, LastTurnSeq: t.TurnSeq,
		FinalPayload: t.FinalPayload, FinalRecordRole: t.FinalRecordRole,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, FinishedAt: t.FinishedAt, LedgerSeq: t.Seq,
	}
	if t.Outcome != "" {
		v.Outcome = ptr(t.Outcome)
	}
	s := d.Schedule
	v.Priority, v.NotBefore, v.ClaimBy, v.Deadline, v.RetryBackoff = s.EffectivePriority(), t.NotBefore, s.ClaimBy, s.Deadline, s.RetryBackoff
	v.MaxAttempts = s.MaxAttempts
	if d.RetryOf != "" {
		v.RetryOf = ptr(d.RetryOf)
	}
	v.Tags = d.Tags
	if v.Tags == nil {
		v.Tags = []string{}
	}
	if d.ContextID != "" {
		v.ContextID = ptr(d.ContextID)
	}
	if w := t.AwaitingInput; w != nil {
		v.AwaitingInput = &AwaitingInputView{Prompt: w.Prompt, Schema: w.Schema, InputBy: w.InputBy}
		if len(w.Schema) == 0 {
			v.AwaitingInput.Schema = json.RawMessage("null")
		}
	}
	if d.Authority.ParentTurnID != "" {
		v.Parent = &kernel.TurnRef{ProjectID: project, TurnID: d.Authority.ParentTurnID}
	}
	if c := t.Claim; c != nil {
		v.Claim = &ClaimView{ClaimID: c.ID, AgentID: c.AgentID, ClaimedAt: c.ClaimedAt, ExpiresAt: c.ExpiresAt}
	}
	if kernel.IsNull(v.FinalPayload) {
		v.FinalPayload = nil
	}
	return v
}
