package console_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/turnledger/turnledger/console"
)

func TestMount(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-From", "api")
		w.WriteHeader(http.StatusTeapot)
	})
	srv := httptest.NewServer(console.Mount(api))
	t.Cleanup(srv.Close)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string // prefix of Content-Type
		body         string // substring of the body
		location     string
	}{
		{"GET", "/console/", 200, "text/html", `<script src="app.js" defer></script>`, ""},
		{"HEAD", "/console/", 200, "text/html", "", ""},
		{"GET", "/console/app.js", 200, "text/javascript", "function follow(", ""},
		{"GET", "/console/app.css", 200, "text/css", ".tree", ""},
		{"GET", "/console", 301, "", "", "/console/"},
		{"GET", "/console/missing.js", 404, "", "", ""},
		{"GET", "/console/index.html", 301, "", "", "./"},
		{"POST", "/console/", 405, "", "", ""},
		{"GET", "/", 200, "text/plain", "The console: /console/\nThe API, described in OpenAPI: /openapi.json\n", ""},
		{"HEAD", "/", 200, "text/plain", "", ""},
		{"POST", "/", 418, "", "", ""},
		{"GET", "/nope", 418, "", "", ""},
		{"GET", "/consolex", 418, "", "", ""},
		{"GET", "/healthz", 418, "", "", ""},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
			t.Errorf("%s %s Content-Type = %q, want %q…", tc.method, tc.path, ct, tc.ctype)
		}
		if !strings.Contains(string(body), tc.body) {
			t.Errorf("%s %s body lacks %q", tc.method, tc.path, tc.body)
		}
		if tc.location != "" && resp.Header.Get("Location") != tc.location {
			t.Errorf("%s %s Location = %q, want %q", tc.method, tc.path, resp.Header.Get("Location"), tc.location)
		}
		if tc.status == 200 {
			csp := resp.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("%s %s CSP = %q, lacks %q", tc.method, tc.path, csp, want)
				}
			}
			if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("%s %s X-Content-Type-Options = %q, want nosniff", tc.method, tc.path, got)
			}
		}
		if tc.status == 418 && resp.Header.Get("X-From") != "api" {
			t.Errorf("%s %s did not reach the API", tc.method, tc.path)
		}
	}
}

// TestNoExternalReferences checks the console's files name no other origin:
// no URL with a scheme or a protocol-relative one, no @import, so that the
// page makes no request beyond its own server (the CSP enforces it too).
// The SVG namespace name, which createElementNS takes and nothing fetches,
// is the one URL allowed.
func TestNoExternalReferences(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(\s*['"]?(https?:|//)`)
	const svgNamespace = "'http://www.w3.org/2000/svg'"
	err := fs.WalkDir(os.DirFS("static"), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile("static/" + path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := external.FindString(strings.Replace(line, svgNamespace, "''", 1)); m != "" {
				t.Errorf("static/%s:%d names another origin: %q", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
