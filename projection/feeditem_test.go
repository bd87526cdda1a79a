package projection

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/turnledger/turnledger/kernel"
)

// feedItemByReflection is the feed item as json.Marshal(FeedItem) writes
// it: what appendFeedItem must write.
func feedItemByReflection(r kernel.Recorded) ([]byte, error) {
	e := r.Event
	data, err := feedData(e)
	if err != nil {
		return nil, err
	}
	return json.Marshal(FeedItem{
		LedgerSeq: r.Seq, Type: e.Type, V: e.V, ProjectID: e.ProjectID, Aggregate: e.Aggregate,
		ID: e.ID, At: e.At, Actor: e.Actor, Data: data, Meta: e.Meta, Trace: e.Trace,
	})
}

// TestFeedItemIsJSONMarshal: the feed item written field by field is byte
// for byte what json.Marshal writes for it, for the events of a long random
// scenario (secrets stripped included) and for odd values in every field;
// a time json.Marshal refuses is refused too.
func TestFeedItemIsJSONMarshal(t *testing.T) {
	recs := oddFeedEvents(scenario(7, 2000))
	last := recs[len(recs)-1]
	last.Seq++
	last.Event.Meta = &kernel.Meta{Reason: "<b>&</b>", Annotations: raw(` { "x" : [ 1 , 2 ] } `)}
	last.Event.Type, last.Event.ProjectID, last.Event.Aggregate = "\xff\x01", "p\u2029", `a\b`
	recs = append(recs, last)
	last.Seq++
	last.Event.V = math.MinInt
	last.Event.Data = map[string]any{"token_hash": "h", "n": json.Number("1.50"), "s": []any{map[string]any{"code_hash": "c"}}}
	recs = append(recs, last)
	for _, r := range recs {
		want, werr := feedItemByReflection(r)
		got, err := feedItem(r)
		if werr != nil || err != nil {
			t.Fatalf("ledger_seq %d: feedItem = %v, json.Marshal = %v", r.Seq, err, werr)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("ledger_seq %d: feedItem =\n%s\nwant (json.Marshal)\n%s", r.Seq, got, want)
		}
	}
	r := recs[0]
	r.Event.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := feedItem(r); err == nil {
		t.Errorf("feedItem of an event at year 10000 = nil error, want json.Marshal's refusal")
	}
}
