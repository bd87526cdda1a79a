package authn

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// credential is the means of authentication a request uses.
type credential int

const (
	credNone        credential = iota
	credBearer                 // Authorization: Bearer <token>
	credDebugHeader            // dev mode: X-Debug-Tenant-Id / X-Debug-User-Id
	credQueryToken             // websocket: access_token
	credDebugQuery             // websocket: debug_tenant_id / debug_user_id
	credTicket                 // websocket: ticket
)

func (c credential) String() string {
	switch c {
	case credBearer:
		return "an Authorization header"
	case credDebugHeader:
		return "debug headers"
	case credQueryToken:
		return "an access_token query parameter"
	case credDebugQuery:
		return "debug query parameters"
	case credTicket:
		return "a ticket"
	}
	return "no credential"
}

// errAmbiguous marks a refusal because a request carries more than one
// credential.
var errAmbiguous = errors.New("ambiguous credentials")

func ambiguous(msg string) *Error {
	return &Error{Kind: KindUnauthorized, Message: msg + "; send exactly one credential", Err: errAmbiguous}
}

// credentialOf names the one credential r carries. A request with more than
// one is refused with 401, never resolved by picking one (RFC 6750 §2: one
// method per request) and never passed as dev mode's anonymous user: two
// Authorization headers; a header and a query credential (ticket,
// access_token, debug_tenant_id/debug_user_id), on any route; in dev mode,
// debug headers and an Authorization header; two query credentials; one
// credential parameter or debug header given twice.
func (a *Authenticator) credentialOf(r *http.Request) (credential, *Error) {
	var found []credential
	add := func(c credential) {
		for _, f := range found {
			if f == c {
				return
			}
		}
		found = append(found, c)
	}
	h := r.Header
	switch vs := h.Values("Authorization"); {
	case len(vs) > 1:
		return credNone, ambiguous(fmt.Sprintf("the request has %d Authorization headers", len(vs)))
	case len(vs) == 1 && vs[0] != "":
		add(credBearer)
	}
	if a.cfg.Mode == ModeDev {
		for _, k := range []string{"X-Debug-Tenant-Id", "X-Debug-User-Id"} {
			if len(h.Values(k)) > 1 {
				return credNone, ambiguous("the request has more than one " + k + " header")
			}
		}
		if h.Get("X-Debug-Tenant-Id") != "" || h.Get("X-Debug-User-Id") != "" {
			add(credDebugHeader)
		}
	}
	q := r.URL.Query()
	for _, p := range []struct {
		name string
		c    credential
	}{{"ticket", credTicket}, {"access_token", credQueryToken}, {"debug_tenant_id", credDebugQuery}, {"debug_user_id", credDebugQuery}} {
		switch n := len(q[p.name]); {
		case n > 1:
			return credNone, ambiguous("query parameter " + p.name + " is given more than once")
		case n == 1:
			add(p.c)
		}
	}
	if len(found) > 1 {
		names := make([]string, len(found))
		for i, c := range found {
			names[i] = c.String()
		}
		return credNone, ambiguous("the request carries " + strings.Join(names, " and "))
	}
	if len(found) == 0 {
		return credNone, nil
	}
	return found[0], nil
}

// bearerToken returns the token of the (one) Authorization header.
func bearerToken(r *http.Request) (string, *Error) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", unauthorized("Authorization header must be \"Bearer <token>\"")
	}
	return strings.TrimSpace(tok), nil
}

// identify verifies credential c of r and returns its identity and, for a
// token, the last instant it is accepted (zero for debug credentials).
// Query credentials are accepted only on the websocket (ws), as the mode and
// configuration allow; a ticket is handled by the websocket route itself.
func (a *Authenticator) identify(r *http.Request, c credential, ws bool) (Identity, time.Time, error) {
	switch c {
	case credBearer:
		tok, e := bearerToken(r)
		if e != nil {
			return Identity{}, time.Time{}, e
		}
		return a.v.verify(r.Context(), tok)
	case credDebugHeader:
		if !a.cfg.AllowDebugAuth {
			return Identity{}, time.Time{}, unauthorized("debug authentication headers are not accepted (ALLOW_DEBUG_AUTH=false)")
		}
		h := r.Header
		id, err := debugIdentity(h.Get("X-Debug-Tenant-Id"), h.Get("X-Debug-User-Id"), h.Get("X-Debug-Email"), h.Get("X-Debug-Name"))
		return id, time.Time{}, err
	case credQueryToken, credDebugQuery, credTicket:
		if !ws {
			return Identity{}, time.Time{}, unauthorized(c.String() + " is accepted only on the websocket; send Authorization: Bearer <token>")
		}
	default:
		return Identity{}, time.Time{}, unauthorized("missing bearer token")
	}
	q := r.URL.Query()
	switch {
	case c == credTicket:
		return Identity{}, time.Time{}, errf(KindInternal, "a ticket is not an identity")
	case c == credQueryToken && a.cfg.Mode == ModeHosted:
		return Identity{}, time.Time{}, unauthorized("tokens in websocket query parameters are refused in hosted mode; exchange the token for a ticket at POST /api/v1/auth/ws-ticket")
	case c == credQueryToken && !a.cfg.AllowQueryAuthTokens:
		return Identity{}, time.Time{}, unauthorized("tokens in websocket query parameters are not accepted (ALLOW_QUERY_AUTH_TOKENS=false)")
	case c == credQueryToken:
		return a.v.verify(r.Context(), q.Get("access_token"))
	case a.cfg.Mode != ModeDev:
		return Identity{}, time.Time{}, unauthorized("debug parameters are accepted only in dev mode")
	case !a.cfg.AllowQueryAuthTokens || !a.cfg.AllowDebugAuth:
		return Identity{}, time.Time{}, unauthorized("debug parameters need ALLOW_DEBUG_AUTH=true and ALLOW_QUERY_AUTH_TOKENS=true")
	default:
		id, err := debugIdentity(q.Get("debug_tenant_id"), q.Get("debug_user_id"), "", "")
		return id, time.Time{}, err
	}
}
