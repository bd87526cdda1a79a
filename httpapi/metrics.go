package httpapi

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/turnledger/turnledger/kernel"
)

// Observer receives what the API measures: one call per request of a route,
// with the route's OpenAPI operationId (e.g. "dispatchTurn"), its method,
// the status answered and how long it took (for a long-poll claim or an
// event stream, the wait included); a request shed at the instance's bound
// is observed as OperationShed with 503. cmd/turnledger implements it with
// Prometheus metrics.
type Observer interface {
	ObserveRequest(operation, method string, status int, d time.Duration)
}

// OperationShed is the operation an Observer is given for a request shed
// at the instance's in-flight bound, which is answered before the router
// knows its route.
const OperationShed = "shedBeforeRouting"

// MetricsConfig is how the API serves /metrics.
type MetricsConfig struct {
	// Handler serves the metrics (the Prometheus handler of the registry
	// made in cmd/turnledger); nil answers 404.
	Handler http.Handler
	// FromAnywhere serves /metrics to any client; by default only to
	// loopback clients, others get 403.
	FromAnywhere bool
	// Observer, when set, gets every request (see Observer).
	Observer Observer
}

func (s *Server) metrics(w http.ResponseWriter, c *call) error {
	mc := s.cfg.Metrics
	if mc.Handler == nil {
		return kernel.Errorf(kernel.NotFound, "metrics are not enabled on this server")
	}
	if !mc.FromAnywhere && !fromLoopback(c.r) {
		return kernel.Errorf(kernel.Forbidden, "/metrics is served to loopback clients only (serve --metrics-public to change it)")
	}
	mc.Handler.ServeHTTP(w, c.r)
	return nil
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openAPIPath turns an httprouter pattern into its OpenAPI path, which is
// also how docs/api.md and the request log write it:
// "/turns/:turn_id:resume" → "/turns/{turn_id}:resume".
func openAPIPath(pattern string) string {
	segs := strings.Split(pattern, "/")
	for i, seg := range segs {
		if !strings.HasPrefix(seg, ":") {
			continue
		}
		name, verb, hasVerb := strings.Cut(seg[1:], ":")
		segs[i] = "{" + name + "}"
		if hasVerb {
			segs[i] += ":" + verb
		}
	}
	return strings.Join(segs, "/")
}

// observed wraps the handler of the route with operationId id so the
// Observer sees its requests.
func (s *Server) observed(id, method string, h httprouter.Handle) httprouter.Handle {
	obs := s.cfg.Metrics.Observer
	if obs == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		start := time.Now()
		sw := &observedWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() { obs.ObserveRequest(id, method, sw.status, time.Since(start)) }()
		h(sw, r, ps)
	}
}

// observedWriter remembers the status written (for the Observer). Unwrap lets
// http.ResponseController reach the connection (flushes, deadlines).
type observedWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *observedWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *observedWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *observedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// StatusClass is a few-valued label for a status: "2xx", "4xx", "5xx".
func StatusClass(status int) string { return strconv.Itoa(status/100) + "xx" }
