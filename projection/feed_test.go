package projection

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

func seqs(p FeedPage) []uint64 {
	out := []uint64{}
	for _, it := range p.Items {
		out = append(out, it.LedgerSeq)
	}
	return out
}

func span(from, to uint64) []uint64 {
	out := []uint64{}
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestProjectFeedPaging(t *testing.T) {
	l := newEvents()
	for i := range 250 {
		l.dispatch(fmt.Sprintf("t%03d", i), "w", "b", "k")
		if i%50 == 0 { // another project's events interleave
			l.add(kernel.EvTurnDispatched, "p2", kernel.AggTurn, fmt.Sprintf("x%d", i), admin(), &kernel.TurnDispatched{TargetAgent: kernel.AgentRef{ProjectID: "p2", AgentID: "w"}})
		}
	}
	s := applied(t, l)
	var ours []uint64
	for _, r := range l.recs {
		if r.Event.ProjectID == proj {
			ours = append(ours, r.Seq)
		}
	}
	tests := []struct {
		after   uint64
		limit   int
		want    []uint64
		next    uint64
		hasMore bool
	}{
		{0, 500, ours, ours[249], false},
		{0, 10, ours[:10], ours[9], true},
		{ours[9], 10, ours[10:20], ours[19], true},
		{ours[239], 10, ours[240:], ours[249], false},
		{ours[240], 10, ours[241:], ours[249], false},
		{ours[249], 10, []uint64{}, ours[249], false},
		{1 << 40, 10, []uint64{}, 1 << 40, false},
		{^uint64(0), 10, []uint64{}, ^uint64(0), false},
		{0, 0, ours[:1], ours[0], true},     // clamped to 1
		{0, 100000, ours, ours[249], false}, // clamped to MaxLimit
	}
	for _, tt := range tests {
		got, err := s.ProjectFeed(proj, tt.after, tt.limit)
		if err != nil {
			t.Fatalf("ProjectFeed(%d, %d) = %v", tt.after, tt.limit, err)
		}
		if diff := cmp.Diff(tt.want, seqs(got)); diff != "" {
			t.Errorf("ProjectFeed(%d, %d) seqs mismatch (-want +got):\n%s", tt.after, tt.limit, diff)
		}
		if got.NextAfterLedgerSeq != tt.next || got.HasMore != tt.hasMore {
			t.Errorf("ProjectFeed(%d, %d) next, has_more = %d, %v; want %d, %v", tt.after, tt.limit, got.NextAfterLedgerSeq, got.HasMore, tt.next, tt.hasMore)
		}
	}
	// Walking the whole feed with the cursor visits every event once.
	var walked []uint64
	for after := uint64(0); ; {
		page, err := s.ProjectFeed(proj, after, 7)
		if err != nil {
			t.Fatalf("ProjectFeed(%d, 7) = %v", after, err)
		}
		walked = append(walked, seqs(page)...)
		after = page.NextAfterLedgerSeq
		if !page.HasMore {
			break
		}
	}
	if diff := cmp.Diff(ours, walked); diff != "" {
		t.Errorf("cursor walk mismatch (-want +got):\n%s", diff)
	}
	p2, err := s.ProjectFeed("p2", 0, 500)
	if err != nil || len(p2.Items) != 5 {
		t.Errorf("ProjectFeed(p2) = %d items, %v; want 5", len(p2.Items), err)
	}
}

func TestFeedItemShape(t *testing.T) {
	l := newEvents()
	pid := "parent-trace"
	depth := 2
	r := l.dispatch("t1", "w", "b", "k")
	r.Event.Meta = &kernel.Meta{Note: "hello", Annotations: raw(`{"a":1}`)}
	r.Event.Trace = &kernel.Trace{TraceID: "tr", ParentTraceID: &pid, RecursionDepth: &depth}
	l.recs[0] = r
	s := applied(t, l)
	page, err := s.ProjectFeed(proj, 0, 10)
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("ProjectFeed = %d items, %v; want 1", len(page.Items), err)
	}
	want := FeedItem{
		LedgerSeq: 1, Type: kernel.EvTurnDispatched, V: 1, ProjectID: proj, Aggregate: kernel.AggTurn, ID: "t1",
		At: r.Event.At, Actor: agent("b"),
		Data:  raw(`{"target_agent":{"project_id":"p1","agent_id":"w"},"requested_by":{"project_id":"p1","agent_id":"b"},"input":{"q":"t1"},"turn_kind":"k","dispatch_key":"k-t1","body_hash":"bh","authority":{"mode":"root_request","request_id":"r-t1"},"root_turn_id":"t1","depth":0}`),
		Meta:  r.Event.Meta,
		Trace: r.Event.Trace,
	}
	if diff := cmp.Diff(want, page.Items[0]); diff != "" {
		t.Errorf("feed item mismatch (-want +got):\n%s", diff)
	}
	b, _ := json.Marshal(FeedItem{})
	if !bytes.Contains(b, []byte(`"meta":null`)) || !bytes.Contains(b, []byte(`"trace":null`)) {
		t.Errorf("empty feed item JSON = %s, want meta and trace null", b)
	}
}

