package projection

import (
	"bytes"
	"encoding/json"
)

// feedDecoder reads the stored feed items of one page. The items were written
// by json.Marshal(FeedItem) (feedItem), so their fields come in a known order
// with no spaces; the decoder reads that form directly, sharing one buffer for
// the data of the page and one string for each distinct string value of the
// page (event types, ids, agents repeat from item to item). Anything else (an
// escaped string, a null data, a different layout) falls back to
// json.Unmarshal, so the result is always what json.Unmarshal gives.
type feedDecoder struct {
	strs map[string]string
	data []byte // backing store of the items' Data, append-only
}

func (d *feedDecoder) decode(v []byte, it *FeedItem) error {
	if d.fast(v, it) {
		return nil
	}
	*it = FeedItem{}
	return json.Unmarshal(v, it)
}

// str returns b as a string, one allocation per distinct value of the page.
func (d *feedDecoder) str(b []byte) string {
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	if d.strs == nil {
		d.strs = make(map[string]string, 32)
	}
	s := string(b)
	d.strs[s] = s
	return s
}

// feedScan walks the bytes of one item; ok turns false at the first thing the
// fast path does not handle.
type feedScan struct {
	b  []byte
	i  int
	ok bool
}

func (s *feedScan) lit(l string) {
	if s.ok && bytes.HasPrefix(s.b[s.i:], []byte(l)) {
		s.i += len(l)
		return
	}
	s.ok = false
}

// uint reads an unsigned integer without leading zeros.
func (s *feedScan) uint() uint64 {
	if !s.ok {
		return 0
	}
	start := s.i
	var n uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if s.i-start >= 19 { // may overflow: let json decide
			s.ok = false
			return 0
		}
		n = n*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	if s.i == start || (s.b[start] == '0' && s.i-start > 1) {
		s.ok = false
	}
	return n
}

// str reads a string without escapes and returns its bytes (no quotes).
func (s *feedScan) str() []byte {
	if !s.ok || s.i >= len(s.b) || s.b[s.i] != '"' {
		s.ok = false
		return nil
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j]
		case c == '\\' || c < 0x20 || c >= 0x80:
			// Escapes, control bytes, and non-ASCII (json replaces invalid
			// UTF-8): the general decoder handles them.
			s.ok = false
			return nil
		}
	}
	s.ok = false
	return nil
}

// value returns the raw bytes of one JSON value: an object, an array, a string
// or a literal/number up to the next ',' or '}'. It does not validate; the
// bytes were written by json.Marshal.
func (s *feedScan) value() []byte {
	if !s.ok || s.i >= len(s.b) {
		s.ok = false
		return nil
	}
	start, depth := s.i, 0
	for j := s.i; j < len(s.b); j++ {
		switch s.b[j] {
		case '"':
			for j++; j < len(s.b) && s.b[j] != '"'; j++ {
				if s.b[j] == '\\' {
					j++
				}
			}
			if j >= len(s.b) {
				s.ok = false
				return nil
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				s.i = j
				return s.b[start:j]
			}
			depth--
		case ',':
			if depth == 0 {
				s.i = j
				return s.b[start:j]
			}
		}
		if depth == 0 && j > start && (s.b[start] == '{' || s.b[start] == '[' || s.b[start] == '"') {
			s.i = j + 1
			return s.b[start : j+1]
		}
	}
	s.ok = false
	return nil
}

var null = []byte("null")

func (d *feedDecoder) fast(v []byte, it *FeedItem) bool {
	s := feedScan{b: v, ok: true}
	var out FeedItem
	s.lit(`{"ledger_seq":`)
	out.LedgerSeq = s.uint()
	s.lit(`,"type":`)
	typ := s.str()
	s.lit(`,"v":`)
	ver := s.uint()
	s.lit(`,"project_id":`)
	project := s.str()
	s.lit(`,"aggregate":`)
	agg := s.str()
	s.lit(`,"id":`)
	id := s.str()
	s.lit(`,"at":`)
	at := s.value()
	s.lit(`,"actor":{"kind":`)
	kind := s.str()
	var agentID []byte
	if s.ok && s.i < len(s.b) && s.b[s.i] == ',' {
		s.lit(`,"agent_id":`)
		agentID = s.str()
	}
	s.lit(`},"data":`)
	data := s.value()
	s.lit(`,"meta":`)
	meta := s.value()
	s.lit(`,"trace":`)
	trace := s.value()
	s.lit(`}`)
	if !s.ok || s.i != len(v) || ver > 1<<31 || bytes.Equal(data, null) {
		return false
	}
	// value does not validate; the bytes on disk are not to be trusted
	// blindly (a damaged value would become a 500 when the page is encoded).
	if !json.Valid(data) {
		return false
	}
	if err := out.At.UnmarshalJSON(at); err != nil {
		return false
	}
	if !bytes.Equal(meta, null) {
		if err := json.Unmarshal(meta, &out.Meta); err != nil {
			return false
		}
	}
	if !bytes.Equal(trace, null) {
		if err := json.Unmarshal(trace, &out.Trace); err != nil {
			return false
		}
	}
	out.V = int(ver)
	out.Type, out.ProjectID, out.Aggregate, out.ID = d.str(typ), d.str(project), d.str(agg), d.str(id)
	out.Actor.Kind = d.str(kind)
	if agentID != nil {
		out.Actor.AgentID = d.str(agentID)
	}
	n := len(d.data)
	d.data = append(d.data, data...)
	out.Data = d.data[n:len(d.data):len(d.data)]
	*it = out
	return true
}
