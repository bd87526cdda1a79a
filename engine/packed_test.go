package engine

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/kernel"
)

// fill sets every field reachable from v (a pointer to a struct) to a value
// of its own, different from the zero value: strings name their path,
// numbers count up, times move on by a second, pointers point to a filled
// value, JSON holds an object.
func fill(t *testing.T, v reflect.Value, path string, n *int) {
	t.Helper()
	*n++
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 11, 27, 0, 0, *n, 0, time.UTC)))
		return
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(fmt.Sprintf(`{"field":%q}`, path))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			t.Fatalf("fill: no value for %s of type %s", path, v.Type())
		}
		v.Set(reflect.ValueOf([]string{path + "[0]", path + "[1]"}))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path, n)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), path+"."+v.Type().Field(i).Name, n)
		}
	default:
		t.Fatalf("fill: no value for %s of kind %s: teach fill, and decide whether a finished Turn keeps it", path, v.Kind())
	}
}

// TestPackedTurnCarriesEveryField: a finished Turn put into the packed
// store comes back with every field it had, but for the ones slim drops
// because no decision reads them of a finished Turn. A field added to
// kernel.Turn (or to its dispatch) is either written by appendSlim and read
// back by slimReader, or dropped by slim and listed here: else this fails.
func TestPackedTurnCarriesEveryField(t *testing.T) {
	var in kernel.Turn
	n := 0
	fill(t, reflect.ValueOf(&in).Elem(), "turn", &n)
	in.State = kernel.StateFinished

	store := newPackedTurns()
	store.Put(&in)
	got := store.Get(in.ID)
	if got == nil {
		t.Fatalf("Get(%q) = nil after Put", in.ID)
	}

	want := in
	// What slim drops: no decision about a finished Turn reads it, and the
	// projections keep it for readers.
	want.Dispatch.Input, want.FinalPayload, want.FinalRecordRole = nil, nil, nil
	want.StopRequestedAt, want.FinishedAt, want.Claim = nil, nil, nil
	want.CreatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	want.Dispatch.Schedule, want.Dispatch.RetryOf, want.NotBefore, want.AwaitingInput = kernel.Schedule{}, "", nil, nil
	want.Dispatch.Tags, want.Dispatch.ContextID, want.TreeStopped = nil, "", false
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("a finished Turn packed and unpacked differs (-want +got):\n%s", diff)
	}

	// A root Turn's RootTurnID is its own id, packed as a flag.
	in.Dispatch.RootTurnID = in.ID
	store.Put(&in)
	if got := store.Get(in.ID); got.Dispatch.RootTurnID != in.ID {
		t.Errorf("root Turn unpacked with RootTurnID %q, want its id %q", got.Dispatch.RootTurnID, in.ID)
	}
}

// TestSnapshotCarriesEveryFieldOfALiveTurn: a Turn not finished goes
// through a snapshot whole. A field added to kernel.Turn that the snapshot
// does not carry fails here.
func TestSnapshotCarriesEveryFieldOfALiveTurn(t *testing.T) {
	var in kernel.Turn
	n := 0
	fill(t, reflect.ValueOf(&in).Elem(), "turn", &n)
	in.State = kernel.StateSuspended
	p := NewProject("p1")
	p.Seq = 1
	p.Turns[in.ID] = &in
	_, q := throughSnapshot(t, p)
	if diff := cmp.Diff(&in, q.Turn(in.ID)); diff != "" {
		t.Errorf("a live Turn through a snapshot differs (-want +got):\n%s", diff)
	}
}

