package authn

import (
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/internal/throttle"
)

// Deps are the parts a Server is given.
type Deps struct {
	Store      Store            // nil only in dev mode when the database could not be opened
	Bus        Bus              // carries websocket messages; required for the websocket route
	Now        func() time.Time // default time.Now
	Rand       io.Reader        // default crypto/rand
	HTTPClient *http.Client     // for JWKS fetches; default has Config.KeyFetchTimeout
	Logf       func(format string, args ...any)
}

// Server serves the runtime routes.
type Server struct {
	cfg    Config
	auth   *Authenticator
	store  Store
	bus    Bus
	now    func() time.Time
	logf   func(string, ...any)
	sealer *sealer
	router *httprouter.Router
	fails  *throttle.Buckets // failed authentications by remote address (throttle.go)
	valid  *verifiedTokens   // credentials that skip the throttle (verified.go)

	mu      sync.Mutex
	sockets map[*socket]struct{}
	closing bool
}

// NewServer builds the server. It does not run cfg.Validate (cmd does, so
// that it can print each broken rule), but it refuses a SECRET_ENCRYPTION_KEY
// it cannot use.
func NewServer(cfg Config, d Deps) (*Server, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Rand == nil {
		d.Rand = rand.Reader
	}
	if d.Logf == nil {
		d.Logf = func(string, ...any) {}
	}
	s := &Server{
		cfg:     cfg,
		auth:    NewAuthenticator(cfg, d.Store, d.Now, d.Rand, d.HTTPClient),
		store:   d.Store,
		bus:     d.Bus,
		now:     d.Now,
		logf:    d.Logf,
		sockets: make(map[*socket]struct{}),
		fails:   throttle.New(cfg.AuthFailures, d.Now),
		valid:   newVerifiedTokens(cfg.VerifiedTokens, d.Now),
	}
	if cfg.Mode == ModeHosted && cfg.SecretEncryptionKey != "" {
		sl, err := newSealer(cfg.SecretEncryptionKey, d.Rand)
		if err != nil {
			return nil, err
		}
		s.sealer = sl
	}
	r := httprouter.New()
	r.HandleMethodNotAllowed = true
	r.HandleOPTIONS = false
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, errf(KindNotFound, "no route "+r.Method+" "+r.URL.Path))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.WriteError(w, http.StatusMethodNotAllowed, "MethodNotAllowedError", "method "+r.Method+" is not allowed on "+r.URL.Path)
	})
	r.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		s.logf("authn: panic serving %s %s: %v", r.Method, r.URL.Path, v)
		jsonhttp.WriteError(w, http.StatusInternalServerError, "InternalError", "internal error")
	}
	r.GET("/health", s.health)
	r.GET("/ready", s.ready)
	r.GET("/api/v1/auth/me", s.authed(s.me))
	r.POST("/api/v1/auth/ws-ticket", s.authed(s.wsTicket))
	r.GET("/api/v1/ws/execution", s.websocket)
	if cfg.Mode == ModeHosted {
		r.GET("/api/v1/provider-profiles", s.authed(s.listProfiles))
		r.GET("/api/v1/provider-profiles/:provider", s.authed(s.getProfile))
		r.PUT("/api/v1/provider-profiles/:provider", s.authed(s.putProfile))
		r.DELETE("/api/v1/provider-profiles/:provider", s.authed(s.deleteProfile))
	}
	s.router = r
	return s, nil
}

// ServeHTTP applies CORS and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && s.originAllowed(origin) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	s.router.ServeHTTP(w, r)
}

func (s *Server) originAllowed(origin string) bool {
	return slices.Contains(s.cfg.CORSAllowedOrigins, "*") || slices.Contains(s.cfg.CORSAllowedOrigins, strings.TrimRight(origin, "/"))
}

func (s *Server) fail(w http.ResponseWriter, err error) { writeError(w, err, s.logf) }

// authed authenticates the request and puts the principal in its context.
func (s *Server) authed(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		key, err := s.passThrottle(r, false)
		if err != nil {
			s.fail(w, err)
			return
		}
		p, until, err := s.auth.authenticate(r)
		if err != nil {
			s.authFailed(r, err, key)
			s.fail(w, err)
			return
		}
		s.authSucceeded(key, until)
		h(w, r.WithContext(WithPrincipal(r.Context(), p)), ps)
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	jsonhttp.Write(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ready reports 200 when the database (if one is required or open) and the
// bus answer, 503 otherwise, with one entry per check.
func (s *Server) ready(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	ok := true
	switch {
	case s.store != nil:
		if err := s.store.Ping(ctx); err != nil {
			checks["database"], ok = "unavailable", false
		} else {
			checks["database"] = "ok"
		}
	case s.cfg.DatabaseRequired:
		checks["database"], ok = "unavailable", false
	default:
		checks["database"] = "not configured"
	}
	if s.bus == nil {
		checks["bus"], ok = "unavailable", false
	} else if err := s.bus.Ping(ctx); err != nil {
		checks["bus"], ok = "unavailable", false
	} else {
		checks["bus"] = "ok"
	}
	status, code := "ready", http.StatusOK
	if !ok {
		status, code = "unavailable", http.StatusServiceUnavailable
	}
	jsonhttp.Write(w, code, map[string]any{"status": status, "checks": checks})
}

func (s *Server) me(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	p, ok := PrincipalFrom(r.Context())
	if !ok {
		s.fail(w, errf(KindUnauthorized, "missing authentication"))
		return
	}
	jsonhttp.Write(w, http.StatusOK, p)
}

// TicketResponse is the body of POST /api/v1/auth/ws-ticket.
type TicketResponse struct {
	Ticket    string `json:"ticket"`
	ExpiresAt string `json:"expires_at"`
}

func (s *Server) wsTicket(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	p, ok := PrincipalFrom(r.Context())
	if !ok {
		s.fail(w, errf(KindUnauthorized, "missing authentication"))
		return
	}
	// No body is defined: accept none, or an empty JSON object.
	body, err := io.ReadAll(io.LimitReader(r.Body, 1025))
	if err != nil {
		s.fail(w, errf(KindInvalid, "cannot read request body"))
		return
	}
	if b := strings.TrimSpace(string(body)); b != "" && b != "{}" {
		s.fail(w, errf(KindInvalid, "this endpoint takes no request body (or {})"))
		return
	}
	t, exp, err := s.auth.IssueTicket(r.Context(), p)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.valid.put(credentialKey(keyTicket, t), exp)
	w.Header().Set("Cache-Control", "no-store")
	jsonhttp.Write(w, http.StatusOK, TicketResponse{Ticket: t, ExpiresAt: exp.UTC().Format(time.RFC3339)})
}

// Close closes every open websocket; the caller shuts the HTTP server down.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closing = true
	socks := make([]*socket, 0, len(s.sockets))
	for k := range s.sockets {
		socks = append(socks, k)
	}
	s.mu.Unlock()
	for _, k := range socks {
		k.close("server shutting down")
	}
	return nil
}
