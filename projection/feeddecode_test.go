package projection

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

// oddFeedEvents returns the events of l followed by variations of its last
// event in every part of a feed item an encoder or decoder may get wrong.
func oddFeedEvents(l *events) []kernel.Recorded {
	depth, pid := 2, "ptr"
	with := func(r kernel.Recorded, f func(*kernel.Event)) kernel.Recorded { f(&r.Event); return r }
	recs := append([]kernel.Recorded{}, l.recs...)
	base := l.recs[len(l.recs)-1]
	for i, f := range []func(*kernel.Event){
		func(e *kernel.Event) {
			e.Meta = &kernel.Meta{Note: "hello", Annotations: raw(`{"a":[1,"}",{"b":"\""}]}`)}
		},
		func(e *kernel.Event) {
			e.Trace = &kernel.Trace{TraceID: "tr", ParentTraceID: &pid, RecursionDepth: &depth}
		},
		func(e *kernel.Event) { e.ID = "t<&>\x00é" },
		func(e *kernel.Event) { e.Actor = admin() },
		func(e *kernel.Event) { e.Actor = agent("a\"b") },
		func(e *kernel.Event) { e.Data = nil },
		func(e *kernel.Event) { e.Data = json.RawMessage(`"a string, with } and ]"`) },
		func(e *kernel.Event) { e.Data = json.RawMessage(`[1,{"x":"]"},[]]`) },
		func(e *kernel.Event) { e.Data = json.RawMessage(`12.5e3`) },
		func(e *kernel.Event) { e.V = -3; e.Type = "x.\u2028" },
		func(e *kernel.Event) { e.At = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600)) },
	} {
		recs = append(recs, with(kernel.Recorded{Seq: base.Seq + uint64(i) + 1, Event: base.Event}, f))
	}
	return recs
}

// TestFeedDecoderMatchesJSON: every stored feed item reads back exactly as
// json.Unmarshal reads it, whether the fast path takes it or not.
func TestFeedDecoderMatchesJSON(t *testing.T) {
	l := lifecycleEvents(40)
	recs := oddFeedEvents(l)
	var dec feedDecoder
	for i, r := range recs {
		b, err := feedItem(r)
		if err != nil {
			t.Fatalf("feedItem(%d) = %v", r.Seq, err)
		}
		var want, got FeedItem
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("json.Unmarshal(%s) = %v", b, err)
		}
		if err := dec.decode(b, &got); err != nil {
			t.Fatalf("decode(%s) = %v, want nil", b, err)
		}
		if i < len(l.recs) {
			var fast FeedItem
			if !dec.fast(b, &fast) {
				t.Errorf("fast(%s) = false, want the fast path for a plain item", b)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("decode(%s) differs from json.Unmarshal (-want +got):\n%s", b, diff)
		}
	}
	var it FeedItem
	if err := dec.decode([]byte(`{"ledger_seq":1,"type":"x"`), &it); err == nil {
		t.Errorf("decode(truncated item) = nil, want an error")
	}
}