func TestTurnAndAgentFeeds(t *testing.T) {
	l := newEvents()
	l.register("alice", "coder", 1, "code")                                                                                                                                                                           // 1
	l.register("bob", "lead", 1)                                                                                                                                                                                      // 2
	l.register("carol", "qa", 1)                                                                                                                                                                                      // 3
	l.dispatch("t1", "alice", "bob", "code")                                                                                                                                                                          // 4: alice, bob
	l.dispatch("t2", "carol", "bob", "code")                                                                                                                                                                          // 5: carol, bob
	l.claim("t1", "alice", "c1")                                                                                                                                                                                      // 6: alice, bob
	l.issue("alice", "cred1", time.Hour)                                                                                                                                                                              // 7: alice
	l.add(kernel.EvAgentHeartbeat, proj, kernel.AggAgent, "carol", agent("carol"), &kernel.AgentHeartbeat{})                                                                                                          // 8: carol
	l.record("t1", "alice", "c1", 1, "note", `{}`)                                                                                                                                                                    // 9: alice, bob
	l.add(kernel.EvAgentWorkMemory, proj, kernel.AggAgent, "alice", agent("alice"), &kernel.AgentWorkMemoryReported{ReportID: "r1", Manifest: kernel.WorkMemoryReport{Kind: "agent_work_memory_report_manifest.v1"}}) // 10: alice
	l.add(kernel.EvInviteRedeemed, proj, kernel.AggInvite, "inv1", admin(), &kernel.InviteRedeemed{InviteID: "inv1", AgentID: "carol", CredentialID: "cred2", TokenHash: "SECRET"})                                   // 11: carol
	l.add(kernel.EvCredentialRevoked, proj, kernel.AggCredential, "cred1", admin(), &kernel.CredentialRevoked{CredentialID: "cred1", AgentID: "alice"})                                                               // 12: alice
	l.child("t3", "t1", "t1", 1, "carol", "alice", "code")                                                                                                                                                            // 13: carol, alice
	l.add(kernel.EvAgentDrained, proj, kernel.AggAgent, "bob", admin(), &kernel.AgentDrained{RequestedBy: ref("bob")})                                                                                                // 14: bob
	s := applied(t, l)

	tests := []struct {
		name string
		read func(after uint64, limit int) (FeedPage, error)
		want []uint64
	}{
		{"turn t1", func(a uint64, n int) (FeedPage, error) { return s.TurnFeed(proj, "t1", a, n) }, []uint64{4, 6, 9}},
		{"turn t2", func(a uint64, n int) (FeedPage, error) { return s.TurnFeed(proj, "t2", a, n) }, []uint64{5}},
		{"agent alice", func(a uint64, n int) (FeedPage, error) { return s.AgentFeed(proj, "alice", a, n) }, []uint64{1, 4, 6, 7, 9, 10, 12, 13}},
		{"agent bob", func(a uint64, n int) (FeedPage, error) { return s.AgentFeed(proj, "bob", a, n) }, []uint64{2, 4, 5, 6, 9, 14}},
		{"agent carol", func(a uint64, n int) (FeedPage, error) { return s.AgentFeed(proj, "carol", a, n) }, []uint64{3, 5, 8, 11, 13}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.read(0, 500)
			if err != nil {
				t.Fatalf("read(0, 500) = %v", err)
			}
			if diff := cmp.Diff(tt.want, seqs(got)); diff != "" {
				t.Errorf("read(0, 500) mismatch (-want +got):\n%s", diff)
			}
			// Page by 2 from the second item.
			got, err = tt.read(tt.want[0], 2)
			if err != nil {
				t.Fatalf("read(%d, 2) = %v", tt.want[0], err)
			}
			end := min(3, len(tt.want))
			if diff := cmp.Diff(tt.want[1:end], seqs(got)); diff != "" {
				t.Errorf("read(%d, 2) mismatch (-want +got):\n%s", tt.want[0], diff)
			}
			if wantMore := len(tt.want) > 3; got.HasMore != wantMore {
				t.Errorf("read(%d, 2).HasMore = %v, want %v", tt.want[0], got.HasMore, wantMore)
			}
		})
	}
	if _, err := s.AgentFeed(proj, "nobody", 0, 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("AgentFeed(nobody) = %v, want ErrNotFound", err)
	}
	if _, err := s.AgentFeed("p2", "alice", 0, 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("AgentFeed(p2, alice) = %v, want ErrNotFound", err)
	}
}

