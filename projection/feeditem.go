package projection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/turnledger/turnledger/kernel"
)

// feedItem encodes the feed form of an event: the envelope, its ledger_seq,
// and data with every token_hash and code_hash field removed at any depth.
func feedItem(r kernel.Recorded) ([]byte, error) {
	data, err := feedData(r.Event)
	if err != nil {
		return nil, err
	}
	// The item's size when its strings need no escapes: items stay in
	// memory until their transaction commits, so they are not given room
	// they will not use.
	e := r.Event
	n := len(feedItemFixed) + 20 + 20 + len(e.Type) + len(e.ProjectID) + len(e.Aggregate) + len(e.ID) +
		len(time.RFC3339Nano) + len(e.Actor.Kind) + len(e.Actor.AgentID) + len(data)
	return appendFeedItem(make([]byte, 0, n), r, data)
}

// feedItemFixed is what every feed item holds besides its values (an item
// with an agent, meta and trace null).
const feedItemFixed = `{"ledger_seq":,"type":"","v":,"project_id":"","aggregate":"","id":"","at":"","actor":{"kind":"","agent_id":""},"data":,"meta":null,"trace":null}`

// feedData encodes the data of e with every token_hash and code_hash field
// removed at any depth.
func feedData(e kernel.Event) ([]byte, error) {
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
	return data, nil
}

// appendFeedItem appends to b exactly what json.Marshal gives for the
// FeedItem of r with data (json.Marshal's own output, compact and escaped:
// the fixed point of the compaction json.Marshal applies to a RawMessage),
// field by field instead of by reflection: a replay encodes a million of
// them (TestFeedItemIsJSONMarshal keeps the two the same).
func appendFeedItem(b []byte, r kernel.Recorded, data []byte) ([]byte, error) {
	e := r.Event
	b = append(b, `{"ledger_seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(e.V), 10)
	b = append(b, `,"project_id":`...)
	b = appendJSONString(b, e.ProjectID)
	b = append(b, `,"aggregate":`...)
	b = appendJSONString(b, e.Aggregate)
	b = append(b, `,"id":`...)
	b = appendJSONString(b, e.ID)
	b = append(b, `,"at":"`...)
	b, err := e.At.AppendText(b) // what time.Time.MarshalJSON writes between its quotes
	if err != nil {
		return nil, fmt.Errorf("encode at: %w", err)
	}
	b = append(b, `","actor":{"kind":`...)
	b = appendJSONString(b, e.Actor.Kind)
	if e.Actor.AgentID != "" {
		b = append(b, `,"agent_id":`...)
		b = appendJSONString(b, e.Actor.AgentID)
	}
	b = append(b, `},"data":`...)
	if len(data) == 0 {
		data = []byte("null") // as json.Marshal writes an empty RawMessage
	}
	b = append(b, data...)
	b = append(b, `,"meta":`...)
	if b, err = appendJSON(b, e.Meta); err != nil {
		return nil, err
	}
	b = append(b, `,"trace":`...)
	if b, err = appendJSON(b, e.Trace); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendJSONString appends json.Marshal(s): as is between quotes when s has
// nothing json.Marshal escapes (the ids, types and kinds of events), else
// by json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSON appends json.Marshal(v) of a pointer, "null" when nil.
func appendJSON[T any](b []byte, v *T) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
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
