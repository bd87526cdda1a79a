package ledger

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

func TestDecodeAllStopsAtTheFirstBadMessage(t *testing.T) {
	s := &Store{cfg: DefaultConfig()}
	ev := kernel.Event{
		Type: kernel.EvAgentHeartbeat, V: 1, ProjectID: "p1", Aggregate: kernel.AggAgent, ID: "a1",
		At: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), Actor: kernel.Actor{Kind: "admin"}, Data: &kernel.AgentHeartbeat{},
	}
	good, err := kernel.MarshalEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	mkRaws := func(bad int) []raw {
		raws := make([]raw, n)
		for i := range raws {
			raws[i] = raw{seq: uint64(i + 1), subject: "tl.p1.agent", data: good}
		}
		if bad >= 0 {
			raws[bad].data = []byte(`{"type":"agent.heartbeat","v":2}`)
		}
		return raws
	}
	seqs := func(rs []kernel.Recorded) []uint64 {
		var out []uint64
		for _, r := range rs {
			out = append(out, r.Seq)
		}
		return out
	}
	want := func(k int) []uint64 {
		var out []uint64
		for i := range k {
			out = append(out, uint64(i+1))
		}
		return out
	}

	got, err := s.decodeAll(mkRaws(-1))
	if err != nil {
		t.Fatalf("decodeAll(%d good) = %v", n, err)
	}
	if diff := cmp.Diff(want(n), seqs(got)); diff != "" {
		t.Errorf("decodeAll(%d good) mismatch (-want +got):\n%s", n, diff)
	}
	for _, bad := range []int{0, 1, 63, 64, 149, 150, 151, 299} {
		got, err := s.decodeAll(mkRaws(bad))
		if err == nil {
			t.Errorf("decodeAll(bad at %d) = nil error, want one", bad)
		}
		if diff := cmp.Diff(want(bad), seqs(got)); diff != "" {
			t.Errorf("decodeAll(bad at %d) mismatch (-want +got):\n%s", bad, diff)
		}
	}
	// A message whose metadata could not be read counts as bad too.
	raws := mkRaws(-1)
	raws[200].err = errors.New("no metadata")
	if got, err := s.decodeAll(raws); err == nil || len(got) != 200 {
		t.Errorf("decodeAll(metadata error at 200) = %d events, %v; want 200 and an error", len(got), err)
	}
}
