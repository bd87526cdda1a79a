// Package webclient is the runtime's single-page browser client, served by
// `turnledger runtime` under /app/ from files embedded in the binary: plain
// HTML, CSS and JavaScript, no build step and no Node toolchain.
//
// The hosted auth URL is fixed when the binary is built, never taken from
// the user, the page's URL or the runtime's environment:
//
//	go build -ldflags "-X github.com/turnledger/turnledger/authn/webclient.HostedAuthURL=https://auth.example.com" ./cmd/turnledger
//
// The default is the local dev-issuer's address (`turnledger runtime
// dev-issuer`), so `go run ./cmd/turnledger runtime` works on a laptop. The
// handler writes it into /app/config.js, which the page reads.
//
// What the page does (static/app.js): sign-in and sign-up redirect to the
// hosted provider with redirect_uri /app/callback; the callback takes the
// token from the URL fragment, keeps it in sessionStorage and lands on
// /app/workspace, which shows GET /api/v1/auth/me, exchanges the token for a
// websocket ticket (never a raw JWT in the websocket URL), opens the
// execution websocket without a session_id and uses the session the server
// makes and announces (kept for the tab, so a reload rejoins it), shows the
// connection's state and messages, and manages provider profiles (keys are
// write-only: the page shows only whether one is stored and its hint).
// Sign-out, a 401, or the token's exp passing clear the session and every
// cached query at once, abort requests in flight, close the websocket and
// return to the sign-in page without waiting for any answer.
package webclient

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
)

// HostedAuthURL is the hosted auth provider the client signs in with, set at
// build time with -ldflags -X.
var HostedAuthURL = "http://127.0.0.1:8091"

//go:embed static
var files embed.FS

// Handler serves the client under /app/ with hostedAuthURL as its provider.
func Handler(hostedAuthURL string) (http.Handler, error) {
	u, err := url.Parse(hostedAuthURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("the web client's hosted auth URL %q must be an absolute http(s) URL", hostedAuthURL)
	}
	base := strings.TrimRight(hostedAuthURL, "/")
	cfg, _ := json.Marshal(map[string]string{"hostedAuthURL": base})
	configJS := []byte("window.TURNLEDGER_CONFIG = Object.freeze(" + string(cfg) + ");\n")
	static, _ := fs.Sub(files, "static")
	index, err := fs.ReadFile(static, "index.html")
	if err != nil {
		return nil, err
	}
	csp := "default-src 'self'; connect-src 'self' " + u.Scheme + "://" + u.Host + "; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
	assets := http.StripPrefix("/app/static/", http.FileServerFS(static))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /app", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/app/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /app/config.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(configJS)
	})
	mux.HandleFunc("GET /app/static/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		assets.ServeHTTP(w, r)
	})
	// Every other path under /app/ is the page; it routes by its own path.
	mux.HandleFunc("GET /app/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(index)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		mux.ServeHTTP(w, r)
	}), nil
}
