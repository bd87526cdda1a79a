// Package jsonhttp holds the few JSON-over-HTTP habits every server of the
// project shares: one error body, {"error": <name>, "message": <text>}, strict
// decoding of request bodies with a size bound, and JSON responses.
//
// Each server keeps its own table from its domain errors to a status and an
// error name; this package only writes and reads the bytes.
package jsonhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"time"
)

// ErrorBody is the body of every handled error response.
type ErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// Write sends v as JSON with the given status.
func Write(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorBody{Error: "InternalError", Message: "internal error"})
	}
	WriteBody(w, status, b)
}

var newline = []byte{'\n'}

// WriteBody sends a JSON value already encoded, the concatenation of parts,
// and a newline, as Write does: with the status, Write's headers and the
// body's Content-Length, so that a large body goes out in one piece, not
// chunked, without being copied into one buffer first.
func WriteBody(w http.ResponseWriter, status int, parts ...[]byte) {
	parts = append(parts, newline)
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(status)
	for _, p := range parts {
		w.Write(p)
	}
}

// WriteError sends the error body with the given status.
func WriteError(w http.ResponseWriter, status int, name, message string) {
	Write(w, status, ErrorBody{Error: name, Message: message})
}

// DecodeError is a request body that could not be decoded; its message is
// safe to show the client.
type DecodeError struct{ Msg string }

func (e *DecodeError) Error() string { return e.Msg }

// Decode reads one JSON value from r into dst, rejecting unknown fields
// (named by their full path, e.g. "spec.bogus" or "records[2].y"),
// trailing data and bodies longer than limit bytes. The error, if any, is a
// *DecodeError with a message fit for the client.
func Decode(r io.Reader, limit int64, dst any) error {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return &DecodeError{Msg: "cannot read request body"}
	}
	if int64(len(data)) > limit {
		return &DecodeError{Msg: fmt.Sprintf("request body is larger than %d bytes", limit)}
	}
	return DecodeBytes(data, dst)
}

// DecodeBytes is Decode for a body already read.
func DecodeBytes(data []byte, dst any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &DecodeError{Msg: "request body is empty; a JSON object is required"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return &DecodeError{Msg: describe(err, data, dst)}
	}
	if dec.More() {
		return &DecodeError{Msg: "request body has data after the JSON value"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &DecodeError{Msg: "request body has data after the JSON value"}
	}
	return nil
}

func describe(err error, data []byte, dst any) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tp *time.ParseError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", typ.Field, jsonType(typ.Type.Kind().String()), typ.Value)
		}
		return fmt.Sprintf("request body must be %s, not %s", jsonType(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of body"
	case errors.As(err, &tp):
		// A time decodes itself, and json does not say where it was.
		if path, ok := pathOfString(data, tp.Value, reflect.TypeOf(dst), reflect.TypeFor[time.Time]()); ok {
			return fmt.Sprintf("field %q must be an RFC 3339 time such as 2026-11-27T09:00:00Z, not %q", path, tp.Value)
		}
		return fmt.Sprintf("invalid request body: %v", err)
	default:
		// json reports an unknown field as `json: unknown field "x"`, without
		// saying where x is: name it by its full path.
		if path, key, ok := unknownField(data, reflect.TypeOf(dst)); ok && err.Error() == fmt.Sprintf("json: unknown field %q", key) {
			return fmt.Sprintf("invalid request body: unknown field %q", path)
		}
		return fmt.Sprintf("invalid request body: %s", trimPrefix(err.Error(), "json: "))
	}
}

func jsonType(kind string) string {
	switch kind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	default:
		return "a " + kind
	}
}

func trimPrefix(s, p string) string {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
