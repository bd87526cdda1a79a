package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConnPostsAsTheClientWould: a worker's conn, as the Transport of a
// net/http Client, sends a POST the server reads as net/http's own
// Transport would send it (path, headers, JSON body), hands back a 200
// answer, another status and a chunked answer with their bodies (each
// exact, though the conn reuses its buffer), keeps one connection while
// the server keeps it open, dials again after the server closes it, and
// refuses a header that would split the request.
func TestConnPostsAsTheClientWould(t *testing.T) {
	type seen struct {
		Method, Path, Auth, Type string
		Body                     map[string]any
	}
	var mu sync.Mutex // the handler runs on the server's goroutines
	var got []seen
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		data, _ := io.ReadAll(r.Body)
		json.Unmarshal(data, &body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body})
		mu.Unlock()
		switch r.URL.Path {
		case "/bad":
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":"ConflictError"}` + "\n"))
		case "/chunked":
			w.Write([]byte(`{"part":1,`))
			w.(http.Flusher).Flush() // no Content-Length: a chunked body
			w.Write([]byte(`"rest":2}`))
		case "/bye":
			w.Header().Set("Connection", "close")
			w.Write([]byte(`{}`))
		default:
			w.Write([]byte(`{"turn":{"turn_id":"t1"},"n":` + string(data) + `}`))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	c := newConn(srv.URL)
	if c == nil {
		t.Fatalf("newConn(%s) = nil, want a conn", srv.URL)
	}
	defer c.close()
	hc := &http.Client{Transport: c}
	hdr := map[string]string{"Authorization": "Bearer x"}
	post := func(headers map[string]string, path string, body any) (int, []byte, error) {
		data, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+path, bytes.NewReader(data))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header[k] = []string{v} // as set, unchecked: the conn must refuse a line break
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	var out struct {
		Turn struct {
			TurnID string `json:"turn_id"`
		} `json:"turn"`
		N map[string]any `json:"n"`
	}
	status, body, err := post(hdr, "/a", map[string]any{"k": "v"})
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &out) != nil {
		t.Fatalf("post /a = %d %s, %v", status, body, err)
	}
	if out.Turn.TurnID != "t1" || out.N["k"] != "v" {
		t.Errorf("post /a decoded %+v, want turn t1 and the body echoed", out)
	}
	if status, body, err := post(hdr, "/bad", map[string]any{}); err != nil || status != http.StatusConflict || strings.TrimSpace(string(body)) != `{"error":"ConflictError"}` {
		t.Errorf("post /bad = %d %q, %v; want 409 with the body", status, body, err)
	}
	if status, body, err := post(hdr, "/chunked", map[string]any{}); err != nil || status != http.StatusOK || string(body) != `{"part":1,"rest":2}` {
		t.Errorf("post /chunked = %d %q, %v; want 200 with the whole body", status, body, err)
	}
	if _, _, err := post(hdr, "/bye", map[string]any{}); err != nil {
		t.Errorf("post /bye = %v", err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for four requests on a kept-alive connection, want 1", n)
	}
	if _, _, err := post(hdr, "/again", map[string]any{"n": 1.0}); err != nil {
		t.Errorf("post /again after the server closed = %v", err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections after the server closed one, want 2", n)
	}
	if _, _, err := post(map[string]string{"X-A": "1\r\nX-Injected: 2"}, "/split", map[string]any{}); err == nil {
		t.Errorf("post with a line break in a header = nil, want an error")
	}
	want := []seen{
		{"POST", "/a", "Bearer x", "application/json", map[string]any{"k": "v"}},
		{"POST", "/bad", "Bearer x", "application/json", map[string]any{}},
		{"POST", "/chunked", "Bearer x", "application/json", map[string]any{}},
		{"POST", "/bye", "Bearer x", "application/json", map[string]any{}},
		{"POST", "/again", "Bearer x", "application/json", map[string]any{"n": 1.0}},
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests the server read (-want +got):\n%s", diff)
	}
	for _, u := range []string{"https://127.0.0.1:1", "http://127.0.0.1:1/prefix"} {
		if c := newConn(u); c != nil {
			t.Errorf("newConn(%s) = a conn, want nil (net/http serves it)", u)
		}
	}
}
