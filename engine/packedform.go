package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
)

// The form a packed Turn takes in memory, smaller than the snapshot's
// (snapbin.go) by what most Turns repeat or spell out at length:
//
//   - the fields many Turns share (the parties' project and agent ids, the
//     kind, the authority's mode, the outcome) are numbers in the store's
//     table of names;
//   - an id that is a UUID in its usual lowercase spelling (every Turn id the
//     engine makes) is its 16 bytes, and a body hash that is 64 lowercase hex
//     digits (every one the engine makes) its 32;
//   - a request id equal to the dispatch key (a root dispatch made with the
//     client's Root helper) is a flag.
//
// The id, the dispatch's ledger_seq and the parent come first, what finding
// a Turn and listing the parents read; then the other strings in the
// snapshot's order and its numbers.
//
// The store takes and gives back the snapshot's form (slimFields); the
// transcoding is exact both ways (TestPackedFormIsExact), so a snapshot is
// byte for byte the one the snapshot's form alone would give.

// The fields of a packed Turn in the snapshot's order (appendSlim).
const (
	fID = iota
	fTargetProject
	fTargetAgent
	fRequesterProject
	fRequesterAgent
	fKind
	fDispatchKey
	fBodyHash
	fMode
	fRequestID
	fParent
	fParentClaim
	fRoot
	fOutcome
	nStrings
)

// named are the fields kept as numbers of the store's names.
var named = [nStrings]bool{fTargetProject: true, fTargetAgent: true, fRequesterProject: true, fRequesterAgent: true,
	fKind: true, fMode: true, fOutcome: true}

// Flags of the memory form, beside the snapshot's two (stop requested, root).
const (
	flagUUID       = 4  // the id as 16 bytes
	flagRawHash    = 8  // the body hash as 32 bytes
	flagRequestIs  = 16 // the request id is the dispatch key
	flagUUIDParent = 32 // the parent's id as 16 bytes
)

// slimFields is one packed Turn as fields; the strings are the bytes of the
// form read (or of the store's names), valid as long as those.
type slimFields struct {
	flags            uint64
	s                [nStrings][]byte
	order            uint64
	depth, attempts  int64
	turnSeq, seq     uint64
	idBuf, parentBuf [36]byte // ids spelled out from 16 bytes
	hashBuf          [64]byte // a body hash spelled out from 32
}

// readSnap reads one Turn of the snapshot's form from b and returns the
// bytes after it.
func (f *slimFields) readSnap(b []byte) ([]byte, bool) {
	r := slimReader{b: b}
	f.flags = r.uvarint()
	for i := range f.s {
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			return nil, false
		}
		f.s[i], r.b = r.b[:n], r.b[n:]
	}
	f.order, f.depth, f.attempts, f.turnSeq, f.seq = r.uvarint(), r.varint(), r.varint(), r.uvarint(), r.uvarint()
	return r.b, r.err == nil && f.flags < 4
}

// appendSnap appends f in the snapshot's form.
func (f *slimFields) appendSnap(b []byte) []byte {
	b = binary.AppendUvarint(b, f.flags&3)
	for _, s := range f.s {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, f.order)
	b = binary.AppendVarint(b, f.depth)
	b = binary.AppendVarint(b, f.attempts)
	b = binary.AppendUvarint(b, f.turnSeq)
	return binary.AppendUvarint(b, f.seq)
}

// appendMem appends f in the memory form, adding to the store's names.
func (s *packedTurns) appendMem(b []byte, f *slimFields) []byte {
	flags := f.flags & 3
	var id, parent [16]byte
	if packUUID(&id, f.s[fID]) {
		flags |= flagUUID
	}
	if packUUID(&parent, f.s[fParent]) {
		flags |= flagUUIDParent
	}
	var hash [32]byte
	if packHex(hash[:], f.s[fBodyHash]) {
		flags |= flagRawHash
	}
	if bytes.Equal(f.s[fRequestID], f.s[fDispatchKey]) {
		flags |= flagRequestIs
	}
	b = binary.AppendUvarint(b, flags)
	b = appendPacked(b, f.s[fID], id[:], flags&flagUUID != 0)
	b = binary.AppendUvarint(b, f.order)
	b = appendPacked(b, f.s[fParent], parent[:], flags&flagUUIDParent != 0)
	for i, v := range f.s {
		switch {
		case i == fID || i == fParent:
		case i == fBodyHash:
			b = appendPacked(b, v, hash[:], flags&flagRawHash != 0)
		case i == fRequestID && flags&flagRequestIs != 0:
		case named[i]:
			b = binary.AppendUvarint(b, uint64(s.nameOf(v)))
		default:
			b = appendPacked(b, v, nil, false)
		}
	}
	b = binary.AppendVarint(b, f.depth)
	b = binary.AppendVarint(b, f.attempts)
	b = binary.AppendUvarint(b, f.turnSeq)
	return binary.AppendUvarint(b, f.seq)
}

