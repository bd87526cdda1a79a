package projection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/turnledger/turnledger/kernel"
)

// folder applies events inside one write transaction. It opens a bucket
// when an event first needs it (bbolt caches it for the transaction): most
// events touch about half of the buckets, and opening one allocates.
type folder struct {
	tx *bolt.Tx

	// turnCache holds the Turn records read or written in this transaction;
	// they are encoded once, by flush, however many events of the batch
	// change them.
	turnCache map[string]*turnRecord
}

func newFolder(tx *bolt.Tx) *folder {
	return &folder{tx: tx, turnCache: map[string]*turnRecord{}}
}

// turn returns the cached record of a Turn, reading it when needed; nil when
// there is none.
func (f *folder) turn(tk []byte) (*turnRecord, error) {
	if rec, ok := f.turnCache[string(tk)]; ok {
		return rec, nil
	}
	var rec turnRecord
	found, err := getJSON(f.tx.Bucket(bktTurns), tk, &rec)
	if err != nil || !found {
		return nil, err
	}
	f.turnCache[string(tk)] = &rec
	return &rec, nil
}

// flush writes the Turn records changed in this transaction.
func (f *folder) flush() error {
	for k, rec := range f.turnCache {
		if err := putJSON(f.tx.Bucket(bktTurns), []byte(k), rec); err != nil {
			return err
		}
	}
	return nil
}

// dataAs reads an event's data as T, whether it holds a T or a *T.
func dataAs[T any](e kernel.Event) (T, error) {
	switch d := e.Data.(type) {
	case *T:
		if d != nil {
			return *d, nil
		}
	case T:
		return d, nil
	}
	var zero T
	return zero, fmt.Errorf("data of %s is %T, want %T", e.Type, e.Data, zero)
}

func (f *folder) fold(r kernel.Recorded) error {
	e := r.Event
	p := e.ProjectID
	item, err := feedItem(r)
	if err != nil {
		return err
	}
	if err := f.tx.Bucket(bktFeed).Put(seqKey(r.Seq, p), item); err != nil {
		return err
	}
	if e.Actor.Kind == kernel.ActorAgent && e.Actor.AgentID != "" {
		if err := f.see(p, e.Actor.AgentID, e.At); err != nil {
			return err
		}
	}
	switch e.Aggregate {
	case kernel.AggTurn:
		return f.foldTurn(r)
	case kernel.AggAgent:
		if err := f.tx.Bucket(bktAgentFeed).Put(seqKey(r.Seq, p, e.ID), nil); err != nil {
			return err
		}
		return f.foldAgent(r)
	case kernel.AggCredential, kernel.AggInvite:
		return f.foldCredential(r)
	}
	return nil // other aggregates are in the project feed only
}

// see records that an agent was seen at t (the latest time wins).
func (f *folder) see(p, agent string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	k := key(p, agent)
	n := uint64(t.UnixNano())
	if old := f.tx.Bucket(bktSeen).Get(k); old != nil && getU64(old) >= n {
		return nil
	}
	return f.tx.Bucket(bktSeen).Put(k, putU64(n))
}

// feedItem encodes the feed form of an event: the envelope, its ledger_seq,
// and data with every token_hash and code_hash field removed at any depth.
func feedItem(r kernel.Recorded) ([]byte, error) {
	e := r.Event
	data, err := json.Marshal(e.Data)
	if err != nil {
		return nil, fmt.Errorf("encode data: %w", err)
	}
	// Fast path: the encoder never escapes letters or '_', so a data without
	// these bytes has no field to strip. A "\u" may hide an escaped key.
	if bytes.Contains(data, []byte("token_hash")) || bytes.Contains(data, []byte("code_hash")) ||
		bytes.Contains(data, []byte(`\u`)) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("decode data: %w", err)
		}
		if data, err = json.Marshal(stripSecrets(v)); err != nil {
			return nil, fmt.Errorf("encode data: %w", err)
		}
	}
	return json.Marshal(FeedItem{
		LedgerSeq: r.Seq, Type: e.Type, V: e.V, ProjectID: e.ProjectID, Aggregate: e.Aggregate,
		ID: e.ID, At: e.At, Actor: e.Actor, Data: data, Meta: e.Meta, Trace: e.Trace,
	})
}

