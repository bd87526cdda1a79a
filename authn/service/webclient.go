package service

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/webclient"
)

// WithWebClient serves the browser client under /app/ and everything else
// with api. The client's hosted auth URL is the one built into the binary;
// in hosted mode a runtime whose HOSTED_AUTH_URL has another origin would
// refuse the client's tokens, so that is logged.
func WithWebClient(api http.Handler, cfg authn.Config, logf func(string, ...any)) (http.Handler, error) {
	app, err := webclient.Handler(webclient.HostedAuthURL)
	if err != nil {
		return nil, err
	}
	if cfg.Mode == authn.ModeHosted && originOf(cfg.HostedAuthURL) != originOf(webclient.HostedAuthURL) {
		logf("turnledger runtime: warning: the web client under /app/ was built for the hosted auth URL %s, but HOSTED_AUTH_URL is %s: its sign-ins will be refused (rebuild with -ldflags, docs/runtime.md)", webclient.HostedAuthURL, cfg.HostedAuthURL)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/app" || strings.HasPrefix(r.URL.Path, "/app/") {
			app.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	}), nil
}

func originOf(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Scheme + "://" + u.Host
}
