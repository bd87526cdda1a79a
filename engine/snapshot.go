package engine

import (
	"github.com/turnledger/turnledger/kernel"

	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"time"
)

// Snapshots of write models.
//
// Folding a project's whole history on its first use grows with the
// history; a snapshot of the write model with the ledger_seq it was
// folded to lets a load decode it and fold only the events after it. The
// engine keeps one snapshot per project where Snapshots says (serve: a
// bucket of the projection file). A snapshot is checked against the ledger
// before use: one whose ledger_seq lies beyond the project's last event is
// from another ledger (the NATS data was lost or replaced) and is ignored,
// and so is one this build cannot read; the project is then folded from the
// start. Losing a snapshot costs time, never correctness: it is derived from
// the ledger like every other state.
//
// Finished Turns are kept slim (see slim): decisions about a finished Turn
// read its state, its dispatch's parties, keys and root, never its input,
// final payload or times, so those are dropped when it finishes, in the full
// fold and in a snapshot's alike.

// Snapshots is where the engine keeps the snapshots of write models.
type Snapshots interface {
	// LoadSnapshot calls fn with the project's snapshot and the ledger_seq
	// it was taken at (0 and nil when there is none); data is valid only
	// while fn runs.
	LoadSnapshot(project string, fn func(seq uint64, data []byte) error) error
	// SaveSnapshot replaces the project's snapshot.
	SaveSnapshot(project string, seq uint64, data []byte) error
}

// snapshotVersion is the layout of a snapshot this build writes and reads.
const snapshotVersion = 4 // 3: with the memory of idempotency keys; 4: dispatch_keys of the Turns not finished only

// snapshotRead is the oldest layout this build still reads: a layout-3
// snapshot differs only in holding the dispatch keys of finished Turns too,
// which the packed Turns find by themselves (kernel.DispatchKeyFinder).
const snapshotRead = 3

// KeepSnapshots makes the engine load write models from snapshots in s and
// save one whenever a load folded at least every events after the snapshot,
// and on SaveSnapshots. Call it before the engine serves.
func (e *Engine) KeepSnapshots(s Snapshots, every uint64) {
	e.snaps, e.snapEvery = s, max(every, 1)
}

// SaveSnapshots saves a snapshot of every loaded project that moved on since
// its last one (serve calls it when it stops). It returns the first error
// after trying every project.
func (e *Engine) SaveSnapshots() error {
	return e.saveSnapshotsBelow(^uint64(0))
}

// saveSnapshotsBelow saves a snapshot of every loaded project that moved on
// since its last one, when that one was taken below ledger_seq horizon - 1
// (retention.go: a load then need not read the archive).
func (e *Engine) saveSnapshotsBelow(horizon uint64) error {
	if e.snaps == nil {
		return nil
	}
	e.mu.Lock()
	slots := make([]*slot, 0, len(e.projects))
	for _, s := range e.projects {
		if s.loaded.Load() {
			slots = append(slots, s)
		}
	}
	e.mu.Unlock()
	var first error
	for _, s := range slots {
		s.mu.Lock()
		if s.p.Seq > s.snapSeq && s.snapSeq+1 < horizon {
			if err := e.saveSnapshot(s); err != nil && first == nil {
				first = err
			}
		}
		s.mu.Unlock()
	}
	return first
}

// saveSnapshot saves s's write model; s.mu is held.
func (e *Engine) saveSnapshot(s *slot) error {
	// A snapshot holds only what the ledger has stored: every append sent
	// is answered first, and a state emptied by a refusal is not saved.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if reset, err := e.settle(ctx, s, true); err != nil || reset {
		return err
	}
	data, err := encodeSnapshot(s.p)
	if err != nil {
		return err
	}
	err = e.snaps.SaveSnapshot(s.p.ID, s.p.Seq, data)
	data = nil
	debug.FreeOSMemory() // the encoding is as large as the snapshot
	if err != nil {
		return fmt.Errorf("kernel: save the snapshot of project %s: %w", s.p.ID, err)
	}
	s.snapSeq = s.p.Seq
	return nil
}

