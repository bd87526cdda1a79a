package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/internal/inflight"
	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// Config configures the HTTP API.
type Config struct {
	// AdminTokenHash is kernel.HashSecret of the admin bearer token.
	AdminTokenHash string
	// MaxBodyBytes bounds every request body.
	MaxBodyBytes int64
	// DefaultLimit and MaxLimit bound the `limit` of feeds and projections.
	DefaultLimit, MaxLimit int
	// WaitTimeout bounds how long a command waits for the projections to
	// reach its ledger_seq before it answers 503.
	WaitTimeout time.Duration
	// Push configures long polls and event streams (sse.go); a zero field
	// takes its default.
	Push PushConfig
	// Metrics: the /metrics handler and the request observer (metrics.go).
	Metrics MetricsConfig
	// Ready reports readiness for /readyz: a JSON-able report and whether the
	// service is ready.
	Ready func(ctx context.Context) (any, bool)
	// Diagnostics reports trouble (lag, failures) to show on projection pages.
	Diagnostics func(ctx context.Context) []Diagnostic
	// Trends makes the last hour of the instance for GET /admin/v1/trends
	// (trends.go); nil answers 404.
	Trends func(ctx context.Context) Trends
	// MaxInFlight bounds the requests the instance serves at once, and
	// MaxProjectInFlight those of one project; beyond either the request is
	// answered 503 with Retry-After at once (0 turns a bound off).
	MaxInFlight, MaxProjectInFlight int
	// AuthFailures is the token bucket of failed authentications, per remote
	// address and per claimed agent (a zero Rate turns throttling off).
	AuthFailures Rate
	// AuthGuard, when set, is the throttle of failed authentications the
	// API shares with the other faces of the instance (serve gives the MCP
	// and A2A endpoints the same one), in place of one of its own of
	// AuthFailures.
	AuthGuard *faceauth.Guard
	// PublicURL is the URL people reach this API at (behind a proxy, say),
	// the base of the input_url a suspend for input answers. Empty: the
	// scheme and Host of the request that suspended.
	PublicURL string
	// Mounts are other faces of the engine served beside the API (the MCP
	// endpoint, say): a request whose path starts with a mount's Prefix goes
	// to its Handler, under the instance's in-flight bound (and its
	// project's, with Mount.Project) and the request log like any route.
	Mounts []Mount
	// Now is the clock of derived statuses (presence, credential expiry)
	// and of the authentication throttle.
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		MaxBodyBytes: 1 << 20,
		DefaultLimit: 50,
		MaxLimit:     projection.MaxLimit,
		WaitTimeout:  10 * time.Second,
		// 64 agents in a closed loop hold at most 64; the bounds leave room
		// for bursts and stop an open loop from queueing without end.
		MaxInFlight:        512,
		MaxProjectInFlight: 128,
		AuthFailures:       Rate{Burst: 20, Every: time.Second},
		Now:                time.Now,
		Logger:             slog.Default(),
	}
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.AdminTokenHash == "" {
		errs = append(errs, errors.New("httpapi: an admin token hash is required"))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, errors.New("httpapi: max body bytes must be at least 1024"))
	}
	if c.DefaultLimit < 1 || c.MaxLimit < c.DefaultLimit || c.MaxLimit > projection.MaxLimit {
		errs = append(errs, fmt.Errorf("httpapi: limits must satisfy 1 <= default <= max <= %d", projection.MaxLimit))
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			errs = append(errs, fmt.Errorf("httpapi: the public URL %q must be an absolute http or https URL without query or fragment", c.PublicURL))
		}
	}
	if c.WaitTimeout <= 0 {
		errs = append(errs, errors.New("httpapi: wait timeout must be positive"))
	}
	if c.MaxInFlight < 0 || c.MaxProjectInFlight < 0 {
		errs = append(errs, errors.New("httpapi: in-flight bounds must not be negative"))
	}
	if c.AuthFailures.Burst < 0 || c.AuthFailures.Every < 0 {
		errs = append(errs, errors.New("httpapi: the authentication failure rate must not be negative"))
	}
	for _, m := range c.Mounts {
		if !strings.HasPrefix(m.Prefix, "/") || m.Handler == nil {
			errs = append(errs, fmt.Errorf("httpapi: mount %q needs a prefix starting with / and a handler", m.Prefix))
		}
	}
	if c.Now == nil || c.Logger == nil {
		errs = append(errs, errors.New("httpapi: a clock and a logger are required"))
	}
	return errors.Join(errs...)
}

