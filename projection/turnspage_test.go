package projection

import (
	"fmt"
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
