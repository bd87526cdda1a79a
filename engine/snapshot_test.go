package engine_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
)

// countingLedger is the real ledger that counts the events its project reads
// hand over (how much of the history a load folded) and its look-ups of a
// project's last ledger_seq.
type countingLedger struct {
	*ledger.Store
	read     atomic.Int64
	lastSeqs atomic.Int64
}

func (c *countingLedger) LastSeq(ctx context.Context, project string) (uint64, error) {
	c.lastSeqs.Add(1)
	return c.Store.LastSeq(ctx, project)
}

func (c *countingLedger) ReadProject(ctx context.Context, project string, after uint64, fn func(kernel.Recorded) error) (uint64, error) {
	return c.Store.ReadProject(ctx, project, after, func(r kernel.Recorded) error {
		c.read.Add(1)
		return fn(r)
	})
}

type snapFixture struct {
	l     *ledger.Store
	store *projection.Store
	now   time.Time
}

func newSnapFixture(t *testing.T) *snapFixture {
	t.Helper()
	srv := natstest.Start(t)
	lcfg := ledger.DefaultConfig()
	lcfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(t.Context(), natstest.Connect(t, srv), lcfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := projection.Open(filepath.Join(t.TempDir(), "projections.db"), projection.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &snapFixture{l: l, store: st, now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
}

// engine returns a new engine over the fixture's ledger (counted), with
// snapshots in its projection store or without.
func (f *snapFixture) engine(t *testing.T, snapshots bool) (*engine.Engine, *countingLedger) {
	t.Helper()
	cl := &countingLedger{Store: f.l}
	cfg := engine.DefaultConfig()
	cfg.Now = func() time.Time { return f.now }
	e, err := engine.New(cl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if snapshots {
		e.KeepSnapshots(f.store, 1)
	}
	return e, cl
}

// work runs Turns through every state: finished ones (with payloads, a stop,
// a dispatch key), claimed ones (one renewed), a suspended one and queued
// ones. It returns the claims it holds.
func work(t *testing.T, e *engine.Engine, tag string, n int) []kernel.ClaimToken {
	t.Helper()
	ctx := t.Context()
	var held []kernel.ClaimToken
	for i := range n {
		key := fmt.Sprintf("%s-%d", tag, i)
		if _, err := dispatch(e, key); err != nil {
			t.Fatal(err)
		}
		if i%4 == 3 {
			continue // stays queued
		}
		c, _, err := e.Claim(ctx, "p1", admin, "worker", nil)
		if err != nil || c == nil {
			t.Fatalf("Claim = %v, %v", c, err)
		}
		switch i % 4 {
		case 0:
			_, err = e.Fenced(ctx, "p1", kernel.Finish{Common: admin, TurnID: c.TurnID, Claim: c.Token, Outcome: "succeeded",
				FinalPayload: json.RawMessage(`{"ok":true}`), FinalRecordRole: "final"})
		case 1:
			held = append(held, c.Token)
			if i%8 == 1 {
				_, err = e.Fenced(ctx, "p1", kernel.Renew{Common: admin, Claim: c.Token})
			}
		case 2:
			_, err = e.Fenced(ctx, "p1", kernel.Suspend{Common: admin, TurnID: c.TurnID, Claim: c.Token})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return held
}

// TestSnapshotLoadDecidesAsFullFold: an engine that loads the project from
// a snapshot and the events after it holds the same write model as one that
// folds the whole history, and decides every command the same way; it reads
// only the events after the snapshot.
func TestSnapshotLoadDecidesAsFullFold(t *testing.T) {
	f := newSnapFixture(t)
	a, _ := f.engine(t, true)
	register(t, a, "req", 1)
	register(t, a, "worker", 100)
	register(t, a, "idle", 1)
	held := work(t, a, "before", 24)
	for i := range 3 { // queued at the snapshot, and still after it
		_, err := a.Dispatch(t.Context(), "p1", kernel.Dispatch{Common: admin,
			RequestedBy: kernel.AgentRef{ProjectID: "p1", AgentID: "req"}, TargetAgent: kernel.AgentRef{ProjectID: "p1", AgentID: "idle"},
			Input: json.RawMessage(`{}`), TurnKind: "k", DispatchKey: fmt.Sprint("idle-", i), Mode: kernel.AuthorityRoot, RequestID: fmt.Sprint("idle-", i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := a.SaveSnapshots(); err != nil {
		t.Fatal(err)
	}
	var snapSeq uint64
	err := f.store.LoadSnapshot("p1", func(seq uint64, _ []byte) error { snapSeq = seq; return nil })
	if err != nil || snapSeq == 0 {
		t.Fatalf("LoadSnapshot = %d, %v; want a snapshot", snapSeq, err)
	}
	held = append(held, work(t, a, "after", 9)...)
	head, _ := f.l.LastSeq(t.Context(), "p1")

	fromSnap, snapReads := f.engine(t, true)
	full, fullReads := f.engine(t, false)
	for _, e := range []*engine.Engine{fromSnap, full} {
		if err := e.Preload(t.Context(), []string{"p1"}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := snapReads.read.Load(), int64(head-snapSeq); got != want {
		t.Errorf("the load from the snapshot read %d events, want the %d after it", got, want)
	}
	if got := fullReads.read.Load(); got != int64(head) {
		t.Errorf("the full fold read %d events, want %d", got, head)
	}

	// The commands to decide on both: claims, fenced commands on live,
	// finished and suspended Turns, dispatch keys again (same and other
	// body), stops and resumes, releases after expiry.
	var cmds []kernel.Command
	for _, agent := range []string{"worker", "idle"} {
		cmds = append(cmds, kernel.ClaimNext{Common: admin, AgentID: agent, ClaimID: "clm_x", TokenHash: "h", ExpiresAt: f.now.Add(time.Minute)})
	}
	for _, c := range held {
		h := kernel.HashSecret(c.Token)
		cmds = append(cmds,
			kernel.Renew{Common: admin, Claim: c, TokenHash: h, ExpiresAt: f.now.Add(time.Hour)},
			kernel.Finish{Common: admin, TurnID: c.TurnID, Claim: c, TokenHash: h, Outcome: "failed"},
			kernel.Stop{Common: admin, TurnID: c.TurnID, RequestedBy: kernel.AgentRef{ProjectID: "p1", AgentID: "req"}},
			kernel.ExpireClaim{Common: admin, TurnID: c.TurnID})
	}
	var turns []string
	full.View(t.Context(), "p1", func(p *kernel.Project) error {
		turns = p.TurnIDs()
		return nil
	})
	for _, id := range turns {
		cmds = append(cmds,
			kernel.Stop{Common: admin, TurnID: id, RequestedBy: kernel.AgentRef{ProjectID: "p1", AgentID: "req"}},
			kernel.Resume{Common: admin, TurnID: id, RequestedBy: kernel.AgentRef{ProjectID: "p1", AgentID: "req"}},
			kernel.AppendRecord{Common: admin, TurnID: id, Claim: kernel.ClaimToken{ProjectID: "p1", TurnID: id, AgentID: "worker", Token: "x"},
				TokenHash: kernel.HashSecret("x"), Role: "note", Payload: json.RawMessage(`{}`)})
	}
	for i := range 3 {
		for _, body := range []string{`{}`, `{"other":1}`} {
			d := kernel.Dispatch{Common: admin, TurnID: "turn_new", RequestedBy: kernel.AgentRef{ProjectID: "p1", AgentID: "req"},
				TargetAgent: kernel.AgentRef{ProjectID: "p1", AgentID: "worker"}, Input: json.RawMessage(body), TurnKind: "k",
				DispatchKey: fmt.Sprintf("before-%d", i), Mode: kernel.AuthorityRoot, RequestID: fmt.Sprintf("before-%d", i), MaxDepth: 8}
			cmds = append(cmds, d)
		}
	}
	type outcome struct {
		Events []kernel.Event
		Err    string
	}
	decide := func(e *engine.Engine, at time.Time) []outcome {
		var out []outcome
		e.View(t.Context(), "p1", func(p *kernel.Project) error {
			for _, c := range cmds {
				ev, err := kernel.Decide(p, c, at)
				o := outcome{Events: ev}
				if err != nil {
					o.Err = err.Error()
				}
				out = append(out, o)
			}
			return nil
		})
		return out
	}
	for _, at := range []time.Time{f.now, f.now.Add(2 * time.Minute), f.now.Add(2 * time.Hour)} {
		if diff := cmp.Diff(decide(full, at), decide(fromSnap, at)); diff != "" {
			t.Errorf("at %s the decisions differ (-full fold +from snapshot):\n%s", at, diff)
		}
	}

	// And the write models are the same, queues and claims included.
	type model struct {
		P       *kernel.Project
		Turns   map[string]*kernel.Turn // finished ones unpacked
		Queued  map[string][]string
		Expired []string
		Live    int
	}
	view := func(e *engine.Engine) model {
		var m model
		e.View(t.Context(), "p1", func(p *kernel.Project) error {
			cp := *p
			m.P, m.Queued, m.Turns = &cp, map[string][]string{}, map[string]*kernel.Turn{}
			for _, id := range p.TurnIDs() {
				m.Turns[id] = p.Turn(id)
			}
			for id := range p.Agents {
				if n := p.NextQueued(id, f.now); n != nil {
					m.Queued[id] = []string{fmt.Sprint(p.Queued(id)), n.ID}
				}
			}
			m.Expired = kernel.ExpiredClaims(p, f.now.Add(2*time.Hour))
			m.Live, _ = p.ClaimCounts(f.now)
			return nil
		})
		return m
	}
	if diff := cmp.Diff(view(full), view(fromSnap), cmpopts.IgnoreUnexported(kernel.Project{}), cmpopts.IgnoreFields(kernel.Project{}, "Finished"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the write models differ (-full fold +from snapshot):\n%s", diff)
	}
}

// TestSnapshotOfAnotherLedgerIsIgnored: a snapshot whose ledger_seq lies
// beyond the project's last event (the ledger was replaced) or that cannot
// be read is not used; the project is folded from its first event.
func TestSnapshotOfAnotherLedgerIsIgnored(t *testing.T) {
	for name, snap := range map[string]func(head uint64) (uint64, []byte){
		"beyond the ledger": func(head uint64) (uint64, []byte) { return head + 100, []byte(`{"v":1}`) },
		"unreadable":        func(head uint64) (uint64, []byte) { return head, []byte(`{"v":99}`) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newSnapFixture(t)
			a, _ := f.engine(t, false)
			register(t, a, "req", 1)
			register(t, a, "worker", 1)
			head, _ := f.l.LastSeq(t.Context(), "p1")
			seq, data := snap(head)
			if err := f.store.SaveSnapshot("p1", seq, data); err != nil {
				t.Fatal(err)
			}
			b, reads := f.engine(t, true)
			res, err := dispatch(b, "k1")
			if err != nil || !res.Created {
				t.Fatalf("dispatch = %+v, %v", res, err)
			}
			if got := reads.read.Load(); got != int64(head) {
				t.Errorf("the load read %d events, want all %d", got, head)
			}
		})
	}
}

// TestSnapshotRemembersIdempotencyKeys: a write model loaded from a
// snapshot still knows the keys of the commands before it, so a retry after
// a restart answers its first result instead of appending again.
func TestSnapshotRemembersIdempotencyKeys(t *testing.T) {
	f := newSnapFixture(t)
	a, _ := f.engine(t, true)
	register(t, a, "worker", 1)
	hb := kernel.Heartbeat{Common: keyed("k", "{}"), AgentID: "worker"}
	seq, err := a.Execute(t.Context(), "p1", hb)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SaveSnapshots(); err != nil {
		t.Fatal(err)
	}
	b, reads := f.engine(t, true)
	if err := b.Preload(t.Context(), []string{"p1"}); err != nil {
		t.Fatal(err)
	}
	if n := reads.read.Load(); n != 0 {
		t.Fatalf("the load read %d events, want 0: it should come from the snapshot", n)
	}
	again, err := b.Execute(t.Context(), "p1", hb)
	if err != nil || again != seq {
		t.Errorf("retry after a load from the snapshot = %d, %v; want the first answer %d", again, err, seq)
	}
	if last, _ := f.l.LastSeq(t.Context(), "p1"); last != seq {
		t.Errorf("ledger ends at %d, want %d: the retry appended", last, seq)
	}
	other := kernel.Heartbeat{Common: keyed("k", `{"x":1}`), AgentID: "worker"}
	if _, err := b.Execute(t.Context(), "p1", other); kernel.ErrorKind(err) != kernel.Validation {
		t.Errorf("same key, other body after the load = %v, want a ValidationError", err)
	}
}

// TestSnapshotOfLayout3IsReadAndReplaced: a snapshot of layout 3 (every
// dispatch key in its JSON part, finished Turns' too) still loads, a
// repeated dispatch of a finished Turn's key finds that Turn, and the load
// replaces it by one of this build's layout, holding the keys of the Turns
// not finished only.
func TestSnapshotOfLayout3IsReadAndReplaced(t *testing.T) {
	f := newSnapFixture(t)
	a, _ := f.engine(t, true)
	register(t, a, "req", 1)
	register(t, a, "worker", 100)
	work(t, a, "w", 8) // w-0 and w-4 finished, w-3 and w-7 queued
	if err := a.SaveSnapshots(); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{}
	var live int
	a.View(t.Context(), "p1", func(p *kernel.Project) error {
		for _, id := range p.TurnIDs() {
			tn := p.Turn(id)
			all[kernel.DispatchKeyOf(tn.Dispatch.RequestedBy.AgentID, tn.Dispatch.DispatchKey)] = id
		}
		live = len(p.Turns)
		return nil
	})
	head := func() (uint64, map[string]json.RawMessage, []byte) {
		var seq uint64
		var h map[string]json.RawMessage
		var bin []byte
		err := f.store.LoadSnapshot("p1", func(s uint64, data []byte) error {
			n, k := binary.Uvarint(data)
			seq, bin = s, append([]byte(nil), data[k+int(n):]...)
			return json.Unmarshal(data[k:k+int(n)], &h)
		})
		if err != nil {
			t.Fatal(err)
		}
		return seq, h, bin
	}
	seq, h, bin := head()
	h["v"], _ = json.Marshal(3)
	h["dispatch_keys"], _ = json.Marshal(all)
	js, _ := json.Marshal(h)
	if err := f.store.SaveSnapshot("p1", seq, append(append(binary.AppendUvarint(nil, uint64(len(js))), js...), bin...)); err != nil {
		t.Fatal(err)
	}

	b, reads := f.engine(t, true)
	res, err := dispatch(b, "w-0")
	if err != nil || res.Created || res.TurnID != all[kernel.DispatchKeyOf("req", "w-0")] {
		t.Fatalf("dispatch of a finished Turn's key = %+v, %v; want its Turn %s, not created", res, err, all[kernel.DispatchKeyOf("req", "w-0")])
	}
	if got := reads.read.Load(); got != 0 {
		t.Errorf("the load read %d events: the snapshot of layout 3 was not used", got)
	}
	_, h, _ = head()
	var keys map[string]string
	json.Unmarshal(h["dispatch_keys"], &keys)
	if string(h["v"]) != "4" || len(keys) != live {
		t.Errorf("the snapshot after the load: layout %s with %d dispatch keys; want layout 4 with the %d of the Turns not finished", h["v"], len(keys), live)
	}
}
