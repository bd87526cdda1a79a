package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error is a request the service refused: the HTTP status and the error
// body {error, message}. Use errors.As to read it, or errors.Is with the
// Err* values below to test the error name.
type Error struct {
	Status  int    // HTTP status
	Name    string `json:"error"`   // e.g. "ConflictError"
	Message string `json:"message"` // for people
	// RetryAfter is the service's Retry-After (sent with 503 and 429): how
	// long to wait before trying again; 0 when it sent none.
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("turnledger: %d %s: %s", e.Status, e.Name, e.Message)
}

// Is matches an Err* value by error name (the status is not compared).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == 0 && t.Name == e.Name
}

// Error names of the API, for errors.Is(err, client.ErrConflict).
var (
	ErrUnauthorized = &Error{Name: "UnauthorizedError"}
	ErrForbidden    = &Error{Name: "ForbiddenError"}
	ErrNotFound     = &Error{Name: "NotFoundError"}
	ErrConflict     = &Error{Name: "ConflictError"}
	ErrFencing      = &Error{Name: "FencingError"} // the claim is not (or no longer) the live one
	ErrInvariant    = &Error{Name: "InvariantError"}
	ErrValidation   = &Error{Name: "ValidationError"}
	ErrUnavailable  = &Error{Name: "ServiceUnavailableError"}
)

// errorFrom decodes an error response; a body that is not the error shape
// still gives an Error with the status.
func errorFrom(status int, header http.Header, body []byte) error {
	e := &Error{Status: status, RetryAfter: retryAfter(header.Get("Retry-After"))}
	if json.Unmarshal(body, e) != nil || e.Name == "" {
		e.Name = http.StatusText(status)
		e.Message = string(body)
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "…"
		}
	}
	e.Status = status
	return e
}

// retryAfter reads a Retry-After value: delay-seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
