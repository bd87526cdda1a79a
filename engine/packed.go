package engine

import (
	"bytes"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"github.com/turnledger/turnledger/kernel"
)

// packedTurns is the engine's store of a project's finished Turns
// (kernel.FinishedTurns). A finished Turn is most of a long ledger's write
// model and decisions read little of it, so the store keeps only that (see
// slim), packed into bytes (packedform.go), unpacked into a fresh Turn when a
// decision asks for it. The strings many Turns share (agent ids, kinds,
// modes, outcomes) are kept once.
//
// The bytes of all Turns lie one after the other in chunks of chunkSize, and
// an index maps the hash of a Turn's id to where its bytes start: a Turn
// costs its bytes and one slot of the index, not an allocation of its own,
// a key string and a map entry holding both. The Turn's id in its bytes tells
// two ids of one hash apart: the second one goes to clash.
type packedTurns struct {
	chunks [][]byte
	at     map[uint64]uint64      // hash of the id → chunk<<32 | offset
	clash  map[string]uint64      // ids whose hash an earlier id has, → chunk<<32 | offset
	hash   func(id []byte) uint64 // maphash with a seed of the store's
	live   int                    // bytes of the Turns kept
	dead   int                    // bytes of Turns packed again since (pack drops them)

	// byKey finds a Turn by its dispatch key (kernel.DispatchKeyFinder): the
	// hash of DispatchKeyOf(requester, key) → where the last one dispatched
	// lies; keyClash, by DispatchKeyOf, those whose hash another key has.
	byKey    map[uint64]uint64
	keyClash map[string]uint64

	names   [][]byte          // the shared strings, by number (packedform.go)
	nameIdx map[string]uint32 // the number of each
	strs    map[string]string // the strings of unpacked Turns, interned
	scratch []byte
}

// chunkSize is the size of a chunk of packed Turns: large enough that its
// unused end is a small share, small enough that growing by one is cheap.
const chunkSize = 1 << 20

// NewProject returns an empty write model that keeps its finished Turns
// packed, as the engine does: for a tool that folds write models itself and
// saves them with EncodeSnapshot (replay).
func NewProject(id string) *kernel.Project {
	p := kernel.NewProject(id)
	p.Finished = newPackedTurns()
	return p
}

func newPackedTurns() *packedTurns {
	seed := maphash.MakeSeed()
	return &packedTurns{at: map[uint64]uint64{}, clash: map[string]uint64{}, byKey: map[uint64]uint64{}, keyClash: map[string]uint64{},
		nameIdx: map[string]uint32{}, strs: map[string]string{},
		hash: func(id []byte) uint64 { return maphash.Bytes(seed, id) }}
}

// bytesAt returns the packed Turn at pos, through the end of its chunk.
func (s *packedTurns) bytesAt(pos uint64) []byte {
	return s.chunks[pos>>32][uint32(pos):]
}

// find returns where the Turn with the id lies.
func (s *packedTurns) find(id []byte) (uint64, bool) {
	if len(s.clash) > 0 {
		if pos, ok := s.clash[string(id)]; ok {
			return pos, true
		}
	}
	pos, ok := s.at[s.hash(id)]
	if !ok {
		return 0, false
	}
	var f slimFields
	if _, ok := s.readMem(&f, s.bytesAt(pos), readID); !ok || !bytes.Equal(f.s[fID], id) {
		return 0, false // another id of the same hash
	}
	return pos, true
}

// snapAt returns the Turn at pos in the snapshot's form (snapbin.go),
// appended to b, and its length in memory.
func (s *packedTurns) snapAt(b []byte, pos uint64) ([]byte, int, bool) {
	var f slimFields
	mem := s.bytesAt(pos)
	rest, ok := s.readMem(&f, mem, readAll)
	if !ok {
		return b, 0, false
	}
	return f.appendSnap(b), len(mem) - len(rest), true
}

// Get unpacks the finished Turn with the id, or returns nil.
func (s *packedTurns) Get(id string) *kernel.Turn {
	pos, ok := s.find([]byte(id))
	if !ok {
		return nil
	}
	var buf [512]byte
	b, _, ok := s.snapAt(buf[:0], pos)
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
	s.add(appendSlim(nil, &c))
}

// add keeps b, one packed Turn in the snapshot's form, in place of an
// earlier one of its id. It reports whether b was one.
func (s *packedTurns) add(b []byte) bool {
	rest, ok := s.addFirst(b)
	return ok && len(rest) == 0
}

// addFirst keeps a copy of the first packed Turn of b, in the snapshot's
// form, and returns the bytes after it.
func (s *packedTurns) addFirst(b []byte) ([]byte, bool) {
	var f slimFields
	rest, ok := f.readSnap(b)
	if !ok {
		return nil, false
	}
	s.scratch = s.appendMem(s.scratch[:0], &f)
	pos := s.append(s.scratch)
	s.live += len(s.scratch)
	s.indexKey(&f, pos)
	id := f.s[fID]
	if old, ok := s.find(id); ok {
		_, n, _ := s.snapAt(nil, old)
		s.live, s.dead = s.live-n, s.dead+n
		if _, clashed := s.clash[string(id)]; clashed {
			s.clash[string(id)] = pos
		} else {
			s.at[s.hash(id)] = pos
		}
		if s.dead > chunkSize && s.dead > s.live {
			s.pack()
		}
		return rest, true
	}
	h := s.hash(id)
	if _, taken := s.at[h]; taken {
		s.clash[string(id)] = pos
		return rest, true
	}
	s.at[h] = pos
	return rest, true
}

