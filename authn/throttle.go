package authn

import (
	"net/http"

	"github.com/turnledger/turnledger/internal/throttle"
)

// Throttling failed authentication (not shown in the spec; the same token
// buckets as the coordination API's, package internal/throttle).
//
// Every request whose credential is refused with 401 takes a token from the
// bucket of its remote address (Config.AuthFailures: a burst of 20, one more
// per second). A request from an address whose bucket is empty is answered
// 429 TooManyRequestsError with Retry-After (the seconds until a token comes
// back) before its credential is looked at, so a flood of wrong tokens
// costs no signature check, key-set fetch or database look-up. Requests
// that authenticate take nothing, so clients that never fail are never
// throttled. The bucket is per address only, not per claimed user: a
// user's identity is known only once the token's signature is verified,
// and the one claimed in the clear (dev mode's debug headers) is local
// only. Proxy headers are not trusted: behind a proxy every client shares
// the proxy's bucket.

// checkThrottle refuses a request from an address with no failure tokens
// left.
func (s *Server) checkThrottle(r *http.Request) error {
	if wait, _ := s.fails.Wait(throttle.RemoteHost(r)); wait > 0 {
		return &Error{Kind: KindThrottled, Message: "too many failed authentications from this address; retry after the time in Retry-After", RetryAfter: wait}
	}
	return nil
}

// authFailed takes a token from r's address when err refused its credential.
func (s *Server) authFailed(r *http.Request, err error) {
	if KindOf(err) == KindUnauthorized {
		s.fails.Fail(throttle.RemoteHost(r))
	}
}
