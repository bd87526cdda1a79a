package projection

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/turnledger/turnledger/kernel"
)

// TestRawFeedIsTheEncodedFeed: a raw page holds, item for item, the bytes
// json.Marshal gives for the items of the decoded page, with the same cursor
// and has_more, for the three feeds, any cursor and any page size, and for
// items whose strings need escaping, whose data is not an object or whose
// time has a zone. That is what lets HTTP send the stored bytes as they are.
func TestRawFeedIsTheEncodedFeed(t *testing.T) {
	depth, pid := 2, "ptr"
	l := newEvents()
	l.register("alice", "coder", 1, "code")
	l.register("bob", "lead", 1)
	l.dispatch("t1", "alice", "bob", "code")
	l.claim("t1", "alice", "c1")
	l.record("t1", "alice", "c1", 1, "note", `{"html":"<b>&amp;</b>","sep":"\u2028","quote":"\"}"}`)
	l.record("t1", "alice", "c1", 2, "note", `[1,"two",{"three":null}]`)
	l.record("t1", "alice", "c1", 3, "note", `"just a string"`)
	hb := l.add(kernel.EvAgentHeartbeat, proj, kernel.AggAgent, "alice", agent("alice"), &kernel.AgentHeartbeat{})
	for _, f := range []func(*kernel.Event){
		func(e *kernel.Event) {
			e.Meta = &kernel.Meta{Note: "hello <you>", Annotations: raw(`{"a":[1,"}",{"b":"\""}]}`)}
		},
		func(e *kernel.Event) {
			e.Trace = &kernel.Trace{TraceID: "tr", ParentTraceID: &pid, RecursionDepth: &depth}
		},
		func(e *kernel.Event) { e.At = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600)) },
		func(e *kernel.Event) { e.Actor = admin() },
	} {
		r := hb
		l.seq++
		r.Seq = l.seq
		f(&r.Event)
		l.recs = append(l.recs, r)
	}
	l.finish("t1", "alice", "c1", "succeeded", `{"ok":"<yes>"}`, 4)
	s := applied(t, l)
	last := l.recs[len(l.recs)-1].Seq

	feeds := []struct {
		kind    FeedKind
		id      string
		decoded func(after uint64, limit int) (FeedPage, error)
	}{
		{FeedOfProject, "", func(a uint64, n int) (FeedPage, error) { return s.ProjectFeed(proj, a, n) }},
		{FeedOfTurn, "t1", func(a uint64, n int) (FeedPage, error) { return s.TurnFeed(proj, "t1", a, n) }},
		{FeedOfAgent, "alice", func(a uint64, n int) (FeedPage, error) { return s.AgentFeed(proj, "alice", a, n) }},
		{FeedOfAgent, "bob", func(a uint64, n int) (FeedPage, error) { return s.AgentFeed(proj, "bob", a, n) }},
	}
	type page struct {
		Items   []string
		Next    uint64
		HasMore bool
	}
	for _, f := range feeds {
		for _, after := range []uint64{0, 3, 6, last, ^uint64(0)} {
			for _, limit := range []int{1, 2, 500} {
				name := fmt.Sprintf("feed %d %q after %d limit %d", f.kind, f.id, after, limit)
				dp, err := f.decoded(after, limit)
				if err != nil {
					t.Fatalf("%s: decoded = %v", name, err)
				}
				want := page{Items: []string{}, Next: dp.NextAfterLedgerSeq, HasMore: dp.HasMore}
				for _, it := range dp.Items {
					b, err := json.Marshal(it)
					if err != nil {
						t.Fatalf("%s: json.Marshal(%+v) = %v", name, it, err)
					}
					want.Items = append(want.Items, string(b))
				}
				rp, err := s.RawFeed(f.kind, proj, f.id, after, limit)
				if err != nil {
					t.Fatalf("%s: RawFeed = %v", name, err)
				}
				got := page{Items: []string{}, Next: rp.NextAfterLedgerSeq, HasMore: rp.HasMore}
				for _, it := range rp.Items {
					got.Items = append(got.Items, string(it))
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: raw page differs from the encoded decoded page (-want +got):\n%s", name, diff)
				}
				if j := strings.Join(want.Items, ","); string(rp.Joined) != j {
					t.Errorf("%s: Joined = %s, want the items with a comma between two: %s", name, rp.Joined, j)
				}
				rp.Release() // the next read may take its buffer
			}
		}
	}

	whole, err := s.RawFeed(FeedOfProject, proj, "", 0, 500)
	if err != nil || len(whole.Items) != len(l.recs) {
		t.Fatalf("RawFeed(project, 0, 500) = %d items, %v; want %d", len(whole.Items), err, len(l.recs))
	}
	// The items are the caller's until released: a later read does not
	// change them, and one after the release reads the same page again.
	before := string(whole.Joined)
	if _, err := s.RawFeed(FeedOfProject, proj, "", 1, 500); err != nil || string(whole.Joined) != before {
		t.Errorf("a second RawFeed changed the first page: %s, then %s (%v)", before, whole.Joined, err)
	}
	whole.Release()
	if again, err := s.RawFeed(FeedOfProject, proj, "", 0, 500); err != nil || string(again.Joined) != before {
		t.Errorf("RawFeed after a release = %s (%v), want the page as before: %s", again.Joined, err, before)
	}

	for _, c := range []struct {
		kind    FeedKind
		project string
		id      string
	}{{FeedOfAgent, proj, "nobody"}, {FeedOfTurn, proj, "t9"}, {FeedOfAgent, "p2", "alice"}} {
		if _, err := s.RawFeed(c.kind, c.project, c.id, 0, 10); !errors.Is(err, ErrNotFound) {
			t.Errorf("RawFeed(%d, %s, %s) = %v, want ErrNotFound", c.kind, c.project, c.id, err)
		}
	}

	// A stored value that is not a feed item is an error, never sent on.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktFeed).Put(seqKey(5, proj), []byte(`{"not":"an item"}`))
	}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.RawFeed(FeedOfProject, proj, "", 0, 500); err == nil || !strings.Contains(err.Error(), "ledger_seq 5") {
		t.Errorf("RawFeed over a damaged item = %d items, %v; want an error naming ledger_seq 5", len(p.Items), err)
	}
}