// keyHash is the hash of DispatchKeyOf(requester, key).
func (s *packedTurns) keyHash(requester, key []byte) uint64 {
	var buf [128]byte
	return s.hash(append(append(append(buf[:0], requester...), 0), key...))
}

// indexKey makes the Turn f at pos the one its dispatch key finds, unless a
// Turn dispatched later has the key.
func (s *packedTurns) indexKey(f *slimFields, pos uint64) {
	req, key := f.s[fRequesterAgent], f.s[fDispatchKey]
	if len(key) == 0 {
		return
	}
	if len(s.keyClash) > 0 {
		k := kernel.DispatchKeyOf(string(req), string(key))
		if old, ok := s.keyClash[k]; ok {
			if s.orderAt(old) <= f.order {
				s.keyClash[k] = pos
			}
			return
		}
	}
	h := s.keyHash(req, key)
	old, ok := s.byKey[h]
	if !ok {
		s.byKey[h] = pos
		return
	}
	var g slimFields
	if _, ok := s.readMem(&g, s.bytesAt(old), readAll); ok && bytes.Equal(g.s[fRequesterAgent], req) && bytes.Equal(g.s[fDispatchKey], key) {
		if g.order <= f.order {
			s.byKey[h] = pos
		}
		return
	}
	s.keyClash[kernel.DispatchKeyOf(string(req), string(key))] = pos
}

// orderAt is the dispatch's ledger_seq of the Turn at pos.
func (s *packedTurns) orderAt(pos uint64) uint64 {
	var f slimFields
	s.readMem(&f, s.bytesAt(pos), readParents)
	return f.order
}

// Dispatched returns the finished Turn the requester dispatched with the
// dispatch key (kernel.DispatchKeyFinder).
func (s *packedTurns) Dispatched(requester, dispatchKey string) (string, uint64, bool) {
	var pos uint64
	ok := false
	if len(s.keyClash) > 0 {
		pos, ok = s.keyClash[kernel.DispatchKeyOf(requester, dispatchKey)]
	}
	if !ok {
		if pos, ok = s.byKey[s.keyHash([]byte(requester), []byte(dispatchKey))]; !ok {
			return "", 0, false
		}
	}
	var f slimFields
	if _, ok := s.readMem(&f, s.bytesAt(pos), readAll); !ok || string(f.s[fRequesterAgent]) != requester || string(f.s[fDispatchKey]) != dispatchKey {
		return "", 0, false // another key of the same hash
	}
	return string(f.s[fID]), f.order, true
}

// append copies b to the end of the last chunk, or of a new one, and
// returns where it starts.
func (s *packedTurns) append(b []byte) uint64 {
	last := len(s.chunks) - 1
	if last < 0 || len(s.chunks[last])+len(b) > cap(s.chunks[last]) {
		s.chunks = append(s.chunks, make([]byte, 0, max(chunkSize, len(b))))
		last++
	}
	pos := uint64(last)<<32 | uint64(len(s.chunks[last]))
	s.chunks[last] = append(s.chunks[last], b...)
	return pos
}

// pack copies the Turns kept into new chunks, leaving out the bytes of
// those packed again since.
func (s *packedTurns) pack() {
	n := &packedTurns{at: make(map[uint64]uint64, len(s.at)), clash: map[string]uint64{}, hash: s.hash,
		byKey: make(map[uint64]uint64, len(s.byKey)), keyClash: map[string]uint64{},
		names: s.names, nameIdx: s.nameIdx, strs: s.strs}
	var b []byte
	for _, pos := range s.positions() {
		b, _, _ = s.snapAt(b[:0], pos)
		n.add(b)
	}
	*s = *n
}

func (s *packedTurns) Len() int { return len(s.at) + len(s.clash) }

// positions returns where every Turn kept lies, in no order.
func (s *packedTurns) positions() []uint64 {
	all := make([]uint64, 0, s.Len())
	for _, pos := range s.at {
		all = append(all, pos)
	}
	for _, pos := range s.clash {
		all = append(all, pos)
	}
	return all
}

// sorted appends every Turn kept to out in the snapshot's form, in order of
// turn id (a snapshot's binary part), and returns it with their count.
func (s *packedTurns) sorted(out []byte) ([]byte, int) {
	type item struct {
		id  string
		pos uint64
	}
	all := make([]item, 0, s.Len())
	for _, pos := range s.positions() {
		var f slimFields
		if _, ok := s.readMem(&f, s.bytesAt(pos), readID); ok {
			all = append(all, item{string(f.s[fID]), pos})
		}
	}
	slices.SortFunc(all, func(x, y item) int { return strings.Compare(x.id, y.id) })
	for _, it := range all {
		out, _, _ = s.snapAt(out, it.pos)
	}
	return out, len(all)
}

// Parents calls fn with the id, the parent and the dispatch's ledger_seq
// of every Turn the store keeps that has a parent, without unpacking it.
func (s *packedTurns) Parents(fn func(id, parent string, order uint64)) {
	var f slimFields
	for _, pos := range s.positions() {
		if _, ok := s.readMem(&f, s.bytesAt(pos), readParents); ok && len(f.s[fParent]) > 0 {
			fn(string(f.s[fID]), string(f.s[fParent]), f.order)
		}
	}
}

func (s *packedTurns) Each(fn func(t *kernel.Turn)) {
	var b []byte
	for _, pos := range s.positions() {
		var ok bool
		if b, _, ok = s.snapAt(b[:0], pos); ok {
			r := slimReader{b: b, strs: s.strs}
			if t := r.turn(); r.err == nil {
				fn(t)
			}
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