// Mount is a handler served under a path prefix (Config.Mounts).
type Mount struct {
	Prefix  string // "/mcp/": the paths it serves start with it
	Handler http.Handler
	// Project, if set, names the project a request path of the mount
	// belongs to: such a request counts against that project's in-flight
	// bound (Config.MaxProjectInFlight) as the API's routes do, and is
	// answered 503 with Retry-After beyond it. A path it does not know
	// (false) is under the instance's bound alone.
	Project func(path string) (project string, ok bool)
}

// Diagnostic is one item of a projection page's diagnostics.
type Diagnostic struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Server serves the coordination API over an engine (commands) and a
// projection store (reads).
type Server struct {
	engine *engine.Engine
	store  *projection.Store
	cfg    Config
	log    *slog.Logger
	push   *push // long polls and event streams (longpoll.go, sse.go)
	router *verbRouter

	shed  *shedder
	fails *faceauth.Guard // the throttle of failed authentications
}

// New returns the API server.
func New(engine *engine.Engine, store *projection.Store, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{engine: engine, store: store, cfg: cfg, log: cfg.Logger,
		shed: newShedder(cfg.MaxInFlight, cfg.MaxProjectInFlight), fails: faceauth.GuardOf(cfg.AuthGuard, cfg.AuthFailures, cfg.Now)}
	s.router = newVerbRouter(http.HandlerFunc(s.notFound), http.HandlerFunc(s.methodNotAllowed), s.panicked)
	s.push = newPush()
	s.handleRoutes()
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
		s.router.ServeHTTP(w, r)
		return
	}
	release, err := s.shed.admitInstance()
	if err != nil {
		if obs := s.cfg.Metrics.Observer; obs != nil { // shed before routing: no operationId yet
			obs.ObserveRequest(OperationShed, r.Method, http.StatusServiceUnavailable, 0)
		}
		s.writeError(w, r, err)
		return
	}
	sl := inflight.New(release)
	defer sl.ReleaseAll()
	for _, m := range s.cfg.Mounts {
		if strings.HasPrefix(r.URL.Path, m.Prefix) {
			if m.Project != nil {
				if project, ok := m.Project(r.URL.Path); ok {
					release, err := s.shed.admitProject(project)
					if err != nil {
						s.writeError(w, r, err)
						return
					}
					sl.Add(release)
				}
			}
			m.Handler.ServeHTTP(w, r.WithContext(inflight.With(r.Context(), sl)))
			return
		}
	}
	s.router.ServeHTTP(w, r.WithContext(inflight.With(r.Context(), sl)))
}

// call is one authenticated request of a project.
type call struct {
	ctx     context.Context
	r       *http.Request
	ps      httprouter.Params
	project string
	caller  kernel.Caller

	idemKey  string // the Idempotency-Key, if any (idempotency.go)
	bodyHash string // hash of the body, once read

	// inputToken is the bearer of a route that takes an input token alone
	// (access inputWait), when the request sent one instead of credentials.
	inputToken string
}

func (c *call) common(meta *kernel.Meta, trace *kernel.Trace) kernel.Common {
	return kernel.Common{Caller: c.caller, Meta: meta, Trace: trace, Idem: c.idempotency("")}
}

// id returns a path parameter that must be a safe id.
func (c *call) id(name string) (string, error) {
	v := c.ps.ByName(name)
	if !kernel.ValidID(v) {
		return "", kernel.Errorf(kernel.Validation, "%s %q must be 1 to 128 letters, digits, '_' or '-'", name, v)
	}
	return v, nil
}

type handler func(w http.ResponseWriter, c *call) error

// project wraps a handler of a project-scoped route: it checks the project
// id, authenticates the caller and writes any error.
func (s *Server) project(h handler) httprouter.Handle { return s.projectRoute(h, false) }