// fromSnapshot returns the project's write model from its snapshot, checked
// against the ledger, or nil when there is no usable one, and the ledger_seq
// of the snapshot to keep: 0 for one of an older layout, so that the next
// save replaces it.
func (e *Engine) fromSnapshot(ctx context.Context, id string) (*kernel.Project, uint64, error) {
	last, err := e.ledger.LastSeq(ctx, id)
	if err != nil {
		return nil, 0, fmt.Errorf("kernel: read last ledger_seq of project %s: %w", id, err)
	}
	var p *kernel.Project
	var keep uint64
	err = e.snaps.LoadSnapshot(id, func(seq uint64, data []byte) error {
		if seq == 0 || seq > last {
			return nil // none, or taken from another ledger
		}
		if q, v, err := decodeSnapshot(id, data); err == nil && q.Seq == seq {
			p = q
			if v == snapshotVersion {
				keep = seq
			}
		} // else unreadable: fold from the start
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	// Decoding left garbage the size of the snapshot: give it back now
	// rather than at the next cycles, so that the RSS stays near the heap.
	debug.FreeOSMemory()
	return p, keep, nil
}

type snapshot struct {
	V            int                           `json:"v"`
	Seq          uint64                        `json:"seq"`
	Agents       map[string]*kernel.Agent      `json:"agents"`
	Credentials  map[string]*kernel.Credential `json:"credentials"`
	Turns        []snapTurn                    `json:"turns"` // all but the slim ones
	Slim         int                           `json:"slim"`  // slim finished Turns, in the binary part (snapbin.go)
	DispatchKeys map[string]string             `json:"dispatch_keys"`
	Invites      map[string]*kernel.Invite     `json:"invites"`
	InviteCodes  map[string]string             `json:"invite_codes"`
	// Idem is the memory of recent idempotency keys, oldest first: a retry
	// after a restart from this snapshot still answers its first result.
	Idem []*kernel.Answer `json:"idem"`
}

// snapTurn is a Turn in a snapshot: short names, empty fields left out.
type snapTurn struct {
	ID              string                `json:"i"`
	Order           uint64                `json:"o"`
	Dispatch        kernel.TurnDispatched `json:"d"`
	State           string                `json:"s"`
	Outcome         string                `json:"oc,omitempty"`
	StopRequested   bool                  `json:"sr,omitempty"`
	StopRequestedAt *time.Time            `json:"sa,omitempty"`
	Claim           *kernel.Claim         `json:"c,omitempty"`
	Attempts        int                   `json:"a,omitempty"`
	TurnSeq         uint64                `json:"ts,omitempty"`
	FinalPayload    json.RawMessage       `json:"fp,omitempty"`
	FinalRecordRole *string               `json:"fr,omitempty"`
	CreatedAt       *time.Time            `json:"ca,omitempty"`
	UpdatedAt       *time.Time            `json:"ua,omitempty"`
	FinishedAt      *time.Time            `json:"fa,omitempty"`
	Seq             uint64                `json:"q"`
	NotBefore       *time.Time            `json:"nb,omitempty"`
	AwaitingInput   *kernel.AwaitingInput `json:"ai,omitempty"`
	TreeStopped     bool                  `json:"tst,omitempty"`
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// EncodeSnapshot encodes p as a snapshot, for a Snapshots store: what the
// engine saves, for a tool that folds write models itself (replay).
func EncodeSnapshot(p *kernel.Project) ([]byte, error) { return encodeSnapshot(p) }

func encodeSnapshot(p *kernel.Project) ([]byte, error) {
	s := snapshot{V: snapshotVersion, Seq: p.Seq, Agents: p.Agents, Credentials: p.Credentials,
		DispatchKeys: p.DispatchKeys, Invites: p.Invites, InviteCodes: p.InviteCodes, Idem: p.Answers(),
		Turns: make([]snapTurn, 0, len(p.Turns))}
	// In order of turn id, so that equal write models give equal bytes.
	packed, ok := p.Finished.(*packedTurns)
	if !ok {
		// A write model that keeps its finished Turns otherwise: pack them.
		packed = newPackedTurns()
		if p.Finished != nil {
			p.Finished.Each(packed.Put)
		}
	}
	slims, n := packed.sorted(nil)
	s.Slim = n
	for _, id := range slices.Sorted(maps.Keys(p.Turns)) {
		t := p.Turns[id]
		s.Turns = append(s.Turns, snapTurn{ID: t.ID, Order: t.Order, Dispatch: t.Dispatch, State: t.State, Outcome: t.Outcome,
			StopRequested: t.StopRequested, StopRequestedAt: t.StopRequestedAt, Claim: t.Claim, Attempts: t.Attempts,
			TurnSeq: t.TurnSeq, FinalPayload: t.FinalPayload, FinalRecordRole: t.FinalRecordRole,
			CreatedAt: timeOrNil(t.CreatedAt), UpdatedAt: timeOrNil(t.UpdatedAt), FinishedAt: t.FinishedAt, Seq: t.Seq,
			NotBefore: t.NotBefore, AwaitingInput: t.AwaitingInput, TreeStopped: t.TreeStopped})
	}
	head, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	// The JSON part, its length first, then the slim Turns.
	out := make([]byte, 0, binary.MaxVarintLen64+len(head)+len(slims))
	out = binary.AppendUvarint(out, uint64(len(head)))
	return append(append(out, head...), slims...), nil
}

// decodeSnapshot decodes a snapshot and returns its layout.
func decodeSnapshot(id string, data []byte) (*kernel.Project, int, error) {
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)-k) {
		return nil, 0, errSnapshotBinary
	}
	var s snapshot
	if err := json.Unmarshal(data[k:k+int(n)], &s); err != nil {
		return nil, 0, err
	}
	slims := data[k+int(n):]
	if s.V < snapshotRead || s.V > snapshotVersion {
		return nil, 0, fmt.Errorf("snapshot layout %d, this build reads %d to %d", s.V, snapshotRead, snapshotVersion)
	}
	p := NewProject(id)
	p.Seq = s.Seq
	for name, m := range map[string]bool{"agents": s.Agents != nil, "credentials": s.Credentials != nil,
		"dispatch_keys": s.DispatchKeys != nil, "invites": s.Invites != nil, "invite_codes": s.InviteCodes != nil} {
		if !m {
			return nil, 0, fmt.Errorf("snapshot without %s", name)
		}
	}
	p.Agents, p.Credentials, p.DispatchKeys, p.Invites, p.InviteCodes = s.Agents, s.Credentials, s.DispatchKeys, s.Invites, s.InviteCodes
	if err := p.RestoreAnswers(s.Idem); err != nil {
		return nil, 0, err
	}
	packed := p.Finished.(*packedTurns)
	for i := range s.Turns {
		st := &s.Turns[i]
		t := &kernel.Turn{ID: st.ID, Order: st.Order, Dispatch: st.Dispatch, State: st.State, Outcome: st.Outcome,
			StopRequested: st.StopRequested, StopRequestedAt: st.StopRequestedAt, Claim: st.Claim, Attempts: st.Attempts,
			TurnSeq: st.TurnSeq, FinalPayload: st.FinalPayload, FinalRecordRole: st.FinalRecordRole,
			FinishedAt: st.FinishedAt, Seq: st.Seq, NotBefore: st.NotBefore, AwaitingInput: st.AwaitingInput, TreeStopped: st.TreeStopped}
		if st.CreatedAt != nil {
			t.CreatedAt = *st.CreatedAt
		}
		if st.UpdatedAt != nil {
			t.UpdatedAt = *st.UpdatedAt
		}
		if string(t.Dispatch.Input) == "null" {
			t.Dispatch.Input = nil // a slim Turn's
		}
		if t.State == kernel.StateFinished {
			packed.Put(t) // a finished Turn kept whole by an older build
			continue
		}
		p.Turns[t.ID] = t
	}
	packed.at = make(map[uint64]uint64, s.Slim)
	for range s.Slim {
		var ok bool
		if slims, ok = packed.addFirst(slims); !ok { // a copy: the data is the file's
			return nil, 0, errSnapshotBinary
		}
	}
	if len(slims) != 0 {
		return nil, 0, errSnapshotBinary
	}
	if s.V < 4 {
		// Layout 3 holds the keys of finished Turns too: the packed Turns
		// find those. A new map, as a map does not shrink.
		live := make(map[string]string, len(p.Turns))
		for k, id := range p.DispatchKeys {
			if _, done := packed.find([]byte(id)); !done || p.Turns[id] != nil {
				live[k] = id
			}
		}
		p.DispatchKeys = live
	}
	p.Reindex() // after the finished Turns: they are in the tree of children
	return p, s.V, nil
}