// TestSnapshotKeepsTheTreeThroughFinishedTurns: a cascading stop decided on
// a write model loaded from a snapshot reaches a live Turn under a finished
// (packed) one: the children index is rebuilt from the packed Turns too.
func TestSnapshotKeepsTheTreeThroughFinishedTurns(t *testing.T) {
	at := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	p := NewProject("p1")
	seq := uint64(0)
	fold := func(id string, data any) {
		seq++
		typ := map[string]string{"*kernel.TurnDispatched": kernel.EvTurnDispatched, "*kernel.TurnFinished": kernel.EvTurnFinished}[fmt.Sprintf("%T", data)]
		kernel.Evolve(p, kernel.Recorded{Seq: seq, Event: kernel.Event{Type: typ, V: 1, ProjectID: "p1", Aggregate: kernel.AggTurn, ID: id, At: at, Data: data}})
	}
	w := kernel.AgentRef{ProjectID: "p1", AgentID: "w"}
	dispatch := func(id, parent, root string, depth int) *kernel.TurnDispatched {
		d := &kernel.TurnDispatched{TargetAgent: w, RequestedBy: w, TurnKind: "k", DispatchKey: id, RootTurnID: root, Depth: depth,
			Authority: kernel.Authority{Mode: kernel.AuthorityRoot, RequestID: "r"}}
		if parent != "" {
			d.Authority = kernel.Authority{Mode: kernel.AuthorityChild, ParentTurnID: parent, ParentClaim: "clm"}
		}
		return d
	}
	seq++
	kernel.Evolve(p, kernel.Recorded{Seq: seq, Event: kernel.Event{Type: kernel.EvAgentRegistered, V: 1, ProjectID: "p1", Aggregate: kernel.AggAgent, ID: "w", At: at,
		Data: &kernel.AgentRegistered{Spec: kernel.AgentSpec{AgentID: "w", Role: "worker", Enabled: true, AcceptsWork: true, Capacity: 1}, Provenance: kernel.Provenance{Kind: "test"}}}})
	fold("r", dispatch("r", "", "r", 0))
	fold("f", dispatch("f", "r", "r", 1))
	fold("f", &kernel.TurnFinished{ClaimID: "clm", Outcome: "succeeded"})
	fold("g", dispatch("g", "f", "r", 2))
	p.Seq = seq
	_, q := throughSnapshot(t, p)
	if _, packed := q.Finished.(*packedTurns); !packed || q.Finished.Len() != 1 {
		t.Fatalf("the snapshot's finished Turns: %T of %d, want the packed f", q.Finished, q.Finished.Len())
	}
	evs, err := kernel.Decide(q, kernel.Stop{Common: kernel.Common{Caller: kernel.Caller{Admin: true}}, TurnID: "r", RequestedBy: w, Cascade: true, RequestID: "stop_1"}, at)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	if diff := cmp.Diff([]string{"r", "g"}, ids); diff != "" {
		t.Errorf("a cascade from r after a snapshot stops (-want +got):\n%s", diff)
	}
}

// finishedTurn is a finished root Turn with the id, as the bench makes them.
func finishedTurn(id string, order uint64, outcome string) *kernel.Turn {
	w := kernel.AgentRef{ProjectID: "p1", AgentID: "w"}
	return &kernel.Turn{ID: id, Order: order, State: kernel.StateFinished, Outcome: outcome, Attempts: 1, TurnSeq: 4, Seq: order + 3,
		Dispatch: kernel.TurnDispatched{TargetAgent: w, RequestedBy: w, TurnKind: "k", DispatchKey: "key-" + id, BodyHash: "h-" + id,
			RootTurnID: id, Authority: kernel.Authority{Mode: kernel.AuthorityRoot, RequestID: "req-" + id}}}
}

// TestPackedTurnsFindEachTurnWhateverItsHash: the store finds every Turn
// by its id, lists each once and keeps a Turn packed again in place of the
// earlier one, also when ids share a hash (here all of them) and after it
// copied the Turns kept into new chunks to drop the replaced ones.
func TestPackedTurnsFindEachTurnWhateverItsHash(t *testing.T) {
	for name, hash := range map[string]func([]byte) uint64{
		"own hash": nil,
		"one hash": func([]byte) uint64 { return 7 },
	} {
		t.Run(name, func(t *testing.T) {
			s := newPackedTurns()
			if hash != nil {
				s.hash = hash
			}
			const n = 300
			want := map[string]*kernel.Turn{}
			for i := range n {
				tn := finishedTurn(fmt.Sprintf("t%03d", i), uint64(i+1), "succeeded")
				s.Put(tn)
				want[tn.ID] = tn
			}
			// Packed again and again: the store drops the replaced bytes
			// on the way (once they outweigh the Turns kept).
			for round := range 100 {
				for i := range n / 3 {
					tn := finishedTurn(fmt.Sprintf("t%03d", i), uint64(i+1), fmt.Sprintf("stopped-%d-%s", round, strings.Repeat("x", 200)))
					s.Put(tn)
					want[tn.ID] = tn
				}
			}
			if s.Len() != n {
				t.Errorf("Len() = %d, want %d", s.Len(), n)
			}
			if s.dead > s.live+chunkSize {
				t.Errorf("replaced bytes %d beside %d kept: the store never dropped them", s.dead, s.live)
			}
			got := map[string]*kernel.Turn{}
			s.Each(func(tn *kernel.Turn) {
				if got[tn.ID] != nil {
					t.Errorf("Each gave %s twice", tn.ID)
				}
				got[tn.ID] = tn
			})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Each (-want +got):\n%s", diff)
			}
			for id, tn := range want {
				if diff := cmp.Diff(tn, s.Get(id)); diff != "" {
					t.Errorf("Get(%s) (-want +got):\n%s", id, diff)
				}
			}
			if tn := s.Get("t999"); tn != nil {
				t.Errorf("Get of an id never put = %+v, want nil", tn)
			}

			// Through a snapshot: the same Turns, the same bytes again.
			p := NewProject("p1")
			p.Seq = 1
			p.Finished = s
			data, q := throughSnapshot(t, p)
			again := map[string]*kernel.Turn{}
			q.Finished.Each(func(tn *kernel.Turn) { again[tn.ID] = tn })
			if diff := cmp.Diff(want, again); diff != "" {
				t.Errorf("through a snapshot (-want +got):\n%s", diff)
			}
			if data2, err := encodeSnapshot(q); err != nil || string(data2) != string(data) {
				t.Errorf("the snapshot of the decoded write model differs from the one it was decoded from (%v)", err)
			}
		})
	}
}