// projectRoute is project; with inputTokens, a bearer that is an input
// token and comes without agent headers is taken for the handler to check
// (call.inputToken) instead of being refused.
func (s *Server) projectRoute(h handler, inputTokens bool) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		c := &call{ctx: r.Context(), r: r, ps: ps, project: ps.ByName("project_id")}
		err := func() error {
			if !kernel.ValidID(c.project) {
				return kernel.Errorf(kernel.Validation, "project_id %q must be 1 to 128 letters, digits, '_' or '-'", c.project)
			}
			if err := c.readIdempotency(); err != nil {
				return err
			}
			release, err := s.shed.admitProject(c.project)
			if err != nil {
				return err
			}
			if !inflight.Hold(c.ctx, release) {
				defer release()
			}
			if tok, ok := faceauth.Bearer(r); inputTokens && ok && strings.HasPrefix(tok, engine.InputTokenPrefix) &&
				r.Header.Get(HeaderAgent) == "" && r.Header.Get(HeaderProject) == "" {
				if err := s.admit(r, c.project, "", nil); err != nil {
					return err
				}
				c.inputToken = tok
				return h(w, c)
			}
			caller, err := s.authenticate(c.ctx, r, c.project)
			if err != nil {
				return err
			}
			c.caller = caller
			c.ctx = withCaller(c.ctx, caller)
			if r.Method == http.MethodGet {
				if err := s.caughtUp(c); err != nil {
					return err
				}
			}
			return h(w, c)
		}()
		if err != nil {
			s.writeError(w, r, err)
		}
	}
}

// caughtUp makes a read see every write of the project made before it,
// through any instance: authentication (or, for the admin, a look at the
// ledger) has brought the engine up to the project's last ledger_seq, and the
// read waits for the projections to reach it too. The read's policy checks
// then use that state as it is (Engine.ViewFolded): one look at the ledger
// per read.
func (s *Server) caughtUp(c *call) error {
	if c.caller.Admin {
		if err := s.engine.View(c.ctx, c.project, func(*kernel.Project) error { return nil }); err != nil {
			return err
		}
	}
	return s.wait(c.ctx, s.engine.Folded(c.project))
}

// public wraps a handler that needs no authentication.
func (s *Server) public(h handler) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		c := &call{ctx: r.Context(), r: r, ps: ps}
		err := c.readIdempotency()
		if err == nil {
			err = h(w, c)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	}
}

// admin wraps a handler of the admin surface: the admin bearer is required.
func (s *Server) admin(h handler) httprouter.Handle {
	return s.public(func(w http.ResponseWriter, c *call) error {
		if _, ok := faceauth.Bearer(c.r); !ok {
			if msg := bearerProblem(c.r); msg != "" {
				return kernel.Errorf(kernel.Unauthorized, "%s; the admin surface requires Authorization: Bearer <admin token>", msg)
			}
			return kernel.Errorf(kernel.Unauthorized, "the admin surface requires Authorization: Bearer <admin token>")
		}
		if err := s.admit(c.r, "", "", nil); err != nil {
			return err
		}
		if !s.isAdmin(c.r) {
			s.authFailed(c.r, "", "")
			return kernel.Errorf(kernel.Unauthorized, "invalid admin bearer token")
		}
		c.caller = kernel.Caller{Admin: true}
		c.ctx = withCaller(c.ctx, c.caller)
		c.project = c.ps.ByName("project_id")
		if c.project != "" && !kernel.ValidID(c.project) {
			return kernel.Errorf(kernel.Validation, "project_id %q must be 1 to 128 letters, digits, '_' or '-'", c.project)
		}
		return h(w, c)
	})
}

// body reads the request body, refusing one over the size bound.
func (s *Server) body(c *call) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(c.r.Body, s.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, &jsonhttp.DecodeError{Msg: "cannot read request body"}
	}
	if int64(len(data)) > s.cfg.MaxBodyBytes {
		return nil, &statusError{kind: errTooLarge, msg: fmt.Sprintf("request body is larger than %d bytes", s.cfg.MaxBodyBytes)}
	}
	c.bodyHash = kernel.HashSecret(string(data))
	return data, nil
}

// decode reads the JSON body strictly into dst. With optional set, an empty
// body is accepted and leaves dst as it is.
func (s *Server) decode(c *call, dst any, optional bool) error {
	data, err := s.body(c)
	if err != nil {
		return err
	}
	if optional && len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	return jsonhttp.DecodeBytes(data, dst)
}

// raw reads the body as a JSON value without decoding it into a type.
func (s *Server) raw(c *call) ([]byte, error) {
	data, err := s.body(c)
	if err != nil {
		return nil, err
	}
	if !json.Valid(data) {
		return nil, &jsonhttp.DecodeError{Msg: "request body must be valid JSON"}
	}
	return data, nil
}

