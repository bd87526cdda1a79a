package jsonhttp

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

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
