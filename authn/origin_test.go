package authn

import (
	"crypto/tls"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// previousWSOriginAllowed is the Origin rule without the scheme comparison
// in its same-origin check: wsOriginAllowed must accept nothing it refuses.
func previousWSOriginAllowed(cors []string, tlsListener bool, host string, origins []string) bool {
	if len(origins) == 0 {
		return true
	}
	if len(origins) > 1 {
		return false
	}
	if slices.Contains(cors, "*") {
		return true
	}
	o, ok := parseOrigin(origins[0])
	if !ok {
		return false
	}
	if u, err := url.Parse(origins[0]); err == nil && strings.EqualFold(u.Host, host) && (!tlsListener || o.scheme == "https") {
		return true
	}
	for _, c := range cors {
		if co, ok := parseOrigin(c); ok && co == o {
			return true
		}
	}
	return false
}

// TestOriginRuleOnlyNarrows: over every combination of allowed origins,
// listener, Host and Origin below, no Origin that previousWSOriginAllowed
// refuses is accepted by wsOriginAllowed.
func TestOriginRuleOnlyNarrows(t *testing.T) {
	corsLists := [][]string{
		nil, {"*"}, {"https://app.example.test"}, {"http://app.example.test"},
		{"https://app.example.test", "http://app.example.test"}, {"https://app.example.test:8443"},
		{"https://other.example.test"}, {"https://[::1]:8443"},
	}
	hosts := []string{"app.example.test", "APP.example.test", "app.example.test:8443", "app.example.test:443",
		"app.example.test:80", "app.example.test:", "other.example.test", "[::1]:8443", "::1:8443", ""}
	var origins [][]string
	for _, s := range []string{"http", "https", "HTTPS", "ws", "wss", "foo", "file"} {
		for _, h := range hosts {
			origins = append(origins, []string{s + "://" + h}, []string{s + "://" + h + "/"}, []string{s + "://" + h + "/app"})
		}
	}
	origins = append(origins, nil, []string{"null"}, []string{""}, []string{"https://app.example.test", "https://app.example.test"})
	accepted := 0
	for _, cors := range corsLists {
		s := &Server{cfg: Config{CORSAllowedOrigins: cors}}
		for _, tlsListener := range []bool{false, true} {
			for _, host := range hosts {
				for _, o := range origins {
					r := httptest.NewRequest("GET", "/api/v1/ws/execution", nil)
					r.Host = host
					if tlsListener {
						r.TLS = &tls.ConnectionState{}
					}
					for _, v := range o {
						r.Header.Add("Origin", v)
					}
					got := s.wsOriginAllowed(r)
					if got && !previousWSOriginAllowed(cors, tlsListener, host, o) {
						t.Errorf("CORS_ALLOWED_ORIGINS=%q, TLS %v, Host %q, Origin %q: accepted, refused before", cors, tlsListener, host, o)
					}
					if got {
						accepted++
					}
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no combination accepted: the grid tests nothing")
	}
}
