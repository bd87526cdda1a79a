package authn

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/turnledger/turnledger/internal/jsonhttp"
)

// Kind is the closed set of failures the service reports; each maps to one
// status and one error name of the {error, message} body.
type Kind int

// The kinds.
const (
	KindInternal     Kind = iota // 500 InternalError
	KindUnauthorized             // 401 UnauthorizedError
	KindForbidden                // 403 ForbiddenError
	KindUnavailable              // 503 ServiceUnavailableError
	KindInvalid                  // 400 ValidationError
	KindNotFound                 // 404 NotFoundError
	KindConflict                 // 409 ConflictError
	KindThrottled                // 429 TooManyRequestsError
)

// Error is a failure with a message fit for the client.
type Error struct {
	Kind    Kind
	Message string
	Err     error // cause, logged but never shown
	// RetryAfter is sent as Retry-After (whole seconds, at least 1) with a
	// 503 or a 429; a 503 without it gets defaultRetryAfter.
	RetryAfter time.Duration
}

// defaultRetryAfter is the Retry-After of a 503 that names none.
const defaultRetryAfter = 10 * time.Second

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

func errf(k Kind, msg string) *Error { return &Error{Kind: k, Message: msg} }

// KindOf returns the kind of err, KindInternal for anything not an *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// Status and name of each kind.
func (k Kind) status() (int, string) {
	switch k {
	case KindUnauthorized:
		return http.StatusUnauthorized, "UnauthorizedError"
	case KindForbidden:
		return http.StatusForbidden, "ForbiddenError"
	case KindUnavailable:
		return http.StatusServiceUnavailable, "ServiceUnavailableError"
	case KindInvalid:
		return http.StatusBadRequest, "ValidationError"
	case KindNotFound:
		return http.StatusNotFound, "NotFoundError"
	case KindConflict:
		return http.StatusConflict, "ConflictError"
	case KindThrottled:
		return http.StatusTooManyRequests, "TooManyRequestsError"
	default:
		return http.StatusInternalServerError, "InternalError"
	}
}

// The admission messages of the spec's status table.
const (
	MsgNotAllowlisted = "tenant is not allowlisted"
	MsgSuspended      = "tenant access is suspended"
	MsgRemoved        = "tenant access has been removed"
)

// Store errors.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
)

// writeError writes err in the shared body; internal errors show a generic message.
func writeError(w http.ResponseWriter, err error, logf func(string, ...any)) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Kind: KindInternal, Message: "internal error", Err: err}
	}
	status, name := e.Kind.status()
	msg := e.Message
	if e.Kind == KindInternal {
		msg = "internal error"
	}
	if e.Err != nil && logf != nil {
		logf("authn: %s: %v", name, e.Err)
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer`)
	}
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		d := e.RetryAfter
		if d <= 0 {
			d = defaultRetryAfter
		}
		w.Header().Set("Retry-After", strconv.Itoa(max(int((d+time.Second-1)/time.Second), 1)))
	}
	jsonhttp.WriteError(w, status, name, msg)
}
