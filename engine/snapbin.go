package engine

import (
	"github.com/turnledger/turnledger/kernel"

	"encoding/binary"
	"errors"
)

// The binary part of a snapshot: the slim finished Turns, most of a long
// ledger's write model, one after the other as length-prefixed strings and
// varints, which decode many times faster than the same Turns in JSON.

func appendSlim(b []byte, t *kernel.Turn) []byte {
	d := &t.Dispatch
	root := d.RootTurnID
	flags := uint64(0)
	if t.StopRequested {
		flags |= 1
	}
	if root == t.ID {
		flags |= 2
		root = ""
	}
	b = binary.AppendUvarint(b, flags)
	for _, s := range []string{t.ID, d.TargetAgent.ProjectID, d.TargetAgent.AgentID, d.RequestedBy.ProjectID, d.RequestedBy.AgentID,
		d.TurnKind, d.DispatchKey, d.BodyHash, d.Authority.Mode, d.Authority.RequestID, d.Authority.ParentTurnID,
		d.Authority.ParentClaim, root, t.Outcome} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, t.Order)
	b = binary.AppendVarint(b, int64(d.Depth))
	b = binary.AppendVarint(b, int64(t.Attempts))
	b = binary.AppendUvarint(b, t.TurnSeq)
	return binary.AppendUvarint(b, t.Seq)
}

var errSnapshotBinary = errors.New("kernel: damaged binary part of a snapshot")

// slimReader decodes what appendSlim wrote.
type slimReader struct {
	b    []byte
	strs map[string]string // interned strings (packedTurns.strs), or nil
	err  error
}

func (r *slimReader) uvarint() uint64 {
	if len(r.b) > 0 && r.b[0] < 0x80 { // most are one byte
		v := uint64(r.b[0])
		r.b = r.b[1:]
		return v
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = errSnapshotBinary, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *slimReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err, r.b = errSnapshotBinary, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *slimReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err, r.b = errSnapshotBinary, nil
		return ""
	}
	raw := r.b[:n]
	r.b = r.b[n:]
	if v, ok := r.strs[string(raw)]; ok { // no allocation for the look-up
		return v
	}
	return string(raw)
}

func (r *slimReader) turn() *kernel.Turn {
	flags := r.uvarint()
	t := &kernel.Turn{State: kernel.StateFinished}
	d := &t.Dispatch
	var root string
	for _, s := range []*string{&t.ID, &d.TargetAgent.ProjectID, &d.TargetAgent.AgentID, &d.RequestedBy.ProjectID, &d.RequestedBy.AgentID,
		&d.TurnKind, &d.DispatchKey, &d.BodyHash, &d.Authority.Mode, &d.Authority.RequestID, &d.Authority.ParentTurnID,
		&d.Authority.ParentClaim, &root, &t.Outcome} {
		*s = r.str()
	}
	t.Order = r.uvarint()
	d.Depth = int(r.varint())
	t.Attempts = int(r.varint())
	t.TurnSeq = r.uvarint()
	t.Seq = r.uvarint()
	t.StopRequested = flags&1 != 0
	d.RootTurnID = root
	if flags&2 != 0 {
		d.RootTurnID = t.ID
	}
	return t
}
