package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Event is one fact on the ledger: the JSON envelope of DESIGN.md. The
// ledger_seq is not part of it; it is the position the ledger gives it (see
// Recorded).
type Event struct {
	Type      string       `json:"type"`       // e.g. "turn.dispatched"; never derived from the Go type
	V         int          `json:"v"`          // schema version of Data
	ProjectID string       `json:"project_id"` // the project the event belongs to
	Aggregate string       `json:"aggregate"`  // "turn", "agent", …: the kind of thing it changes
	ID        string       `json:"id"`         // the aggregate's id
	At        time.Time    `json:"at"`         // when it was decided, UTC
	Actor     Actor        `json:"actor"`      // who asked for it
	Data      any          `json:"data"`       // one of the *Data types of the codec table
	Meta      *Meta        `json:"meta,omitempty"`
	Trace     *Trace       `json:"trace,omitempty"`
	Idem      *Idempotency `json:"idem,omitempty"` // the key of the request that caused it
}

// Recorded is an event together with its ledger_seq.
type Recorded struct {
	Seq   uint64
	Event Event
}

// Actor is who caused an event: an agent of the project, or the admin.
type Actor struct {
	Kind    string `json:"kind"` // "agent" or "admin"
	AgentID string `json:"agent_id,omitempty"`
}

// Meta is operation metadata (`meta` in the spec).
type Meta struct {
	Note        string          `json:"note,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// Trace is trace context (`trace` in the spec).
type Trace struct {
	TraceID        string  `json:"trace_id,omitempty"`
	ParentTraceID  *string `json:"parent_trace_id,omitempty"`
	RecursionDepth *int    `json:"recursion_depth,omitempty"`
}

// ValidID reports whether s is a safe id token, what an id must look like
// before it may enter a NATS subject or a key: letters, digits, '_' and '-',
// 1 to 128 of them (the pattern ^[A-Za-z0-9_-]{1,128}$). A dot, a wildcard or
// a space is refused. It is checked several times per request, so it is a
// loop rather than a regular expression.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// eventType says how to decode the data of one (type, version).
type eventType struct {
	aggregate string
	newData   func() any
}

type codecKey struct {
	typ string
	v   int
}

// MarshalEvent encodes e for the ledger. It refuses an event whose type and
// version are not in the codec table, or whose ids are not safe tokens.
func MarshalEvent(e Event) ([]byte, error) {
	if _, ok := codec[codecKey{e.Type, e.V}]; !ok {
		return nil, fmt.Errorf("kernel: unknown event type %s v%d", e.Type, e.V)
	}
	if !ValidID(e.ProjectID) || !ValidID(e.ID) {
		return nil, fmt.Errorf("kernel: event %s has an unsafe project or aggregate id", e.Type)
	}
	// No HTML escaping: it would grow every '<', '>' and '&' of a client's
	// payload sixfold on the ledger.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// UnmarshalEvent decodes an event written by MarshalEvent. An unknown type or
// a newer version is an error, never a silent skip.
func UnmarshalEvent(b []byte) (Event, error) {
	if e, ok := unmarshalEventFast(b); ok {
		return e, nil
	}
	return unmarshalEventStd(b)
}

// unmarshalEventStd is UnmarshalEvent by encoding/json alone: what decodes
// an event the fast path does not take, and what the fast path is checked
// against.
func unmarshalEventStd(b []byte) (Event, error) {
	var raw struct {
		Event
		Data json.RawMessage `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Event{}, fmt.Errorf("kernel: decode event: %w", err)
	}
	e := raw.Event
	t, ok := codec[codecKey{e.Type, e.V}]
	if !ok {
		return Event{}, fmt.Errorf("kernel: unknown event type %s v%d", e.Type, e.V)
	}
	data := t.newData()
	dd := json.NewDecoder(bytes.NewReader(raw.Data))
	dd.UseNumber()
	if err := dd.Decode(data); err != nil {
		return Event{}, fmt.Errorf("kernel: decode %s v%d data: %w", e.Type, e.V, err)
	}
	e.Data = data
	return e, nil
}

// unmarshalEventFast is UnmarshalEvent by the v1 API of the encoding/json
// v2 implementation (github.com/go-json-experiment/json/v1: encoding/json's
// semantics, what Go's encoding/json itself becomes with GOEXPERIMENT=jsonv2),
// which decodes an event in about a third of the time: decoding is most of
// what reading the ledger costs (a replay, a write model's load, the
// projector). It takes only what encoding/json's Decoder would take alike:
// a message that is one JSON value whose data's type holds no interface
// (where UseNumber would matter; codecPlain). Anything else, an error
// included, is left to the encoding/json path, which also words the errors.
func unmarshalEventFast(b []byte) (Event, bool) {
	var raw struct {
		Event
		Data jsonv1.RawMessage `json:"data"`
	}
	if jsonv1.Unmarshal(b, &raw) != nil {
		return Event{}, false
	}
	e := raw.Event
	t, ok := codec[codecKey{e.Type, e.V}]
	if !ok || !codecPlain[codecKey{e.Type, e.V}] {
		return Event{}, false
	}
	data := t.newData()
	if jsonv1.Unmarshal(raw.Data, data) != nil {
		return Event{}, false
	}
	e.Data = data
	return e, true
}

// codecPlain holds the entries of the codec whose data holds no interface.
var codecPlain = func() map[codecKey]bool {
	plain := map[codecKey]bool{}
	for k, t := range codec {
		plain[k] = !holdsInterface(reflect.TypeOf(t.newData()), map[reflect.Type]bool{})
	}
	return plain
}()

// holdsInterface reports whether a value of type t may hold an interface
// (a JSON number in one decodes as float64, or as json.Number with
// UseNumber).
func holdsInterface(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsInterface(t.Elem(), seen)
	case reflect.Map:
		return holdsInterface(t.Key(), seen) || holdsInterface(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsInterface(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// TypedData returns e with its data as the pointer its type and version name
// in the codec (a struct value is taken by address), or an error when the
// data is of another type. Events of a type the codec does not know are
// returned unchanged. Evolve and EvolveTurn read only such pointers.
func TypedData(e Event) (Event, error) {
	t, ok := codec[codecKey{e.Type, e.V}]
	if !ok {
		return e, nil
	}
	want := reflect.TypeOf(t.newData())
	got := reflect.TypeOf(e.Data)
	switch {
	case got == want && !reflect.ValueOf(e.Data).IsNil():
	case got == want.Elem():
		p := reflect.New(got)
		p.Elem().Set(reflect.ValueOf(e.Data))
		e.Data = p.Interface()
	default:
		return e, fmt.Errorf("kernel: data of %s is %T, want %v", e.Type, e.Data, want)
	}
	return e, nil
}

// Aggregates: the third token of an event's subject.
const (
	AggAgent      = "agent"
	AggCredential = "credential"
	AggInvite     = "invite"
	AggTurn       = "turn"
)

// codec is the table of every event type and version the kernel reads and
// writes, with the Go type of its data: the union of each aggregate's table
// (agent.go, credential.go, invite.go, turn.go). It is a value built here, not
// filled by init functions.
var codec = joinCodecs(agentEvents, credentialEvents, inviteEvents, turnEvents)

func joinCodecs(tables ...map[codecKey]eventType) map[codecKey]eventType {
	all := map[codecKey]eventType{}
	for _, t := range tables {
		for k, v := range t {
			if _, dup := all[k]; dup {
				panic("kernel: event type " + k.typ + " is declared twice")
			}
			all[k] = v
		}
	}
	return all
}