// secretFields are the field names a feed never shows.
var secretFields = []string{"token_hash", "code_hash"}

func stripSecrets(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for _, name := range secretFields {
			delete(x, name)
		}
		for k, c := range x {
			x[k] = stripSecrets(c)
		}
	case []any:
		for i, c := range x {
			x[i] = stripSecrets(c)
		}
	}
	return v
}

func putJSON(b *bolt.Bucket, k []byte, v any) error {
	buf, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, buf)
}

func getJSON(b *bolt.Bucket, k []byte, v any) (bool, error) {
	buf := b.Get(k)
	if buf == nil {
		return false, nil
	}
	return true, json.Unmarshal(buf, v)
}

// addCount adds d to the counter at k, deleting it at zero.
func addCount(b *bolt.Bucket, k []byte, d int) error {
	n := int64(getU64(b.Get(k))) + int64(d)
	if n <= 0 {
		return b.Delete(k)
	}
	return b.Put(k, putU64(uint64(n)))
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

func ptr[T any](v T) *T { return &v }

// foldTurn applies a Turn event. An event of a Turn that was never
// dispatched is kept in the feeds and changes no model.
func (f *folder) foldTurn(r kernel.Recorded) error {
	e := r.Event
	p, id := e.ProjectID, e.ID
	tk := key(p, id)
	cached, err := f.turn(tk)
	if err != nil {
		return err
	}
	if err := f.tx.Bucket(bktTurnFeed).Put(seqKey(r.Seq, p, id), nil); err != nil {
		return err
	}
	if e.Type == kernel.EvTurnDispatched {
		if cached != nil {
			return f.turnAgentFeeds(r, cached.View) // a repeated dispatch changes nothing
		}
		d, err := dataAs[kernel.TurnDispatched](e)
		if err != nil {
			return err
		}
		v := TurnView{
			ProjectID: p, TurnID: id, TurnKind: d.TurnKind, State: StateQueued,
			TargetAgent: d.TargetAgent, RequestedBy: d.RequestedBy, Input: d.Input,
			DispatchKey: d.DispatchKey,
			Authority:   AuthorityView{Mode: d.Authority.Mode, RequestID: d.Authority.RequestID, ParentTurnID: d.Authority.ParentTurnID},
			RootTurnID:  d.RootTurnID, Depth: d.Depth, CreatedAt: e.At, UpdatedAt: e.At, LedgerSeq: r.Seq,
		}
		if v.RootTurnID == "" {
			v.RootTurnID = id
		}
		if d.Authority.ParentTurnID != "" {
			v.Parent = &kernel.TurnRef{ProjectID: p, TurnID: d.Authority.ParentTurnID}
			if err := f.tx.Bucket(bktChildren).Put(seqKey(r.Seq, p, d.Authority.ParentTurnID), []byte(id)); err != nil {
				return err
			}
		}
		if err := f.tx.Bucket(bktByDispatch).Put(seqKey(r.Seq, p), []byte(id)); err != nil {
			return err
		}
		if err := f.tx.Bucket(bktByTarget).Put(seqKey(r.Seq, p, v.TargetAgent.AgentID), []byte(id)); err != nil {
			return err
		}
		for _, a := range involved(v) {
			if err := f.tx.Bucket(bktByAgent).Put(seqKey(r.Seq, p, a), []byte(id)); err != nil {
				return err
			}
		}
		nw := &turnRecord{View: v, DispatchSeq: r.Seq}
		if err := f.reindexTurn(nil, nw); err != nil {
			return err
		}
		f.turnCache[string(tk)] = nw
		return f.turnAgentFeeds(r, v)
	}
	if cached == nil {
		return nil
	}
	rec := cached
	old := *rec
	if old.View.Claim != nil {
		c := *old.View.Claim
		old.View.Claim = &c
	}
	v := &rec.View
	finish := func(outcome string) {
		v.State = StateFinished
		v.Outcome = ptr(outcome)
		v.Claim = nil
		v.FinishedAt = ptr(e.At)
	}
	switch e.Type {
	case kernel.EvTurnClaimed:
		d, err := dataAs[kernel.TurnClaimed](e)
		if err != nil {
			return err
		}
		v.State = StateClaimed
		v.Claim = &ClaimView{ClaimID: d.ClaimID, AgentID: d.AgentID, ClaimedAt: e.At, ExpiresAt: d.ExpiresAt}
		v.Attempts++
	case kernel.EvTurnClaimRenewed:
		d, err := dataAs[kernel.TurnClaimRenewed](e)
		if err != nil {
			return err
		}
		if v.Claim != nil && v.Claim.ClaimID == d.ClaimID {
			v.Claim.ExpiresAt = d.ExpiresAt
		}
	case kernel.EvTurnRecordAppended:
		d, err := dataAs[kernel.TurnRecordAppended](e)
		if err != nil {
			return err
		}
		if err := f.putContext(r, v, d.TurnSeq, d.Role, d.Payload, d.ClaimID); err != nil {
			return err
		}
	case kernel.EvTurnSuspended:
		v.State = StateSuspended
		v.Claim = nil
	case kernel.EvTurnResumed:
		v.State = StateQueued
	case kernel.EvTurnFinished:
		d, err := dataAs[kernel.TurnFinished](e)
		if err != nil {
			return err
		}
		if !isNull(d.FinalPayload) {
			seq := d.TurnSeq
			if seq == 0 {
				seq = v.LastTurnSeq + 1
			}
			if err := f.putContext(r, v, seq, d.FinalRecordRole, d.FinalPayload, d.ClaimID); err != nil {
				return err
			}
			v.FinalPayload = d.FinalPayload
		}
		v.FinalRecordRole = ptr(d.FinalRecordRole)
		finish(d.Outcome)
	case kernel.EvTurnStopRequested:
		v.StopRequested, v.StopRequestedAt = true, ptr(e.At)
	case kernel.EvTurnStopped:
		v.StopRequested, v.StopRequestedAt = true, ptr(e.At)
		finish(OutcomeStopped)
	case kernel.EvTurnClaimExpired:
		d, err := dataAs[kernel.TurnClaimExpired](e)
		if err != nil {
			return err
		}
		if d.Stopped {
			v.StopRequested = true
			finish(OutcomeStopped)
		} else {
			v.State = StateQueued
			v.Claim = nil
		}
	default:
		// A Turn event the projections do not model: feeds only.
		return f.turnAgentFeeds(r, *v)
	}
	v.UpdatedAt = e.At
	v.LedgerSeq = r.Seq
	if err := f.reindexTurn(&old, rec); err != nil {
		return err
	}
	return f.turnAgentFeeds(r, *v)
}

// putContext stores a semantic record of v at turn_seq seq.
func (f *folder) putContext(r kernel.Recorded, v *TurnView, seq uint64, role string, payload json.RawMessage, claimID string) error {
	agent := r.Event.Actor.AgentID
	if v.Claim != nil && v.Claim.ClaimID == claimID {
		agent = v.Claim.AgentID
	}
	it := ContextItem{TurnSeq: seq, Role: role, Payload: payload, ClaimID: claimID, AgentID: agent, At: r.Event.At, LedgerSeq: r.Seq}
	if seq > v.LastTurnSeq {
		v.LastTurnSeq = seq
	}
	return putJSON(f.tx.Bucket(bktContext), seqKey(seq, v.ProjectID, v.TurnID), it)
}

// involved returns the agents of the Turn's project that are its target or
// its requester: the agents whose feed has its events and who may read it.
func involved(v TurnView) []string {
	var out []string
	for _, a := range []kernel.AgentRef{v.TargetAgent, v.RequestedBy} {
		if a.AgentID == "" || (a.ProjectID != "" && a.ProjectID != v.ProjectID) || slices.Contains(out, a.AgentID) {
			continue
		}
		out = append(out, a.AgentID)
	}
	return out
}

// turnAgentFeeds indexes a Turn event in the feeds of its target agent and
// its requester.
func (f *folder) turnAgentFeeds(r kernel.Recorded, v TurnView) error {
	for _, a := range involved(v) {
		if err := f.tx.Bucket(bktAgentFeed).Put(seqKey(r.Seq, v.ProjectID, a), nil); err != nil {
			return err
		}
	}
	return nil
}

// reindexTurn moves the indexes that depend on a Turn's state from old (nil
// for a new Turn) to nw: the state index, the queued counters of the
// offers, and the active claims of agents.
func (f *folder) reindexTurn(old, nw *turnRecord) error {
	v := nw.View
	p := v.ProjectID
	oldState, oldClaim := "", ""
	if old != nil {
		oldState = old.View.State
		if old.View.Claim != nil {
			oldClaim = old.View.Claim.AgentID
		}
	}
	newClaim := ""
	if v.Claim != nil {
		newClaim = v.Claim.AgentID
	}
	if oldState != v.State {
		if oldState != "" {
			if err := f.tx.Bucket(bktByState).Delete(seqKey(nw.DispatchSeq, p, oldState)); err != nil {
				return err
			}
		}
		if err := f.tx.Bucket(bktByState).Put(seqKey(nw.DispatchSeq, p, v.State), []byte(v.TurnID)); err != nil {
			return err
		}
		qk := key(p, v.TargetAgent.AgentID, v.TurnKind)
		if oldState == StateQueued {
			if err := addCount(f.tx.Bucket(bktQueued), qk, -1); err != nil {
				return err
			}
		}
		if v.State == StateQueued {
			if err := addCount(f.tx.Bucket(bktQueued), qk, 1); err != nil {
				return err
			}
		}
	}
	if oldClaim != newClaim {
		if oldClaim != "" {
			if err := addCount(f.tx.Bucket(bktClaims), key(p, oldClaim), -1); err != nil {
				return err
			}
		}
		if newClaim != "" {
			if err := addCount(f.tx.Bucket(bktClaims), key(p, newClaim), 1); err != nil {
				return err
			}
		}
	}
	return nil
}

// foldAgent applies an agent event.
func (f *folder) foldAgent(r kernel.Recorded) error {
	e := r.Event
	p, id := e.ProjectID, e.ID
	ak := key(p, id)
	var rec agentRecord
	found, err := getJSON(f.tx.Bucket(bktAgents), ak, &rec)
	if err != nil {
		return err
	}
	if e.Type == kernel.EvAgentRegistered {
		d, err := dataAs[kernel.AgentRegistered](e)
		if err != nil {
			return err
		}
		return f.register(r, d)
	} else {
		if !found {
			return nil // an event of an unregistered agent: feeds only
		}
		switch e.Type {
		case kernel.EvAgentDrained:
			rec.Drained = true
		case kernel.EvAgentResumed:
			rec.Drained = false
		case kernel.EvAgentMetadataSet:
			d, err := dataAs[kernel.AgentMetadataReplaced](e)
			if err != nil {
				return err
			}
			rec.PublicMetadata = d.PublicMetadata
		case kernel.EvAgentHeartbeat:
			if err := f.see(p, id, e.At); err != nil {
				return err
			}
			rec.LedgerSeq = r.Seq
			return putJSON(f.tx.Bucket(bktAgents), ak, rec)
		default:
			// Work-memory reports and other agent events: they change
			// nothing but the agent's ledger_seq.
			rec.LedgerSeq = r.Seq
			return putJSON(f.tx.Bucket(bktAgents), ak, rec)
		}
	}
	rec.UpdatedAt = e.At
	rec.LedgerSeq = r.Seq
	return putJSON(f.tx.Bucket(bktAgents), ak, rec)
}

// register applies a registration, whether an agent.registered event or one
// carried by a bootstrap's credential.issued or an invite.redeemed.
func (f *folder) register(r kernel.Recorded, d kernel.AgentRegistered) error {
	e := r.Event
	p, id := e.ProjectID, d.Spec.AgentID
	ak := key(p, id)
	var rec agentRecord
	found, err := getJSON(f.tx.Bucket(bktAgents), ak, &rec)
	if err != nil {
		return err
	}
	oldCaps := rec.Capabilities
	s := d.Spec
	if !found {
		rec = agentRecord{ProjectID: p, AgentID: id, RegisteredAt: e.At}
	}
	rec.Role, rec.Description = s.Role, s.Description
	rec.Enabled, rec.AcceptsWork, rec.Capacity = s.Enabled, s.AcceptsWork, s.Capacity
	rec.Capabilities = dedupe(s.Capabilities)
	rec.Grants = dedupe(s.Grants)
	rec.PublicMetadata = s.PublicMetadata
	rec.Provenance = ProvenanceView{Kind: d.Provenance.Kind, ExternalRef: d.Provenance.ExternalRef, PayloadHash: d.Provenance.PayloadHash}
	for _, c := range oldCaps {
		if !slices.Contains(rec.Capabilities, c) {
			if err := f.tx.Bucket(bktOffers).Delete(key(p, c, id)); err != nil {
				return err
			}
		}
	}
	for _, c := range rec.Capabilities {
		if err := f.tx.Bucket(bktOffers).Put(key(p, c, id), nil); err != nil {
			return err
		}
	}
	rec.UpdatedAt = e.At
	rec.LedgerSeq = r.Seq
	return putJSON(f.tx.Bucket(bktAgents), ak, rec)
}

// dedupe returns s without repeats, in first-seen order, never nil.
func dedupe(s []string) []string {
	out := make([]string, 0, len(s))
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// foldCredential applies a credential or invite event. Both are in the feed
// of the agent they name; a redeemed invite issues a credential.
func (f *folder) foldCredential(r kernel.Recorded) error {
	e := r.Event
	p := e.ProjectID
	var agent string
	var issue *credRecord
	var revoke string
	switch e.Type {
	case kernel.EvCredentialIssued:
		d, err := dataAs[kernel.CredentialIssued](e)
		if err != nil {
			return err
		}
		agent = d.AgentID
		via := d.Via
		if via == "" {
			via = kernel.ViaIssue
		}
		issue = &credRecord{CredentialID: d.CredentialID, AgentID: d.AgentID, ExpiresAt: d.ExpiresAt, Via: via}
		if d.Registration != nil {
			if err := f.register(r, *d.Registration); err != nil {
				return err
			}
		}
	case kernel.EvCredentialRevoked:
		d, err := dataAs[kernel.CredentialRevoked](e)
		if err != nil {
			return err
		}
		agent, revoke = d.AgentID, d.CredentialID
	case kernel.EvInviteCreated:
		d, err := dataAs[kernel.InviteCreated](e)
		if err != nil {
			return err
		}
		agent = d.AgentID
	case kernel.EvInviteRedeemed:
		d, err := dataAs[kernel.InviteRedeemed](e)
		if err != nil {
			return err
		}
		agent = d.AgentID
		issue = &credRecord{CredentialID: d.CredentialID, AgentID: d.AgentID, ExpiresAt: d.ExpiresAt, Via: kernel.ViaJoin}
		if d.Registration != nil {
			if err := f.register(r, *d.Registration); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	if agent == "" {
		return nil
	}
	if err := f.tx.Bucket(bktAgentFeed).Put(seqKey(r.Seq, p, agent), nil); err != nil {
		return err
	}
	switch {
	case issue != nil && issue.CredentialID != "":
		issue.ProjectID, issue.IssuedAt, issue.IssuedSeq = p, e.At, r.Seq
		return putJSON(f.tx.Bucket(bktCreds), key(p, agent, issue.CredentialID), issue)
	case revoke != "":
		ck := key(p, agent, revoke)
		var c credRecord
		found, err := getJSON(f.tx.Bucket(bktCreds), ck, &c)
		if err != nil || !found || c.RevokedAt != nil {
			return err
		}
		c.RevokedAt = ptr(e.At)
		return putJSON(f.tx.Bucket(bktCreds), ck, c)
	}
	return nil
}