// TestPackedFormIsExact: a finished Turn packed in memory gives back the
// bytes of the snapshot's form it was made from, whatever its strings look
// like: ids and hashes in their usual spelling (kept shorter) or not
// (uppercase, too short, dashes elsewhere), a request id equal to the
// dispatch key or not, empty strings, names shared by many Turns.
func TestPackedFormIsExact(t *testing.T) {
	ids := []string{"0190a6a4-5b6c-7d8e-9f01-23456789abcd", "0190A6A4-5B6C-7D8E-9F01-23456789ABCD", "0190a6a4-5b6c-7d8e-9f01-23456789abc",
		"0190a6a45-b6c-7d8e-9f01-23456789abcd", "0190a6a4-5b6c-7d8e-9f01-23456789abcg", "turn-1", ""}
	hashes := []string{strings.Repeat("0f", 32), strings.Repeat("0F", 32), strings.Repeat("ab", 31), "", "not hex at all"}
	s := newPackedTurns()
	for i, id := range ids {
		for j, hash := range hashes {
			tn := finishedTurn(id, uint64(i*10+j), []string{"succeeded", "failed", ""}[(i+j)%3])
			tn.Dispatch.BodyHash = hash
			if j%2 == 0 {
				tn.Dispatch.Authority.RequestID = tn.Dispatch.DispatchKey
			}
			if i%3 == 0 {
				tn.Dispatch.RootTurnID = "" // not its own root: written out
				tn.Dispatch.Authority.ParentTurnID, tn.Dispatch.Authority.ParentClaim = ids[j%len(ids)], "clm"
			}
			tn.Dispatch.TargetAgent.AgentID = fmt.Sprintf("w%d", j)
			tn.StopRequested = j == 1
			tn.Dispatch.Depth = i
			c := *tn
			s.slim(&c)
			b := appendSlim(nil, &c)
			var f slimFields
			if rest, ok := f.readSnap(b); !ok || len(rest) != 0 {
				t.Fatalf("readSnap of %s/%s: ok %v, %d bytes left", id, hash, ok, len(rest))
			}
			mem := s.appendMem(nil, &f)
			var g slimFields
			rest, ok := s.readMem(&g, mem, readAll)
			if !ok || len(rest) != 0 {
				t.Fatalf("readMem of %s/%s: ok %v, %d bytes left", id, hash, ok, len(rest))
			}
			if got := g.appendSnap(nil); string(got) != string(b) {
				t.Errorf("id %q, hash %q: through the memory form %x, want %x", id, hash, got, b)
			}
			if id == ids[0] && hash == hashes[0] && j%2 == 0 && len(mem) > len(b)-20-32-len(tn.Dispatch.DispatchKey) {
				t.Errorf("id %q, hash %q: %d bytes in memory for %d in a snapshot: the id, hash or request id not kept shorter", id, hash, len(mem), len(b))
			}
		}
	}
}

