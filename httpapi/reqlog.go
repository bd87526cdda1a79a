package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/turnledger/turnledger/kernel"
)

// RequestLog wraps the API so that every request writes one line to log:
// method, route pattern (as in docs/api.md, never the raw path), status,
// duration and project. Neither headers (which carry tokens) nor bodies
// are logged. A server error (5xx) is logged at level Error, the rest at Info.
func RequestLog(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &routeInfo{}
		r = r.WithContext(context.WithValue(r.Context(), routeInfoKey{}, ri))
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		route := ri.pattern
		if route == "" {
			route = "(no route)"
		}
		level := slog.LevelInfo
		if sw.status >= 500 {
			level = slog.LevelError
		}
		log.LogAttrs(r.Context(), level, "request",
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", sw.status),
			slog.Duration("duration", time.Since(start)),
			slog.String("project", ri.project),
		)
	})
}

// routeInfo is what the router tells RequestLog about a request.
type routeInfo struct{ pattern, project string }

type routeInfoKey struct{}

// withPattern wraps the handle of a route so that RequestLog learns the
// route's pattern and the project of the path.
func withPattern(pattern string, h httprouter.Handle) httprouter.Handle {
	doc := openAPIPath(pattern)
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if ri, ok := r.Context().Value(routeInfoKey{}).(*routeInfo); ok {
			ri.pattern = doc
			if p := ps.ByName("project_id"); kernel.ValidID(p) {
				ri.project = p
			}
		}
		h(w, r, ps)
	}
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
