package projection

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/turnledger/turnledger/kernel"
)

// feedItem encodes the feed form of an event: the envelope, its ledger_seq,
// and data with every token_hash and code_hash field removed at any depth.
func feedItem(r kernel.Recorded) ([]byte, error) {
	e := r.Event
	data, err := json.Marshal(e.Data)
	if err != nil {
		return nil, fmt.Errorf("encode data: %w", err)
	}
	// Fast path: the encoder never escapes letters or '_', so a data without
	// these bytes has no field to strip. A "\u" may hide an escaped key.
	if bytes.Contains(data, []byte("token_hash")) || bytes.Contains(data, []byte("code_hash")) ||
		bytes.Contains(data, []byte(`\u`)) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("decode data: %w", err)
		}
		if data, err = json.Marshal(stripSecrets(v)); err != nil {
			return nil, fmt.Errorf("encode data: %w", err)
		}
	}
	return json.Marshal(FeedItem{
		LedgerSeq: r.Seq, Type: e.Type, V: e.V, ProjectID: e.ProjectID, Aggregate: e.Aggregate,
		ID: e.ID, At: e.At, Actor: e.Actor, Data: data, Meta: e.Meta, Trace: e.Trace,
	})
}

// secretFields are the field names a feed never shows.
var secretFields = []string{"token_hash", "code_hash"}

func stripSecrets(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for _, name := range secretFields {
			delete(x, name)
		}
		for k, c := range x {
			x[k] = stripSecrets(c)
		}
	case []any:
		for i, c := range x {
			x[i] = stripSecrets(c)
		}
	}
	return v
}
