package projection

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTurnsPageScanBudget: a filter that skips most Turns never makes a page
// examine more than its scan budget; the cursor then moves past what was
// examined, and following it finds every match.
func TestTurnsPageScanBudget(t *testing.T) {
	l := newEvents()
	l.register("w", "worker", 1)
	for i := 0; i < 300; i++ {
		kind := "common"
		if i == 250 {
			kind = "rare"
		}
		l.dispatch(fmt.Sprintf("t%03d", i), "w", "w", kind)
	}
	s := applied(t, l)
	first, err := s.TurnsPage(proj, TurnFilter{TurnKind: "rare"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Items) != 0 || !first.HasMore {
		t.Fatalf("first page = %d items, has_more %v; want 0 items and more to come", len(first.Items), first.HasMore)
	}
	var got []string
	f := TurnFilter{TurnKind: "rare"}
	for pages := 0; pages < 10; pages++ {
		pg, err := s.TurnsPage(proj, f, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range pg.Items {
			got = append(got, v.TurnID)
		}
		if !pg.HasMore {
			break
		}
		f.AfterSeq = pg.NextAfterSeq
	}
	if diff := cmp.Diff([]string{"t250"}, got); diff != "" {
		t.Errorf("rare turns (-want +got):\n%s", diff)
	}
	// Past the end: nothing, no more.
	last, err := s.TurnsPage(proj, TurnFilter{AfterSeq: ^uint64(0)}, 10)
	if err != nil || len(last.Items) != 0 || last.HasMore {
		t.Errorf("page after the largest cursor = %+v, %v", last, err)
	}
}

// TestTurnsPageNewestFirst: with NewestFirst the Turns come newest dispatch
// first, through every index (all, by target, by state), and following the
// cursor page by page gives each Turn once, down to the oldest; the default
// order stays oldest first.
func TestTurnsPageNewestFirst(t *testing.T) {
	l := newEvents()
	l.register("a", "worker", 1)
	l.register("b", "worker", 1)
	var all, ofA []string
	for i := 0; i < 7; i++ {
		id, target := fmt.Sprintf("t%d", i), "a"
		if i%3 == 1 {
			target = "b"
		}
		l.dispatch(id, target, "a", "k")
		all = append(all, id)
		if target == "a" {
			ofA = append(ofA, id)
		}
	}
	s := applied(t, l)
	walk := func(f TurnFilter, limit int) []string {
		t.Helper()
		var got []string
		for pages := 0; pages < 20; pages++ {
			pg, err := s.TurnsPage(proj, f, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range pg.Items {
				got = append(got, v.TurnID)
			}
			if !pg.HasMore {
				return got
			}
			f.AfterSeq = pg.NextAfterSeq
		}
		t.Fatalf("filter %+v: no end after 20 pages", f)
		return nil
	}
	reversed := func(s []string) []string {
		out := append([]string(nil), s...)
		slices.Reverse(out)
		return out
	}
	for _, tc := range []struct {
		name string
		f    TurnFilter
		want []string
	}{
		{"oldest first", TurnFilter{}, all},
		{"newest first", TurnFilter{NewestFirst: true}, reversed(all)},
		{"newest first of a target", TurnFilter{NewestFirst: true, TargetAgentID: "a"}, reversed(ofA)},
		{"newest first of a state", TurnFilter{NewestFirst: true, State: "queued"}, reversed(all)},
	} {
		for _, limit := range []int{1, 2, 50} {
			if diff := cmp.Diff(tc.want, walk(tc.f, limit)); diff != "" {
				t.Errorf("%s, pages of %d (-want +got):\n%s", tc.name, limit, diff)
			}
		}
	}
}

// TestTurnIDs: the ids of the Turns that begin with a prefix, newest
// dispatch first, of every Turn or of those an agent is a party of, at most
// the limit, with more set when it stopped early.
func TestTurnIDs(t *testing.T) {
	l := newEvents()
	for _, a := range []string{"a", "b", "c"} {
		l.register(a, "worker", 1)
	}
	// turn_x0…x4 between a and b, turn_y0…y2 between b and c.
	for i := range 5 {
		l.dispatch(fmt.Sprintf("turn_x%d", i), "b", "a", "k")
	}
	for i := range 3 {
		l.dispatch(fmt.Sprintf("turn_y%d", i), "c", "b", "k")
	}
	s := applied(t, l)
	type result struct {
		IDs  []string
		More bool
	}
	for _, tc := range []struct {
		name              string
		visibleTo, prefix string
		limit             int
		want              result
	}{
		{"all", "", "", 100, result{[]string{"turn_y2", "turn_y1", "turn_y0", "turn_x4", "turn_x3", "turn_x2", "turn_x1", "turn_x0"}, false}},
		{"a prefix", "", "turn_y", 100, result{[]string{"turn_y2", "turn_y1", "turn_y0"}, false}},
		{"a whole id", "", "turn_x3", 100, result{[]string{"turn_x3"}, false}},
		{"a party's", "a", "", 100, result{[]string{"turn_x4", "turn_x3", "turn_x2", "turn_x1", "turn_x0"}, false}},
		{"a party's, of a prefix it has none of", "a", "turn_y", 100, result{[]string{}, false}},
		{"the middle party's", "b", "turn_", 100, result{[]string{"turn_y2", "turn_y1", "turn_y0", "turn_x4", "turn_x3", "turn_x2", "turn_x1", "turn_x0"}, false}},
		{"up to the limit", "", "turn_x", 2, result{[]string{"turn_x4", "turn_x3"}, true}},
		{"no match", "", "nope", 100, result{[]string{}, false}},
		{"an agent that is no party", "nobody", "", 100, result{[]string{}, false}},
	} {
		ids, more, err := s.TurnIDs(proj, tc.visibleTo, tc.prefix, tc.limit)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, result{ids, more}); diff != "" {
			t.Errorf("%s: TurnIDs(%q, %q, %d) (-want +got):\n%s", tc.name, tc.visibleTo, tc.prefix, tc.limit, diff)
		}
	}
}

// TestTurnIDsStopsAtItsBudget: a walk examines at most idScanBudget entries
// of the index; a match older than that is not found, and more says that
// the walk stopped early.
func TestTurnIDsStopsAtItsBudget(t *testing.T) {
	l := newEvents()
	l.register("a", "worker", 1)
	l.dispatch("turn_old", "a", "a", "k")
	for i := range idScanBudget {
		l.dispatch(fmt.Sprintf("turn_%d", i), "a", "a", "k")
	}
	s := applied(t, l)
	ids, more, err := s.TurnIDs(proj, "", "turn_old", 100)
	if err != nil || len(ids) != 0 || !more {
		t.Errorf("TurnIDs of a prefix past the budget = %v, %v, %v; want none, more", ids, more, err)
	}
	// Within the budget every match is found (turn_999 and turn_9990…9999);
	// the entry past the budget may still match.
	if ids, more, err := s.TurnIDs(proj, "", "turn_999", 100); err != nil || len(ids) != 11 || !more {
		t.Errorf("TurnIDs(turn_999) = %d ids, more %v, %v; want 11, more", len(ids), more, err)
	}
}