// wait blocks until the projections have folded seq, so that a client reads
// its own writes.
func (s *Server) wait(ctx context.Context, seq uint64) error {
	return unavailable(faceauth.Wait(ctx, s.store, seq, s.cfg.WaitTimeout))
}

// waitNear is wait for the answer of a command that shows nothing of the
// projections (faceauth.WaitNear).
func (s *Server) waitNear(ctx context.Context, seq uint64) error {
	return unavailable(faceauth.WaitNear(ctx, s.store, seq, s.cfg.WaitTimeout))
}

// turnAt is the Turn a command changed at seq, for the command's answer
// (faceauth.Answer).
func (s *Server) turnAt(ctx context.Context, project, turnID string, seq uint64, t *kernel.Turn) (projection.TurnView, error) {
	v, err := faceauth.Answer(ctx, s.store, project, turnID, seq, t, s.cfg.WaitTimeout)
	return v, unavailable(err)
}

// unavailable is the answer of a wait for the projections that timed out
// (faceauth.Unavailable): 503 with Retry-After; other errors pass.
func unavailable(err error) error {
	var u *faceauth.Unavailable
	if errors.As(err, &u) {
		return &statusError{kind: errUnavailable, msg: u.Msg, retryAfter: time.Second}
	}
	return err
}

func (s *Server) ok(w http.ResponseWriter, v any) error {
	jsonhttp.Write(w, http.StatusOK, v)
	return nil
}

// query reads the query string strictly: only the allowed parameters, each
// at most once.
type query struct {
	vals  map[string]string
	lists map[string][]string // the parameters that may repeat (repeatable)
}

// repeatable are the query parameters a request may give more than once.
var repeatable = map[string]bool{"tag": true}

func (s *Server) query(c *call, allowed ...string) (query, error) {
	q := query{vals: map[string]string{}, lists: map[string][]string{}}
	for k, vs := range c.r.URL.Query() {
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if !known {
			return q, kernel.Errorf(kernel.Validation, "unknown query parameter %q (allowed: %v)", k, allowed)
		}
		if repeatable[k] {
			q.lists[k] = vs
			continue
		}
		if len(vs) != 1 {
			return q, kernel.Errorf(kernel.Validation, "query parameter %q is given %d times", k, len(vs))
		}
		q.vals[k] = vs[0]
	}
	return q, nil
}

func (q query) str(name string) string { return q.vals[name] }

// id returns an optional id parameter.
func (q query) id(name string) (string, error) {
	v, ok := q.vals[name]
	if ok && !kernel.ValidID(v) {
		return "", kernel.Errorf(kernel.Validation, "%s %q must be 1 to 128 letters, digits, '_' or '-'", name, v)
	}
	return v, nil
}

func (q query) flag(name string) (bool, error) {
	v, ok := q.vals[name]
	if !ok {
		return false, nil
	}
	switch v {
	case "true", "1", "":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, kernel.Errorf(kernel.Validation, "%s must be true or false, not %q", name, v)
}

func (q query) seq(name string) (uint64, error) {
	v, ok := q.vals[name]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, kernel.Errorf(kernel.Validation, "%s must be a non-negative integer, not %q", name, v)
	}
	return n, nil
}

func (s *Server) limit(q query) (int, error) {
	v, ok := q.vals["limit"]
	if !ok {
		return s.cfg.DefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > s.cfg.MaxLimit {
		return 0, kernel.Errorf(kernel.Validation, "limit must be an integer from 1 to %d, not %q", s.cfg.MaxLimit, v)
	}
	return n, nil
}

// page is the Projection page shape, with the cursor fields of feeds.
type page struct {
	ProjectID          string       `json:"project_id"`
	Items              any          `json:"items"`
	Limit              int          `json:"limit"`
	Diagnostics        []Diagnostic `json:"diagnostics"`
	NextAfterLedgerSeq *uint64      `json:"next_after_ledger_seq,omitempty"`
	NextAfterTurnSeq   *uint64      `json:"next_after_turn_seq,omitempty"`
	HasMore            *bool        `json:"has_more,omitempty"`
}

func (s *Server) page(c *call, items any, limit int) page {
	diags := []Diagnostic{}
	if s.cfg.Diagnostics != nil {
		diags = append(diags, s.cfg.Diagnostics(c.ctx)...)
	}
	return page{ProjectID: c.project, Items: items, Limit: limit, Diagnostics: diags}
}
