package kernel

import (
	"errors"
	"fmt"
)

// Kind is the closed set of error kinds the kernel reports. They mirror the
// error table of the coordination API: Status is each one's HTTP status,
// for every face that answers over HTTP (httpapi, mcpapi).
type Kind string

const (
	Unauthorized Kind = "UnauthorizedError" // 401: missing, expired, revoked or invalid credentials
	Forbidden    Kind = "ForbiddenError"    // 403: authenticated, but not allowed
	NotFound     Kind = "NotFoundError"     // 404
	Conflict     Kind = "ConflictError"     // 409: the state does not allow it (idempotency clash, wrong state)
	Fencing      Kind = "FencingError"      // 409: stale, expired, foreign or forged claim token
	Invariant    Kind = "InvariantError"    // 422: a rule of the domain refuses it
	Validation   Kind = "ValidationError"   // 422: the request is malformed
	BadRequest   Kind = "KernelError"       // 400: any other refusal of the kernel
	Internal     Kind = "InternalError"     // 500: a bug, never the client's fault
	// Unavailable is 503: a dependency (the ledger's NATS cluster) did not
	// answer within its bound; the same request may succeed shortly, and the
	// answer says when to retry (Retry-After).
	Unavailable Kind = "ServiceUnavailableError"
	// Gone is 410: a feed read below the retention horizon, whose events
	// are only in the archive now (not in spec 000's table: retention is
	// off unless asked for).
	Gone Kind = "GoneError"
)

// Status is the HTTP status spec 000's error table gives the kind (500 for
// a kind outside it).
func (k Kind) Status() int {
	switch k {
	case Unauthorized:
		return 401
	case Forbidden:
		return 403
	case NotFound:
		return 404
	case Conflict, Fencing:
		return 409
	case Invariant, Validation:
		return 422
	case BadRequest:
		return 400
	case Unavailable:
		return 503
	case Gone:
		return 410
	}
	return 500
}

// Error is a refusal of the kernel, with a message fit for the client.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return string(e.Kind) + ": " + e.Message }

// Errorf makes an *Error of the given kind.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// ErrorKind returns the kind of err: the kind of an *Error in its chain, or
// Internal for anything else.
func ErrorKind(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// ErrStale is what a Ledger returns (wrapped or as is) when an append lost a
// race: the project's last sequence was not the one expected. The engine
// catches up and decides again; clients never see it.
var ErrStale = errors.New("kernel: the ledger moved on since the state was folded")
