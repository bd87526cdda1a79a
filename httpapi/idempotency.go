package httpapi

import (
	"net/http"

	"github.com/turnledger/turnledger/kernel"
)

// IdempotencyHeader is the request header that makes a mutating request safe
// to retry (the name of the IETF httpapi idempotency-key draft).
const IdempotencyHeader = "Idempotency-Key"

// maxIdempotencyKey bounds the key's length.
const maxIdempotencyKey = 255

// idempotencyKey reads the request's Idempotency-Key: absent is "", and a
// key that is not 1 to 255 printable ASCII characters, or given twice, is a
// ValidationError.
func idempotencyKey(r *http.Request) (string, error) {
	vs := r.Header.Values(IdempotencyHeader)
	if len(vs) == 0 {
		return "", nil
	}
	if len(vs) > 1 {
		return "", kernel.Errorf(kernel.Validation, "%s must be given at most once", IdempotencyHeader)
	}
	k := vs[0]
	if len(k) < 1 || len(k) > maxIdempotencyKey {
		return "", kernel.Errorf(kernel.Validation, "%s must be 1 to %d printable characters", IdempotencyHeader, maxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", kernel.Errorf(kernel.Validation, "%s must be 1 to %d printable characters", IdempotencyHeader, maxIdempotencyKey)
		}
	}
	return k, nil
}

// idempotency returns the request's key scoped to the caller and the route
// (method and path, which name the project and the ids), with the hash of the
// body, or nil when the request has no key. scope names the caller; "" takes
// the authenticated one.
func (c *call) idempotency(scope string) *kernel.Idempotency {
	if c.idemKey == "" {
		return nil
	}
	if scope == "" {
		scope = "agent:" + c.caller.AgentID
		if c.caller.Admin {
			scope = "admin"
		}
	}
	return &kernel.Idempotency{
		Ref:     kernel.HashSecret(scope + "\x00" + c.r.Method + " " + c.r.URL.Path + "\x00" + c.idemKey),
		Request: c.bodyHash,
	}
}

// readIdempotency checks a mutating request's Idempotency-Key before its
// handler runs.
func (c *call) readIdempotency() error {
	if c.r.Method == http.MethodGet || c.r.Method == http.MethodHead {
		return nil
	}
	k, err := idempotencyKey(c.r)
	c.idemKey = k
	return err
}
