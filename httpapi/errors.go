package httpapi

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// retryAfter is the Retry-After of a kernel.Unavailable answer: the ledger
// has already retried for its bound (ledger.Config.RetryFor) before it gives
// up, so a client should not come back at once.
const retryAfter = "5"

// Errors the HTTP layer raises itself, outside the kernel's kinds.
var (
	errTooLarge    = &httpError{http.StatusRequestEntityTooLarge, "PayloadTooLargeError"}
	errUnavailable = &httpError{http.StatusServiceUnavailable, "ServiceUnavailableError"}
	errNotAllowed  = &httpError{http.StatusMethodNotAllowed, "MethodNotAllowedError"}
	errThrottled   = &httpError{http.StatusTooManyRequests, "TooManyRequestsError"}
)

type httpError struct {
	status int
	name   string
}

// statusError is an error with its own status and name, and a message for
// the client.
type statusError struct {
	kind *httpError
	msg  string
	// retryAfter, when set, is sent as Retry-After (whole seconds, at least 1).
	retryAfter time.Duration
}

func (e *statusError) Error() string { return e.msg }

// writeError writes every error response of the API: kernel errors by the
// table above, decoding failures as 422 ValidationError, projection misses
// as 404, and anything else as a logged 500 with a generic message.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var se *statusError
	var de *jsonhttp.DecodeError
	var ke *kernel.Error
	var ge *projection.GoneError
	switch {
	case errors.As(err, &ge):
		// A feed cursor below the retention horizon: the body says where
		// the feed begins now (horizon.go).
		jsonhttp.Write(w, http.StatusGone, goneBody(ge))
	case errors.As(err, &se):
		if se.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(se.retryAfter.Seconds()))))
		}
		jsonhttp.WriteError(w, se.kind.status, se.kind.name, se.msg)
	case errors.As(err, &de):
		jsonhttp.WriteError(w, http.StatusUnprocessableEntity, string(kernel.Validation), de.Msg)
	case errors.Is(err, projection.ErrDamaged):
		s.log.Error("projection damaged", "method", r.Method, "path", requestPath(r), "err", err)
		jsonhttp.WriteError(w, errUnavailable.status, errUnavailable.name, "the projections are damaged and are not served until they are rebuilt from the ledger (restart serve, or run turnledger replay)")
	case errors.Is(err, projection.ErrNotFound):
		jsonhttp.WriteError(w, http.StatusNotFound, string(kernel.NotFound), "not found")
	case errors.As(err, &ke) && ke.Kind == kernel.Unavailable:
		s.log.Warn("unavailable", "method", r.Method, "path", requestPath(r), "err", err)
		w.Header().Set("Retry-After", retryAfter)
		jsonhttp.WriteError(w, http.StatusServiceUnavailable, string(ke.Kind), ke.Message)
	case errors.As(err, &ke) && ke.Kind != kernel.Internal:
		jsonhttp.WriteError(w, ke.Kind.Status(), string(ke.Kind), ke.Message)
	default:
		s.log.Error("internal error", "method", r.Method, "path", requestPath(r), "err", err)
		jsonhttp.WriteError(w, http.StatusInternalServerError, string(kernel.Internal), "internal error; see the server log")
	}
}

// named gives a projection miss the message the kernel gives its own
// ("turn t not found"), so that every route names what it did not find.
func named(err error, what, id string) error {
	if errors.Is(err, projection.ErrNotFound) {
		return kernel.Errorf(kernel.NotFound, "%s %s not found", what, id)
	}
	return err
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	jsonhttp.WriteError(w, http.StatusNotFound, string(kernel.NotFound), "no route for "+r.Method+" "+requestPath(r))
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	jsonhttp.WriteError(w, errNotAllowed.status, errNotAllowed.name, "method "+r.Method+" is not allowed on "+requestPath(r))
}

func (s *Server) panicked(w http.ResponseWriter, r *http.Request, v any) {
	s.log.Error("panic serving request", "method", r.Method, "path", requestPath(r), "panic", v)
	jsonhttp.WriteError(w, http.StatusInternalServerError, string(kernel.Internal), "internal error; see the server log")
}
