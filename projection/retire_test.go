package projection

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

// retirementLedger is a project with an old finished tree (t1 with child t2),
// a recently finished Turn t3, a live queued Turn t4 dispatched long ago,
// and events after them. It returns the ledger_seq after which the horizon
// is set (the last event of the old tree) and the time between t1's finish
// and t3's.
func retirementLedger() (*events, uint64, time.Time) {
	l := newEvents()
	l.register("a", "worker", 2, "k")
	l.register("b", "worker", 2, "k")
	l.dispatch("t1", "a", "b", "k")
	l.claim("t1", "a", "c1")
	l.child("t2", "t1", "t1", 1, "b", "a", "k")
	l.claim("t2", "b", "c2")
	l.record("t2", "b", "c2", 1, "note", `{"n":1}`)
	l.finish("t2", "b", "c2", "succeeded", `{"ok":2}`, 2)
	l.dispatch("t4", "b", "a", "k") // live, old
	l.finish("t1", "a", "c1", "succeeded", "", 1)
	old := l.seq
	l.at = l.at.Add(time.Hour)
	cutoff := l.at
	l.dispatch("t3", "a", "b", "k")
	l.claim("t3", "a", "c3")
	l.finish("t3", "a", "c3", "failed", "", 1)
	l.add(kernel.EvAgentHeartbeat, proj, kernel.AggAgent, "a", agent("a"), &kernel.AgentHeartbeat{})
	return l, old, cutoff
}

