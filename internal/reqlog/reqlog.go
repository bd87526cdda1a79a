// Package reqlog writes the one log line per request that every server of
// the project writes (serve, catalogue): method, route pattern, status,
// duration and project, through log/slog. Neither headers (which carry
// tokens) nor bodies are logged, nor the raw path (which may hold ids); a
// router names the route with Route once it has matched one.
package reqlog

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// NoRoute is the route logged for a request no route matched.
const NoRoute = "(no route)"

// Handler wraps h so that every request writes one line to log, message
// "request". A server error (5xx) is logged at level Error, the rest at Info.
func Handler(log *slog.Logger, h http.Handler) http.Handler {
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
			route = NoRoute
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

// Route tells the line of the request r its route pattern (as documented,
// never the raw path) and its project ("" when none). Outside Handler it
// does nothing.
func Route(r *http.Request, pattern, project string) {
	if ri, ok := r.Context().Value(routeInfoKey{}).(*routeInfo); ok {
		ri.pattern, ri.project = pattern, project
	}
}

// Active reports whether r is being logged by Handler, so a router can skip
// the work of naming the route when it is not.
func Active(r *http.Request) bool {
	_, ok := r.Context().Value(routeInfoKey{}).(*routeInfo)
	return ok
}

// routeInfo is what the router tells Handler about a request.
type routeInfo struct{ pattern, project string }

type routeInfoKey struct{}

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
