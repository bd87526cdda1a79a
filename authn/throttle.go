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
// per second). A request from an address whose bucket is empty is answered
// 429 TooManyRequestsError with Retry-After (the seconds until a token comes
// back) before its credential is verified, so a flood of wrong tokens
// costs no signature check, key-set fetch or database look-up — unless its
// credential is known to be valid (knownCredential): a token or ticket that
// authenticated recently and has not expired (verified.go), or dev mode's
// debug credentials, whose check is as cheap as the 429. Those skip the
// throttle and are authenticated in full, so a valid credential is never
// refused by the throttle once it has authenticated once, whoever else
// fails at its address. Requests that authenticate take nothing, so
// clients that never fail are never throttled. The bucket is per address
// only, not per claimed user: a user's identity is known only once the
// token's signature is verified, and the one claimed in the clear (dev
// mode's debug headers) is local only. Proxy headers are not trusted:
// behind a proxy every client shares the proxy's bucket.

// knownCredential returns the cache key of r's credential (the zero key
// when it has none a cache keeps) and whether the credential is known to be
// valid, so that r skips the throttle: a token or ticket that authenticated
// and still holds (verified.go), or, in dev mode, debug headers or
// parameters that pass their checks (a few string comparisons, as cheap as
// a 429). ws says the request is a websocket handshake.
func (s *Server) knownCredential(r *http.Request, ws bool) (key [32]byte, known bool) {
	c, e := s.auth.credentialOf(r)
	if e != nil {
		return key, false
	}
	var cred string
	kind := keyToken
	switch c {
	case credBearer:
		tok, e := bearerToken(r)
		if e != nil {
			return key, false
		}
		cred = tok
	case credQueryToken:
		cred = r.URL.Query().Get("access_token")
	case credTicket:
		kind, cred = keyTicket, r.URL.Query().Get("ticket")
	case credDebugHeader, credDebugQuery:
		_, _, err := s.auth.identify(r, c, ws)
		return key, err == nil
	default:
		return key, false
	}
	if !ws && c != credBearer || cred == "" || len(cred) > s.cfg.MaxTokenBytes {
		return key, false // refused whatever it holds; hash nothing long
	}
	key = credentialKey(kind, cred)
	return key, s.valid.has(key)
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
