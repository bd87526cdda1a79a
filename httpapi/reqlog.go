package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/julienschmidt/httprouter"
	"github.com/turnledger/turnledger/internal/reqlog"
	"github.com/turnledger/turnledger/kernel"
)

// RequestLog wraps the API so that every request writes one line to log
// (internal/reqlog): method, route pattern (as in docs/api.md, never the raw
// path), status, duration and project. Neither headers (which carry tokens)
// nor bodies are logged. A server error (5xx) is logged at level Error, the
// rest at Info.
func RequestLog(log *slog.Logger, h http.Handler) http.Handler {
	return reqlog.Handler(log, h)
}

// withPattern wraps the handle of a route so that RequestLog learns the
// route's pattern and the project of the path.
func withPattern(pattern string, h httprouter.Handle) httprouter.Handle {
	doc := openAPIPath(pattern)
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if reqlog.Active(r) {
			project := ps.ByName("project_id")
			if !kernel.ValidID(project) {
				project = ""
			}
			reqlog.Route(r, doc, project)
		}
		h(w, r, ps)
	}
}