func TestRetireRemovesOldTreesAndFeedsBelowTheHorizon(t *testing.T) {
	l, old, cutoff := retirementLedger()
	s := applied(t, l)
	now := cutoff.Add(48 * time.Hour)
	horizon := old + 1
	views := map[string]TurnView{}
	for _, id := range []string{"t1", "t2"} {
		v, err := s.Turn(proj, id)
		if err != nil {
			t.Fatal(err)
		}
		v.Input, v.FinalPayload = raw("null"), nil // not kept
		views[id] = v
	}
	res, err := s.Retire(Retirement{Horizon: horizon, FinishedBefore: cutoff, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if res.Horizon != horizon || res.TurnsRetired != 2 {
		t.Errorf("Retire = %+v, want horizon %d and 2 Turns retired", res, horizon)
	}
	for _, id := range []string{"t1", "t2"} {
		_, err := s.Turn(proj, id)
		var re *RetiredError
		if !errors.As(err, &re) || kernel.ErrorKind(err) != kernel.NotFound || !re.RetiredAt.Equal(now) || re.FinishedAt == nil {
			t.Errorf("Turn(%s) = %v, want a RetiredError (404) retired at %v", id, err, now)
		}
		if _, err := s.Context(proj, id, 0, 10); !errors.As(err, &re) {
			t.Errorf("Context(%s) = %v, want a RetiredError", id, err)
		}
		// A command naming it (a repeated dispatch_key) gets its last view.
		v, err := s.TurnAt(context.Background(), proj, id, l.seq)
		if err != nil {
			t.Errorf("TurnAt(%s) = %v, want its last view", id, err)
		}
		if diff := cmp.Diff(views[id], v); diff != "" {
			t.Errorf("TurnAt(%s) of the retired Turn (-last view +got):\n%s", id, diff)
		}
	}
	for _, id := range []string{"t3", "t4"} {
		if _, err := s.Turn(proj, id); err != nil {
			t.Errorf("Turn(%s) = %v, want it kept", id, err)
		}
	}
	turns, err := s.Turns(proj, TurnFilter{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range turns {
		ids = append(ids, v.TurnID)
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]string{"t3", "t4"}, ids); diff != "" {
		t.Errorf("Turns (-want +got):\n%s", diff)
	}
	// Feeds: below the horizon, gone; from it on, whole.
	var ge *GoneError
	for name, read := range map[string]func(after uint64) (FeedPage, error){
		"project": func(a uint64) (FeedPage, error) { return s.ProjectFeed(proj, a, 100) },
		"turn t4": func(a uint64) (FeedPage, error) { return s.TurnFeed(proj, "t4", a, 100) },
		"agent a": func(a uint64) (FeedPage, error) { return s.AgentFeed(proj, "a", a, 100) },
	} {
		// A GoneError is the kernel's Gone (410) on every face, MCP's too.
		if _, err := read(0); !errors.As(err, &ge) || ge.Horizon != horizon || kernel.ErrorKind(err) != kernel.Gone {
			t.Errorf("%s feed after 0 = %v, want GoneError (kernel.Gone) at %d", name, err, horizon)
		}
		if _, err := read(horizon - 2); !errors.As(err, &ge) {
			t.Errorf("%s feed after %d = %v, want GoneError", name, horizon-2, err)
		}
		if _, err := read(horizon - 1); err != nil {
			t.Errorf("%s feed after %d = %v, want a page", name, horizon-1, err)
		}
	}
	page, err := s.ProjectFeed(proj, horizon-1, 100)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, it := range page.Items {
		seqs = append(seqs, it.LedgerSeq)
	}
	var want []uint64
	for seq := horizon; seq <= l.seq; seq++ {
		want = append(want, seq)
	}
	if diff := cmp.Diff(want, seqs); diff != "" {
		t.Errorf("project feed after the horizon (-want +got):\n%s", diff)
	}
	// Nothing of the retired Turns is left in the indexes.
	for bkt, m := range mustDump(t, s) {
		for k, v := range m {
			if bkt != string(bktRetired) && (v == "t1" || v == "t2" || containsTurn(k, "t1") || containsTurn(k, "t2")) {
				t.Errorf("bucket %s still holds %q → %q", bkt, k, v)
			}
		}
	}
}

// containsTurn reports whether an encoded key has the part id.
func containsTurn(k, id string) bool {
	return slices.Contains(splitParts([]byte(k)), id)
}

func splitParts(k []byte) []string {
	var parts []string
	var cur []byte
	for i := 0; i < len(k); i++ {
		if k[i] == 0 && i+1 < len(k) && k[i+1] == 0 {
			parts = append(parts, string(cur))
			cur = nil
			i++
			continue
		}
		cur = append(cur, k[i])
	}
	return parts
}

func TestRetireOnlyWhollyFinishedOldTrees(t *testing.T) {
	l := newEvents()
	l.register("a", "worker", 2, "k")
	l.dispatch("t1", "a", "a", "k")
	l.claim("t1", "a", "c1")
	l.child("t2", "t1", "t1", 1, "a", "a", "k") // never finished
	l.finish("t1", "a", "c1", "succeeded", "", 1)
	l.dispatch("t5", "a", "a", "k")
	l.claim("t5", "a", "c5")
	l.finish("t5", "a", "c5", "succeeded", "", 1)
	s := applied(t, l)
	// t5 finished last, at l.now(): not before the cutoff.
	res, err := s.Retire(Retirement{Horizon: l.seq + 1, FinishedBefore: l.now(), Now: l.now()})
	if err != nil {
		t.Fatal(err)
	}
	if res.TurnsRetired != 0 {
		t.Errorf("Retire = %+v, want nothing retired (t1's child is live, t5 finished at the cutoff)", res)
	}
	// A horizon past the checkpoint is clamped to checkpoint + 1.
	res, err = s.Retire(Retirement{Horizon: l.seq + 50, FinishedBefore: l.now().Add(time.Second), Now: l.now()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Horizon != l.seq+1 || res.TurnsRetired != 1 {
		t.Errorf("Retire = %+v, want horizon %d and t5 retired", res, l.seq+1)
	}
	if p, err := s.Projects(); err != nil || !slices.Equal(p, []string{proj}) {
		t.Errorf("Projects() with every event below the horizon = %v, %v; want [%s]", p, err, proj)
	}
}

func TestRetireInSmallChunksEqualsOneGo(t *testing.T) {
	l, old, cutoff := retirementLedger()
	r := Retirement{Horizon: old + 1, FinishedBefore: cutoff, Now: cutoff}
	one, small := applied(t, l), applied(t, l)
	if _, err := one.Retire(r); err != nil {
		t.Fatal(err)
	}
	r.ChunkKeys = 1
	if _, err := small.Retire(r); err != nil {
		t.Fatal(err)
	}
	// A second run changes nothing.
	if res, err := small.Retire(r); err != nil || res.TurnsRetired != 0 || res.FeedKeys != 0 {
		t.Errorf("Retire again = %+v, %v; want nothing left to do", res, err)
	}
	if diff := cmp.Diff(mustDump(t, one), mustDump(t, small)); diff != "" {
		t.Errorf("retired in chunks of 1 key vs at once (-once +chunks):\n%s", diff)
	}
}
