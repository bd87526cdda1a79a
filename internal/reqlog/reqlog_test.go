package reqlog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHandlerWritesOneLinePerRequest(t *testing.T) {
	var buf bytes.Buffer
	h := Handler(slog.New(slog.NewJSONHandler(&buf, nil)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/p/secret-id/x":
			Route(r, "/p/{project_id}/x", "p1")
			w.Write([]byte("ok"))
		case "/boom":
			Route(r, "/boom", "")
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	for _, path := range []string{"/p/secret-id/x", "/boom", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path+"?token=never-logged", nil))
	}
	type line struct {
		Level, Msg, Method, Route string
		Status                    int
		Project                   string
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		got = append(got, v)
	}
	want := []line{
		{"INFO", "request", "GET", "/p/{project_id}/x", 200, "p1"},
		{"ERROR", "request", "GET", "/boom", 503, ""},
		{"INFO", "request", "GET", NoRoute, 404, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
	if strings.Contains(buf.String(), "never-logged") || strings.Contains(buf.String(), "secret-id") {
		t.Errorf("the log holds the raw path or query:\n%s", buf.String())
	}
}

func TestRouteOutsideHandlerDoesNothing(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	if Active(r) {
		t.Errorf("Active(a request not logged) = true")
	}
	Route(r, "/", "p1") // must not panic
}
