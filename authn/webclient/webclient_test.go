package webclient_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/turnledger/turnledger/authn/webclient"
)

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHandler(t *testing.T) {
	h, err := webclient.Handler("https://auth.example.com/")
	if err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, h, "/app/config.js")
	if want := `window.TURNLEDGER_CONFIG = Object.freeze({"hostedAuthURL":"https://auth.example.com"});`; resp.StatusCode != 200 || strings.TrimSpace(body) != want {
		t.Errorf("GET /app/config.js = %d %q, want %q", resp.StatusCode, body, want)
	}
	// The page answers every path under /app/ (it routes by itself), with
	// the headers that keep it to its own origin and its provider.
	for _, p := range []string{"/app/", "/app/workspace", "/app/callback"} {
		resp, body := get(t, h, p)
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != 200 || !strings.Contains(body, `<script src="/app/static/app.js"`) || !strings.Contains(csp, "connect-src 'self' https://auth.example.com;") || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s = %d, CSP %q, Cache-Control %q", p, resp.StatusCode, csp, resp.Header.Get("Cache-Control"))
		}
	}
	if resp, body := get(t, h, "/app/static/app.js"); resp.StatusCode != 200 || !strings.Contains(body, "TURNLEDGER_CONFIG") {
		t.Errorf("GET /app/static/app.js = %d", resp.StatusCode)
	}
	if resp, _ := get(t, h, "/app"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/app/" {
		t.Errorf("GET /app = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, bad := range []string{"", "auth.example.com", "javascript:alert(1)", "https://auth.example.com/?x=1"} {
		if _, err := webclient.Handler(bad); err == nil {
			t.Errorf("Handler(%q) succeeded, want an error", bad)
		}
	}
}
