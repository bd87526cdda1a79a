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
