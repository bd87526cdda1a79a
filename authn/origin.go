package authn

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/turnledger/turnledger/internal/jsonhttp"
)

// origin is a web origin: scheme, host (both lower case) and port as
// written. A default port is not filled in: browsers leave it out, and
// "https://a.test" and "https://a.test:443" are different entries to match.
type origin struct{ scheme, host, port string }

// parseOrigin reads an Origin header or a CORS_ALLOWED_ORIGINS entry: a
// scheme and a host, an optional port, and no user, path (but "/"), query
// or fragment. "null" and anything else is not an origin.
func parseOrigin(s string) (origin, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return origin{}, false
	}
	return origin{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: u.Port()}, true
}

// wsOriginAllowed is the websocket's Origin check, made before anything
// else about a dial. Scheme, host and port always count, and only http and
// https origins can match. Allowed: no Origin header (not a browser); "*"
// in CORS_ALLOWED_ORIGINS; an entry of CORS_ALLOWED_ORIGINS equal to the
// Origin; or the request's own origin (its Host, with https on a TLS
// listener and http otherwise), unless CORS_ALLOWED_ORIGINS lists the
// Origin's host and port under another scheme: the operator said which
// scheme that host uses, and behind a proxy that ends TLS and keeps Host
// every request looks like http, so without this an http page could open
// a socket on an https site. Several Origin headers are refused.
func (s *Server) wsOriginAllowed(r *http.Request) bool {
	vs := r.Header.Values("Origin")
	if len(vs) == 0 {
		return true
	}
	if len(vs) > 1 {
		return false
	}
	if slices.Contains(s.cfg.CORSAllowedOrigins, "*") {
		return true
	}
	o, ok := parseOrigin(vs[0])
	if !ok || (o.scheme != "http" && o.scheme != "https") {
		return false
	}
	otherScheme := false
	for _, c := range s.cfg.CORSAllowedOrigins {
		co, ok := parseOrigin(c)
		if !ok {
			continue
		}
		if co == o {
			return true
		}
		if co.host == o.host && co.port == o.port {
			otherScheme = true
		}
	}
	if otherScheme {
		return false
	}
	// The request's own origin: the Host header exactly as the Origin
	// writes its host and port, and the scheme of the listener.
	u, err := url.Parse(vs[0])
	return err == nil && o.scheme == requestScheme(r) && strings.EqualFold(u.Host, r.Host)
}

// requestScheme is the scheme a request was sent with as this server sees
// it: https on a TLS listener, http otherwise. X-Forwarded-Proto is not
// read: nothing in the runtime says which proxy to believe.
func requestScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// checkHandshake answers a request that is not a websocket handshake in
// the runtime's JSON error shape (coder/websocket would answer in plain
// text), so that nothing after it (the ticket in particular) is spent on
// a request that cannot be upgraded. It mirrors coder/websocket's checks.
func checkHandshake(w http.ResponseWriter, r *http.Request) bool {
	if !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket") || !r.ProtoAtLeast(1, 1) {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "websocket")
		jsonhttp.WriteError(w, http.StatusUpgradeRequired, "UpgradeRequiredError",
			"this route is a websocket: send an HTTP/1.1 GET with Connection: Upgrade and Upgrade: websocket")
		return false
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		jsonhttp.WriteError(w, http.StatusBadRequest, "ValidationError", "Sec-WebSocket-Version must be 13")
		return false
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		jsonhttp.WriteError(w, http.StatusBadRequest, "ValidationError", "send exactly one Sec-WebSocket-Key header")
		return false
	}
	if k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0])); err != nil || len(k) != 16 {
		jsonhttp.WriteError(w, http.StatusBadRequest, "ValidationError", "Sec-WebSocket-Key must be 16 bytes in base64")
		return false
	}
	return true
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
