package projection

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

// FuzzFeedItemStripsSecrets: whatever JSON a client puts in a record payload,
// its feed item decodes, keeps the envelope, and holds no token_hash or
// code_hash field at any depth.
func FuzzFeedItemStripsSecrets(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"token_hash":"x"}`, `{"a":[{"code_hash":1},{"b":{"token_hash":null}}]}`,
		`{"token\u005fhash":"x","<":"&"}`, `[1,2,{"code_hash":[]}]`, `"token_hash"`, `1e400`, `null`,
		`{"t\u006fken_hash":{"code_hash":{"token_hash":0}}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		if !json.Valid([]byte(payload)) {
			return
		}
		r := kernel.Recorded{Seq: 7, Event: kernel.Event{
			Type: kernel.EvTurnRecordAppended, V: 1, ProjectID: proj, Aggregate: kernel.AggTurn, ID: "t1",
			At: t0, Actor: agent("w"),
			Data: &kernel.TurnRecordAppended{ClaimID: "c1", TurnSeq: 1, Role: "note", Payload: json.RawMessage(payload)},
		}}
		b, err := feedItem(r)
		if err != nil {
			return // the data does not encode (e.g. a number out of range): Apply refuses it
		}
		var it FeedItem
		if err := json.Unmarshal(b, &it); err != nil {
			t.Fatalf("feed item %s does not decode: %v", b, err)
		}
		var fd feedDecoder
		var got FeedItem
		if err := fd.decode(b, &got); err != nil {
			t.Fatalf("feedDecoder.decode(%s) = %v, want nil", b, err)
		}
		if diff := cmp.Diff(it, got); diff != "" {
			t.Fatalf("feedDecoder.decode(%s) differs from json.Unmarshal (-want +got):\n%s", b, diff)
		}
		if it.LedgerSeq != 7 || it.Type != kernel.EvTurnRecordAppended || it.ID != "t1" {
			t.Fatalf("feed item envelope = %+v, want seq 7 of t1", it)
		}
		var data any
		dec := json.NewDecoder(bytes.NewReader(it.Data))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil {
			t.Fatalf("feed data %s does not decode: %v", it.Data, err)
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, c := range x {
					if k == "token_hash" || k == "code_hash" {
						t.Fatalf("feed data %s holds %q", it.Data, k)
					}
					walk(c)
				}
			case []any:
				for _, c := range x {
					walk(c)
				}
			}
		}
		walk(data)
	})
}