// TestDispatchKeysOfFinishedTurnsAsInTheFold: with the engine's packed
// store the write model keeps only the dispatch keys of Turns not finished,
// and finds every key as a write model keeping them all does: the last Turn
// dispatched with a key, whichever of several finished first, whether it is
// finished or not, also when keys share a hash (here all of them) and after
// a snapshot (of this layout, and of layout 3 holding every key).
func TestDispatchKeysOfFinishedTurnsAsInTheFold(t *testing.T) {
	for name, hash := range map[string]func([]byte) uint64{
		"own hash": nil,
		"one hash": func([]byte) uint64 { return 7 },
	} {
		t.Run(name, func(t *testing.T) {
			at := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
			plain, packed := kernel.NewProject("p1"), NewProject("p1")
			if hash != nil {
				packed.Finished.(*packedTurns).hash = hash
			}
			seq := uint64(0)
			fold := func(id string, data any) {
				seq++
				typ := map[string]string{"*kernel.TurnDispatched": kernel.EvTurnDispatched, "*kernel.TurnFinished": kernel.EvTurnFinished}[fmt.Sprintf("%T", data)]
				r := kernel.Recorded{Seq: seq, Event: kernel.Event{Type: typ, V: 1, ProjectID: "p1", Aggregate: kernel.AggTurn, ID: id, At: at, Data: data}}
				kernel.Evolve(plain, r)
				kernel.Evolve(packed, r)
			}
			dispatch := func(id, requester, key string) {
				fold(id, &kernel.TurnDispatched{TargetAgent: kernel.AgentRef{ProjectID: "p1", AgentID: "w"}, RequestedBy: kernel.AgentRef{ProjectID: "p1", AgentID: requester},
					TurnKind: "k", DispatchKey: key, RootTurnID: id, Authority: kernel.Authority{Mode: kernel.AuthorityRoot, RequestID: "r"}})
			}
			finish := func(id string) { fold(id, &kernel.TurnFinished{Outcome: "dead"}) }
			// One key per Turn, by two requesters, most finished.
			for i := range 40 {
				dispatch(fmt.Sprintf("t%02d", i), []string{"a", "b"}[i%2], fmt.Sprintf("k%d", i/2))
				if i%5 != 4 {
					finish(fmt.Sprintf("t%02d", i))
				}
			}
			// A key used twice (a ledger the decisions never make): the
			// later dispatch wins, finished first, last or not at all.
			dispatch("d1", "a", "dup1")
			dispatch("d2", "a", "dup1")
			finish("d2")
			finish("d1")
			dispatch("e1", "a", "dup2")
			dispatch("e2", "a", "dup2")
			finish("e1")
			dispatch("f1", "b", "dup3")
			finish("f1")
			dispatch("f2", "b", "dup3")

			keys := map[[2]string]bool{{"a", "nope"}: true, {"c", "k1"}: true}
			for k := range plain.DispatchKeys {
				req, key, _ := strings.Cut(k, "\x00")
				keys[[2]string{req, key}] = true
			}
			check := func(t *testing.T, q *kernel.Project) {
				t.Helper()
				for k := range keys {
					id, ok := q.DispatchedAs(k[0], k[1])
					want, wantOK := plain.DispatchKeys[kernel.DispatchKeyOf(k[0], k[1])]
					if id != want || ok != wantOK {
						t.Errorf("DispatchedAs(%q, %q) = %q, %v; want %q, %v", k[0], k[1], id, ok, want, wantOK)
					}
				}
				if len(q.DispatchKeys) != len(q.Turns) {
					t.Errorf("the write model keeps %d dispatch keys for %d Turns not finished: %v", len(q.DispatchKeys), len(q.Turns), q.DispatchKeys)
				}
			}
			check(t, packed)

			packed.Seq = seq
			_, q := throughSnapshot(t, packed)
			check(t, q)

			// Layout 3: every key in dispatch_keys.
			v3 := *packed
			v3.DispatchKeys = plain.DispatchKeys
			data, err := encodeSnapshot(&v3)
			if err != nil {
				t.Fatal(err)
			}
			n, k := binary.Uvarint(data)
			head := strings.Replace(string(data[k:k+int(n)]), `{"v":4,`, `{"v":3,`, 1)
			old := append(binary.AppendUvarint(nil, uint64(len(head))), head...)
			q, _, err = decodeSnapshot("p1", append(old, data[k+int(n):]...))
			if err != nil {
				t.Fatal(err)
			}
			check(t, q)
		})
	}
}

// throughSnapshot encodes p as a snapshot and decodes it again.
func throughSnapshot(t *testing.T, p *kernel.Project) ([]byte, *kernel.Project) {
	t.Helper()
	data, err := encodeSnapshot(p)
	if err != nil {
		t.Fatal(err)
	}
	q, _, err := decodeSnapshot(p.ID, data)
	if err != nil {
		t.Fatal(err)
	}
	return data, q
}