// appendPacked appends v spelled out (its length first), or its packed
// bytes.
func appendPacked(b, v, packed []byte, isPacked bool) []byte {
	if isPacked {
		return append(b, packed...)
	}
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// memReader reads the memory form.
type memReader struct {
	slimReader
	ok bool
}

// bytes reads n bytes, or a string spelled out when n is 0.
func (r *memReader) bytes(n uint64) []byte {
	if n == 0 {
		n = r.uvarint()
	}
	if n > uint64(len(r.b)) {
		r.ok = false
		r.b = nil
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// id reads an id, as 16 bytes spelled out into buf when packed.
func (r *memReader) id(packed bool, buf *[36]byte) []byte {
	if packed {
		return unpackUUID(buf, r.bytes(16))
	}
	return r.bytes(0)
}

// Which fields readMem reads.
const (
	readID      = iota // the id alone
	readParents        // the id, the dispatch's ledger_seq and the parent
	readAll
)

// readMem reads one Turn of the memory form from b, as far as upTo says, and
// returns the bytes after what it read.
func (s *packedTurns) readMem(f *slimFields, b []byte, upTo int) ([]byte, bool) {
	r := memReader{slimReader: slimReader{b: b}, ok: true}
	flags := r.uvarint()
	f.flags = flags & 3
	f.s[fID] = r.id(flags&flagUUID != 0, &f.idBuf)
	if upTo == readID {
		return r.b, r.ok && r.err == nil
	}
	f.order = r.uvarint()
	f.s[fParent] = r.id(flags&flagUUIDParent != 0, &f.parentBuf)
	if upTo == readParents {
		return r.b, r.ok && r.err == nil
	}
	for i := range f.s {
		switch {
		case i == fID || i == fParent:
		case i == fBodyHash && flags&flagRawHash != 0:
			if raw := r.bytes(32); r.ok {
				hex.Encode(f.hashBuf[:], raw)
				f.s[i] = f.hashBuf[:]
			}
		case i == fRequestID && flags&flagRequestIs != 0:
			f.s[i] = f.s[fDispatchKey]
		case named[i]:
			n := r.uvarint()
			if n >= uint64(len(s.names)) {
				return nil, false
			}
			f.s[i] = s.names[n]
		default:
			f.s[i] = r.bytes(0)
		}
	}
	f.depth, f.attempts, f.turnSeq, f.seq = r.varint(), r.varint(), r.uvarint(), r.uvarint()
	return r.b, r.ok && r.err == nil
}

// nameOf returns the number of v in the store's names, adding it.
func (s *packedTurns) nameOf(v []byte) uint32 {
	if n, ok := s.nameIdx[string(v)]; ok {
		return n
	}
	n := uint32(len(s.names))
	s.names = append(s.names, bytes.Clone(v))
	s.nameIdx[string(v)] = n
	return n
}

// packUUID puts the 16 bytes of a UUID spelled the usual way in lowercase
// (8-4-4-4-12 hex digits) into id; anything else is left as it is.
func packUUID(id *[16]byte, s []byte) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	return packHex(id[0:4], s[0:8]) && packHex(id[4:6], s[9:13]) && packHex(id[6:8], s[14:18]) &&
		packHex(id[8:10], s[19:23]) && packHex(id[10:16], s[24:36])
}

// unpackUUID spells out the 16 bytes of a UUID into buf.
func unpackUUID(buf *[36]byte, id []byte) []byte {
	if len(id) != 16 {
		return nil // a short read, reported by the reader
	}
	hex.Encode(buf[0:8], id[0:4])
	hex.Encode(buf[9:13], id[4:6])
	hex.Encode(buf[14:18], id[6:8])
	hex.Encode(buf[19:23], id[8:10])
	hex.Encode(buf[24:36], id[10:16])
	buf[8], buf[13], buf[18], buf[23] = '-', '-', '-', '-'
	return buf[:]
}

// packHex decodes s, lowercase hex digits, into dst of half its length.
func packHex(dst, s []byte) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := lowerHex(s[2*i])
		lo, ok2 := lowerHex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
