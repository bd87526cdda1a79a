package jsonhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeRejectsBadBodies(t *testing.T) {
	type body struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	for _, in := range []string{
		``,
		`   `,
		`{`,
		`{"name": 1}`,
		`{"count": "x"}`,
		`{"name": "a", "extra": true}`,
		`{"name": "a"} {"name": "b"}`,
		`[]`,
		`{"name": "` + strings.Repeat("a", 200) + `"}`,
	} {
		var dst body
		err := Decode(strings.NewReader(in), 100, &dst)
		var de *DecodeError
		if !errors.As(err, &de) || de.Msg == "" {
			t.Errorf("Decode(%.30q) = %v, want a *DecodeError with a message", in, err)
		}
	}
}

func TestDecodeAcceptsGoodBody(t *testing.T) {
	var got struct {
		Name string `json:"name"`
	}
	if err := Decode(strings.NewReader(`{"name":"a"}`+"\n"), 100, &got); err != nil {
		t.Fatalf("Decode = %v, want nil", err)
	}
	if got.Name != "a" {
		t.Errorf("Name = %q, want a", got.Name)
	}
}

func TestWriteError(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, 404, "NotFoundError", "no such thing")
	if rec.Code != 404 {
		t.Errorf("status = %d, want 404", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	want := `{"error":"NotFoundError","message":"no such thing"}` + "\n"
	if diff := cmp.Diff(want, rec.Body.String()); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

// custom decodes itself, so the keys inside it are its own business.
type custom struct{ n int }

func (c *custom) UnmarshalJSON(b []byte) error { c.n = len(b); return nil }

type pathRef struct {
	ProjectID string `json:"project_id"`
	AgentID   string `json:"agent_id"`
}

type PathBase struct {
	Note string `json:"note"`
}

type pathBody struct {
	PathBase
	Spec *struct {
		Role string `json:"role"`
	} `json:"spec"`
	RequestedBy pathRef `json:"requested_by"`
	Authority   struct {
		Mode        string `json:"mode"`
		ParentClaim *struct {
			ClaimID string `json:"claim_id"`
		} `json:"parent_claim"`
	} `json:"authority"`
	Items    []pathRef          `json:"items"`
	Grid     [][]*pathRef       `json:"grid"`
	Fixed    [1]pathRef         `json:"fixed"`
	ByName   map[string]pathRef `json:"by_name"`
	Raw      json.RawMessage    `json:"raw"`
	Any      any                `json:"any"`
	Custom   custom             `json:"custom"`
	Untagged string
	Skipped  string `json:"-"`
}

// TestUnknownFieldIsNamedByItsPath: an unknown field is named by its full
// path from the body, at every depth, through structs, pointers, arrays and
// maps; the first one in the body is named; keys inside values that
// encoding/json does not look into are not.
func TestUnknownFieldIsNamedByItsPath(t *testing.T) {
	for _, tc := range []struct{ in, path string }{
		{`{"bogus":1}`, "bogus"},
		{`{"spec":{"role":"w","bogus":1}}`, "spec.bogus"},
		{`{"requested_by":{"project_id":"p","x":1}}`, "requested_by.x"},
		{`{"authority":{"mode":"m","parent_claim":{"claim_id":"c","y":true}}}`, "authority.parent_claim.y"},
		{`{"items":[{},{"agent_id":"a"},{"y":1}]}`, "items[2].y"},
		{`{"grid":[[],[null,{"z":{"deep":[1]}}]]}`, "grid[1][1].z"},
		{`{"fixed":[{"w":1}]}`, "fixed[0].w"},
		{`{"by_name":{"w":{"q":1}}}`, "by_name.w.q"},
		{`{"spec":{"a":1},"b":2}`, "spec.a"},
		{`{"raw":{"x":{"y":1}},"any":{"z":[{"k":1}]},"custom":{"c":1},"items":[{"agent_id":"a"}],"spec":{"nope":[{"x":1}]}}`, "spec.nope"},
		{`{"Skipped":"x"}`, "Skipped"},
		{`{"spec":{"":1}}`, "spec."},
		{`{"PathBase":{"note":"x"}}`, "PathBase"},
	} {
		var dst pathBody
		err := DecodeBytes([]byte(tc.in), &dst)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("DecodeBytes(%s) = %v, want a *DecodeError", tc.in, err)
			continue
		}
		if want := `invalid request body: unknown field "` + tc.path + `"`; de.Msg != want {
			t.Errorf("DecodeBytes(%s) = %q, want %q", tc.in, de.Msg, want)
		}
	}
}

// TestKnownFieldsAreMatchedAsEncodingJSONDoes: keys matched case-insensitively,
// promoted fields of embedded structs, untagged fields, elements past a fixed
// array's length and keys inside raw, any and self-decoding values are no
// unknown fields.
func TestKnownFieldsAreMatchedAsEncodingJSONDoes(t *testing.T) {
	in := `{"NOTE":"x","untagged":"y","SPEC":{"ROLE":"w"},"Requested_By":{"Agent_ID":"a"},"fixed":[{},{"whatever":1}],` +
		`"raw":{"x":1},"any":{"y":[{"z":1}]},"custom":{"a":1},"by_name":{"k":{"agent_id":"b"}},"grid":[[{"project_id":"p"}]]}`
	var dst pathBody
	if err := DecodeBytes([]byte(in), &dst); err != nil {
		t.Fatalf("DecodeBytes = %v, want nil", err)
	}
	if dst.Note != "x" || dst.Untagged != "y" || dst.Spec == nil || dst.Spec.Role != "w" || dst.RequestedBy.AgentID != "a" {
		t.Errorf("DecodeBytes decoded %+v", dst)
	}
}

// TestUnknownFieldPathOnlyForUnknownFields: other decoding errors keep their
// own messages, and a walk that cannot follow the body names no path.
func TestUnknownFieldPathOnlyForUnknownFields(t *testing.T) {
	for in, want := range map[string]string{
		`{"requested_by":{"agent_id":1}}`: `field "requested_by.agent_id" must be a string, not number`,
		`{"spec":{"role":"w"}} x`:         "request body has data after the JSON value",
	} {
		var dst pathBody
		err := DecodeBytes([]byte(in), &dst)
		var de *DecodeError
		if !errors.As(err, &de) || de.Msg != want {
			t.Errorf("DecodeBytes(%s) = %v, want %q", in, err, want)
		}
	}
	if path, key, ok := unknownField([]byte(`{"spec":`), reflect.TypeFor[*pathBody]()); ok {
		t.Errorf("unknownField(truncated body) = %q, %q, true; want no path", path, key)
	}
}

// FuzzUnknownFieldAgreesWithEncodingJSON: whenever encoding/json refuses a
// body for an unknown field, the walk finds a key of that name.
func FuzzUnknownFieldAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"bogus":1}`, `{"spec":{"ROLE":"w","x":1}}`, `{"items":[{},{"y":1}]}`, `{"grid":[[{"z":1}]]}`,
		`{"fixed":[{},{"w":1}],"v":1}`, `{"by_name":{"a":{"b":1}}}`, `{"raw":{"x":1},"custom":{"c":1},"any":[{"k":1}],"z":1}`,
		`{"requested_by":{"agent_id":1,"x":1}}`, `{"pathbase":1}`, `{"untagged":{"x":1}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		dec := json.NewDecoder(strings.NewReader(in))
		dec.DisallowUnknownFields()
		var dst pathBody
		err := dec.Decode(&dst)
		if err == nil || !strings.HasPrefix(err.Error(), "json: unknown field ") {
			return
		}
		if path, key, ok := unknownField([]byte(in), reflect.TypeFor[*pathBody]()); !ok || err.Error() != fmt.Sprintf("json: unknown field %q", key) {
			t.Errorf("encoding/json: %v; unknownField(%s) = %q, %q, %v", err, in, path, key, ok)
		}
	})
}

func TestATimeThatDoesNotParseIsNamedByItsPath(t *testing.T) {
	var dst struct {
		Items []struct {
			At time.Time `json:"at"`
		} `json:"items"`
		Note string `json:"note"`
	}
	err := DecodeBytes([]byte(`{"note":"soon","items":[{"at":"2026-11-27T00:00:00Z"},{"at":"soon"}]}`), &dst)
	var de *DecodeError
	if !errors.As(err, &de) || !strings.Contains(de.Msg, `"items[1].at"`) {
		t.Errorf("DecodeBytes with a bad time = %v, want a DecodeError naming items[1].at", err)
	}
}
