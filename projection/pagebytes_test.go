package projection

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

// TestPagesStopAtByteBudget: with large events a page of limit 500 stops at
// DefaultMaxPageBytes with has_more, and paging on with the cursor reads every
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
		if size > DefaultMaxPageBytes {
			t.Errorf("TurnFeed(%d) page holds %d bytes of data, over DefaultMaxPageBytes %d", after, size, DefaultMaxPageBytes)
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
	huge := fmt.Sprintf("%q", strings.Repeat("y", DefaultMaxPageBytes+10))
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

// bigDispatch dispatches a Turn of kind to w with an input of about n bytes.
func (l *events) bigDispatch(turn, kind string, n int) {
	l.add(kernel.EvTurnDispatched, proj, kernel.AggTurn, turn, agent("w"), &kernel.TurnDispatched{
		TargetAgent: ref("w"), RequestedBy: ref("w"), Input: raw(`{"text":"` + strings.Repeat("i", n) + `"}`),
		TurnKind: kind, DispatchKey: "k-" + turn, BodyHash: "bh",
		Authority:  kernel.Authority{Mode: kernel.AuthorityRoot, RequestID: "r-" + turn},
		RootTurnID: turn,
	})
}

// turnPages follows TurnsPage from f's cursor to the end and returns the
// Turn ids of every page.
func turnPages(t *testing.T, s *Store, f TurnFilter, limit int) [][]string {
	t.Helper()
	var pages [][]string
	for range 1000 {
		p, err := s.TurnsPage(proj, f, limit)
		if err != nil {
			t.Fatalf("TurnsPage(after %d) = %v", f.AfterSeq, err)
		}
		var ids []string
		for _, v := range p.Items {
			ids = append(ids, v.TurnID)
		}
		pages = append(pages, ids)
		if !p.HasMore {
			return pages
		}
		if p.NextAfterSeq == f.AfterSeq && len(p.Items) == 0 {
			t.Fatalf("TurnsPage(after %d) = empty page with has_more that does not move the cursor", f.AfterSeq)
		}
		f.AfterSeq = p.NextAfterSeq
	}
	t.Fatalf("TurnsPage did not end after 1000 pages")
	return nil
}

// TestTurnsPagesStopAtByteBudget: Turns carry their input and final payload
// (up to the 1 MiB body bound each), so a Turn list page of limit 500 stops
// at the byte budget with has_more too, and following the cursor reads every
// matching Turn exactly once, in order, skipped ones included.
func TestTurnsPagesStopAtByteBudget(t *testing.T) {
	l := newEvents()
	l.register("w", "writer", 1)
	var want []string
	for i := range 40 {
		id := fmt.Sprintf("t%02d", i)
		kind := "big"
		if i%4 == 3 {
			kind = "other" // skipped by the filter below, between big ones
		}
		l.bigDispatch(id, kind, 200<<10) // 40 × 200 KiB = 8 MiB
		if kind == "big" {
			want = append(want, id)
		}
	}
	// A finished Turn counts its final payload too.
	l.dispatch("fin", "w", "w", "big")
	l.claim("fin", "w", "c1")
	l.finish("fin", "w", "c1", "succeeded", `"`+strings.Repeat("f", 900<<10)+`"`, 1)
	want = append(want, "fin")
	s := applied(t, l)

	pages := turnPages(t, s, TurnFilter{TurnKind: "big"}, MaxLimit)
	if len(pages) < 2 {
		t.Errorf("Turn list of %d Turns of 200 KiB = %d page(s), want at least 2", len(want), len(pages))
	}
	var got []string
	for i, p := range pages {
		if len(p) == 0 && i < len(pages)-1 {
			t.Errorf("page %d is empty but more followed", i)
		}
		got = append(got, p...)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Turns read through the pages (-want +got):\n%s", diff)
	}
	// Each page's items, as stored, fit the budget.
	f := TurnFilter{TurnKind: "big"}
	for {
		p, err := s.TurnsPage(proj, f, MaxLimit)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, v := range p.Items {
			size += len(v.Input) + len(v.FinalPayload)
		}
		if size > DefaultMaxPageBytes {
			t.Errorf("TurnsPage(after %d) holds %d bytes of inputs and payloads, over %d", f.AfterSeq, size, DefaultMaxPageBytes)
		}
		if !p.HasMore {
			break
		}
		f.AfterSeq = p.NextAfterSeq
	}
}

// TestPageBytesIsConfigured: Config.MaxPageBytes is the budget of every
// kind of page; one Turn larger than it still comes alone.
func TestPageBytesIsConfigured(t *testing.T) {
	l := newEvents()
	l.register("w", "writer", 1)
	for i := range 6 {
		l.bigDispatch(fmt.Sprintf("t%d", i), "k", 10<<10) // about 10 KiB each
	}
	l.bigDispatch("huge", "k", 100<<10)
	l.claim("t0", "w", "c1")
	for i := range 6 {
		l.record("t0", "w", "c1", uint64(i+1), "note", `"`+strings.Repeat("r", 10<<10)+`"`)
	}
	cfg := testConfig()
	cfg.MaxPageBytes = 25 << 10 // two items of 10 KiB, not three
	s, _ := openWith(t, cfg)
	mustApply(t, s, l.recs)

	if diff := cmp.Diff([][]string{{"t0", "t1"}, {"t2", "t3"}, {"t4", "t5"}, {"huge"}}, turnPages(t, s, TurnFilter{}, MaxLimit)); diff != "" {
		t.Errorf("Turn list pages with a 25 KiB budget (-want +got):\n%s", diff)
	}
	cp, err := s.Context(proj, "t0", 0, MaxLimit)
	if err != nil || len(cp.Items) != 2 || !cp.HasMore || cp.NextAfterTurnSeq != 2 {
		t.Errorf("Context page with a 25 KiB budget = %d items, has_more %v, next %d, %v; want 2 items, has_more, next 2", len(cp.Items), cp.HasMore, cp.NextAfterTurnSeq, err)
	}
	fp, err := s.TurnFeed(proj, "t0", 0, MaxLimit)
	if err != nil || len(fp.Items) < 2 || len(fp.Items) > 3 || !fp.HasMore {
		t.Errorf("Turn feed page with a 25 KiB budget = %d items, has_more %v, %v; want 2 or 3 (the dispatch, the claim, a record or two) and has_more", len(fp.Items), fp.HasMore, err)
	}
	cfg.MaxPageBytes = 0
	if err := cfg.Validate(); err == nil {
		t.Errorf("Config{MaxPageBytes: 0}.Validate() = nil, want an error")
	}
}