// TestFeedsCarryNoSecrets: no feed item of any kind carries a token_hash or
// code_hash field, nor the hashed values, at any depth.
func TestFeedsCarryNoSecrets(t *testing.T) {
	l := newEvents()
	l.register("w", "worker", 1, "k")
	l.dispatch("t1", "w", "b", "k")
	l.claim("t1", "w", "c1")
	l.issue("w", "cred1", time.Hour)
	l.add(kernel.EvInviteCreated, proj, kernel.AggInvite, "inv1", admin(), &kernel.InviteCreated{InviteID: "inv1", AgentID: "w", CodeHash: "SECRET-code-hash", ExpiresAt: t0.Add(time.Hour), SingleUse: true})
	l.add(kernel.EvInviteRedeemed, proj, kernel.AggInvite, "inv1", admin(), &kernel.InviteRedeemed{InviteID: "inv1", AgentID: "w", CredentialID: "cred2", TokenHash: "SECRET-token-hash-2"})
	// A payload that hides the field name behind a JSON escape.
	l.record("t1", "w", "c1", 1, "note", `{"nested":[{"token\u005fhash":"SECRET-nested","keep":"<ok>"}],"code_hash":"SECRET-top"}`)
	l.add("custom.future", proj, "custom", "x1", admin(), map[string]any{"deep": map[string]any{"code_hash": "SECRET-deep", "n": 1}})
	s := applied(t, l)

	var all []FeedItem
	for _, read := range []func() (FeedPage, error){
		func() (FeedPage, error) { return s.ProjectFeed(proj, 0, 500) },
		func() (FeedPage, error) { return s.TurnFeed(proj, "t1", 0, 500) },
		func() (FeedPage, error) { return s.AgentFeed(proj, "w", 0, 500) },
	} {
		page, err := read()
		if err != nil {
			t.Fatalf("feed read = %v", err)
		}
		all = append(all, page.Items...)
	}
	if len(all) < 16 {
		t.Fatalf("feeds hold %d items, want at least 16", len(all))
	}
	for _, it := range all {
		b, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"token_hash", "code_hash", "SECRET", `\u005f`} {
			if strings.Contains(string(b), bad) {
				t.Errorf("feed item %d (%s) contains %q: %s", it.LedgerSeq, it.Type, bad, b)
			}
		}
	}
	// Stripping keeps the rest of the data.
	page, _ := s.TurnFeed(proj, "t1", 2, 500)
	var claimed map[string]any
	json.Unmarshal(page.Items[0].Data, &claimed)
	if diff := cmp.Diff(map[string]any{"claim_id": "c1", "agent_id": "w", "expires_at": claimed["expires_at"]}, claimed); diff != "" || claimed["expires_at"] == nil {
		t.Errorf("turn.claimed feed data mismatch (-want +got):\n%s", diff)
	}
	// The dump holds no hash either: the models never store one. (The
	// record payload is the client's own data and is kept as written in the
	// semantic context.)
	for bucket, kv := range mustDump(t, s) {
		for k, v := range kv {
			if strings.Contains(v, "-hash") || strings.Contains(k, "-hash") {
				t.Errorf("bucket %s key %q holds a secret: %s", bucket, k, v)
			}
		}
	}
}
