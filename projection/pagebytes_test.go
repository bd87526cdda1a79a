package projection

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPagesStopAtByteBudget: with large events a page of limit 500 stops at
// MaxPageBytes with has_more, and paging on with the cursor reads every
// item exactly once.
func TestPagesStopAtByteBudget(t *testing.T) {
	l := newEvents()
	l.register("w", "writer", 1)
	l.dispatch("t1", "w", "b", "k")
	l.claim("t1", "w", "c1")
	big := `"` + strings.Repeat("x", 200<<10) + `"` // 200 KiB payloads
	const records = 50                              // 10 MiB in all
	for i := range records {
		l.record("t1", "w", "c1", uint64(i+1), "assistant", big)
	}
	s := applied(t, l)

	var all []uint64
	after, pages := uint64(0), 0
	for {
		p, err := s.TurnFeed(proj, "t1", after, MaxLimit)
		if err != nil {
			t.Fatalf("TurnFeed(%d) = %v", after, err)
		}
		pages++
		size := 0
		for _, it := range p.Items {
			size += len(it.Data)
		}
		if size > MaxPageBytes {
			t.Errorf("TurnFeed(%d) page holds %d bytes of data, over MaxPageBytes %d", after, size, MaxPageBytes)
		}
		all = append(all, seqs(p)...)
		after = p.NextAfterLedgerSeq
		if !p.HasMore {
			break
		}
		if len(p.Items) == 0 {
			t.Fatalf("TurnFeed(%d) = empty page with has_more", after)
		}
	}
	if pages < 3 {
		t.Errorf("TurnFeed over %d records of 200 KiB took %d pages, want at least 3", records, pages)
	}
	var want []uint64
	for _, r := range l.recs {
		if r.Event.ID == "t1" {
			want = append(want, r.Seq)
		}
	}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("TurnFeed pages mismatch (-want +got):\n%s", diff)
	}

	var turnSeqs []uint64
	afterTS := uint64(0)
	for {
		p, err := s.Context(proj, "t1", afterTS, MaxLimit)
		if err != nil {
			t.Fatalf("Context(%d) = %v", afterTS, err)
		}
		for _, it := range p.Items {
			turnSeqs = append(turnSeqs, it.TurnSeq)
		}
		if len(p.Items) >= records {
			t.Fatalf("Context(%d) returned all %d records of 200 KiB in one page", afterTS, len(p.Items))
		}
		afterTS = p.NextAfterTurnSeq
		if !p.HasMore {
			break
		}
	}
	if len(turnSeqs) != records || turnSeqs[0] != 1 || turnSeqs[records-1] != records {
		t.Errorf("Context pages = %d records (%v…), want turn_seq 1..%d once each", len(turnSeqs), turnSeqs[:min(3, len(turnSeqs))], records)
	}
}

// TestPageHoldsOneOversizedItem: an item larger than the budget is still
// returned, alone, so that no cursor can get stuck.
func TestPageHoldsOneOversizedItem(t *testing.T) {
	l := newEvents()
	l.register("w", "writer", 1)
	l.dispatch("t1", "w", "b", "k")
	l.claim("t1", "w", "c1")
	huge := fmt.Sprintf("%q", strings.Repeat("y", MaxPageBytes+10))
	l.record("t1", "w", "c1", 1, "assistant", huge)
	l.record("t1", "w", "c1", 2, "assistant", `"small"`)
	s := applied(t, l)
	p, err := s.Context(proj, "t1", 0, 10)
	if err != nil {
		t.Fatalf("Context = %v", err)
	}
	if len(p.Items) != 1 || !p.HasMore || p.NextAfterTurnSeq != 1 {
		t.Errorf("Context(0) = %d items, has_more %v, next %d; want the one oversized record, has_more, next 1", len(p.Items), p.HasMore, p.NextAfterTurnSeq)
	}
}
