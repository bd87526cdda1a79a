package authn

import (
	"net/http"
	"time"

	"github.com/turnledger/turnledger/internal/throttle"
)

// Throttling failed authentication (not shown in the spec; the same token
// buckets as the coordination API's, package internal/throttle).
//
// Every request whose credential is refused with 401 takes a token from the
// bucket of its remote address (Config.AuthFailures: a burst of 20, one more
// per second). A valid credential is never refused by this throttle, whoever
// else fails at its address; a request from an address whose bucket is
// empty is answered 429 TooManyRequestsError with Retry-After (the seconds
// until a token comes back) unless its credential passes one of two checks,
// both without the database:
//
//   - it is known to be valid (knownCredential): a token or ticket that
//     authenticated recently and has not expired (verified.go), or dev
//     mode's debug credentials; a SHA-256 and a map look-up, as cheap as the
//     429;
//   - or it is a token whose signature and claims hold (verifier.verify: the
//     key from the key set, which fetches at most once per KeyRefetchEvery
//     whatever a flood sends). This is what serving a valid token this
//     instance has never seen costs under a flood: one signature
//     verification per flooding request that is a well-formed token
//     (garbage is refused before any crypto). BenchmarkThrottledRequest
//     measures it by the handler alone: a forged token's 429 costs 10–15
//     times a garbage token's and about two thirds of a valid request
//     served in full; docs/limits.md has the figures.
//
// A credential that passes is authenticated in full, as any other, and a
// refusal then counts as a failure; one that does not is answered 429, so a
// throttled request learns nothing more than before. Requests that
// authenticate take nothing, so clients that never fail are never
// throttled. The bucket is per address only, not per claimed user: a user's
// identity is known only once the token's signature is verified, and the one
// claimed in the clear (dev mode's debug headers) is local only. Proxy
// headers are not trusted: behind a proxy every client shares the proxy's
// bucket.

// knownCredential returns the cache key of r's credential (the zero key
// when it has none a cache keeps), the credential when it is a token, and
// whether the credential is known to be
// valid, so that r skips the throttle: a token or ticket that authenticated
// and still holds (verified.go), or, in dev mode, debug headers or
// parameters that pass their checks (a few string comparisons, as cheap as
// a 429). ws says the request is a websocket handshake.
func (s *Server) knownCredential(r *http.Request, ws bool) (key [32]byte, token string, known bool) {
	c, e := s.auth.credentialOf(r)
	if e != nil {
		return key, "", false
	}
	var cred string
	kind := keyToken
	switch c {
	case credBearer:
		tok, e := bearerToken(r)
		if e != nil {
			return key, "", false
		}
		cred = tok
	case credQueryToken:
		cred = r.URL.Query().Get("access_token")
	case credTicket:
		kind, cred = keyTicket, r.URL.Query().Get("ticket")
	case credDebugHeader, credDebugQuery:
		_, _, err := s.auth.identify(r, c, ws)
		return key, "", err == nil
	default:
		return key, "", false
	}
	if !ws && c != credBearer || cred == "" || len(cred) > s.cfg.MaxTokenBytes {
		return key, "", false // refused whatever it holds; hash nothing long
	}
	key = credentialKey(kind, cred)
	if kind == keyToken {
		token = cred
	}
	return key, token, s.valid.has(key)
}

// passThrottle lets r past the throttle of failed authentication, or
// refuses it with 429: a request with a credential known to be valid, from
// an address with failure tokens left, or with a token whose signature and
// claims hold passes. key is r's cache key for authSucceeded and authFailed.
func (s *Server) passThrottle(r *http.Request, ws bool) (key [32]byte, err error) {
	key, token, known := s.knownCredential(r, ws)
	if known {
		return key, nil
	}
	if err = s.checkThrottle(r); err == nil || token == "" {
		return key, err
	}
	if _, _, e := s.auth.v.verify(r.Context(), token); e == nil {
		return key, nil
	}
	return key, err
}

// authSucceeded remembers the credential of key until until (a zero until:
// not a credential the cache keeps).
func (s *Server) authSucceeded(key [32]byte, until time.Time) {
	if key != ([32]byte{}) && !until.IsZero() {
		s.valid.put(key, until)
	}
}

// checkThrottle refuses a request from an address with no failure tokens
// left.
func (s *Server) checkThrottle(r *http.Request) error {
	if wait, _ := s.fails.Wait(throttle.RemoteHost(r)); wait > 0 {
		return &Error{Kind: KindThrottled, Message: "too many failed authentications from this address; retry after the time in Retry-After", RetryAfter: wait}
	}
	return nil
}

// authFailed takes a token from r's address when err refused its
// credential, and forgets the credential of key when err refused it (401)
// or its tenant (403).
func (s *Server) authFailed(r *http.Request, err error, key [32]byte) {
	switch KindOf(err) {
	case KindUnauthorized:
		s.fails.Fail(throttle.RemoteHost(r))
		s.valid.forget(key)
	case KindForbidden:
		s.valid.forget(key)
	}
}
