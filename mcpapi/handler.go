package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/internal/inflight"
	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/internal/reqlog"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// Paths served: mount the Handler under both prefixes.
const (
	PathPrefix     = "/mcp/"
	MetadataPrefix = "/.well-known/oauth-protected-resource/mcp/"
)

// endpointPattern is the route of the request log.
const endpointPattern = "/mcp/projects/{project_id}/agents/{agent_id}"

// newProtocol is the first stateless protocol version.
const newProtocol = "2026-07-28"

// Version is the serverInfo version.
const Version = "1"

// Handler serves the MCP endpoints and their resource metadata.
type Handler struct {
	engine *engine.Engine
	store  *projection.Store
	cfg    Config
	guard  *faceauth.Guard
	server *mcp.Server
	mcp    http.Handler // the SDK's Streamable HTTP handler, behind the bearer check
	tools  []*mcp.Tool  // in the order of tools/list
	subs   *subscriptions

	// stopCtx is cancelled by StopWaiting: waiting claims answer and
	// streams end.
	stopCtx context.Context
	stopAll context.CancelFunc
	claims  atomic.Int64 // claim_turn calls waiting now
	streams atomic.Int64 // GET and subscriptions/listen streams open now
}

// New returns the MCP handler over an engine (commands) and a projection
// store (reads).
func New(e *engine.Engine, store *projection.Store, cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{engine: e, store: store, cfg: cfg, guard: faceauth.GuardOf(cfg.AuthGuard, cfg.AuthFailures, cfg.Now)}
	h.stopCtx, h.stopAll = context.WithCancel(context.Background())
	h.subs = newSubscriptions(h)
	h.server = mcp.NewServer(&mcp.Implementation{Name: "turnledger", Title: "turnledger", Version: Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       cfg.Logger,
		Capabilities: &mcp.ServerCapabilities{
			// The SDK answers prompts/list (with no prompts) whatever the
			// capabilities say; 2026-07-28 asks a server to declare every
			// method it handles in server/discover.
			Prompts:     &mcp.PromptCapabilities{},
			Tools:       &mcp.ToolCapabilities{},
			Resources:   &mcp.ResourceCapabilities{Subscribe: true},
			Completions: &mcp.CompletionCapabilities{},
			Extensions:  map[string]any{TasksExtension: map[string]any{}},
		},
		CompletionHandler:  h.complete,
		SubscribeHandler:   h.subs.subscribe,
		UnsubscribeHandler: h.subs.unsubscribe,
	})
	h.addTools()
	h.addResources()
	h.server.AddReceivingMiddleware(h.identityMiddleware, h.listenMiddleware, h.toolsListMiddleware, h.tasksMiddleware)
	if err := h.addTaskMethods(); err != nil {
		return nil, err
	}
	getServer := func(*http.Request) *mcp.Server { return h.server }
	opts := mcp.StreamableHTTPOptions{
		Logger:              cfg.Logger,
		MaxRequestBodyBytes: cfg.MaxBodyBytes,
		// The Origin check is ours (checkOrigin), and the Host check of the
		// SDK refuses names other than localhost on a loopback listener,
		// which a proxy in front of serve sends.
		DisableLocalhostProtection: true,
	}
	// The SDK serves 2026-07-28 only on a stateless handler and keeps
	// sessions (2025-11-25 and before) only on a stateful one: a request
	// goes to one or the other by its MCP-Protocol-Version header, which a
	// 2026-07-28 client sends on every request and an older one never sends
	// at that version.
	stateful := mcp.NewStreamableHTTPHandler(getServer, &opts)
	statelessOpts := opts
	statelessOpts.Stateless = true
	stateless := mcp.NewStreamableHTTPHandler(getServer, &statelessOpts)
	streamable := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("MCP-Protocol-Version") >= newProtocol {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
	h.mcp = auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		id, ok := ctx.Value(identityKey{}).(identity)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: id.project + "/" + id.agent, Extra: map[string]any{extraIdentity: id}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	return h, nil
}

const instructions = `turnledger coordinates work between agents as Turns: a requester dispatches a Turn to a target agent (dispatch_turn); the target claims it (claim_turn), records progress (append_record), keeps its claim alive (renew_claim), may suspend it to wait for input (suspend_turn), and finishes it (finish_turn). Read Turns with get_turn, get_turn_context, list_turns and read_feed. You act as the agent of this endpoint's URL.`

// identity is who calls: the endpoint's project and agent, and the caller
// the engine authenticated.
type identity struct {
	project, agent string
	caller         kernel.Caller
	base           string // scheme://host the server is reached at (the input_url's base)
	// detach gives back the in-flight slots of the HTTP request (the
	// instance's and the project's) when the request starts to wait.
	detach func()
}

type identityKey struct{}

const extraIdentity = "turnledger.identity"

// identityMiddleware puts the identity of each request (from the token info
// the HTTP layer set) in the context of its handler.
func (h *Handler) identityMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
			if id, ok := ex.TokenInfo.Extra[extraIdentity].(identity); ok {
				ctx = context.WithValue(ctx, identityKey{}, id)
			}
		}
		return next(ctx, method, req)
	}
}

// identityFrom returns the caller the HTTP layer authenticated; a missing
// one is an error, never a default.
func identityFrom(ctx context.Context) (identity, error) {
	id, ok := ctx.Value(identityKey{}).(identity)
	if !ok {
		return identity{}, kernel.Errorf(kernel.Unauthorized, "no authenticated caller")
	}
	return id, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, MetadataPrefix); ok {
		project, agent, ok := endpointOf(rest)
		if !ok {
			writeError(w, http.StatusNotFound, kernel.NotFound, "no MCP endpoint at "+r.URL.Path)
			return
		}
		h.serveMetadata(w, r, project, agent)
		return
	}
	rest, _ := strings.CutPrefix(r.URL.Path, PathPrefix)
	project, agent, ok := endpointOf(rest)
	if !ok {
		writeError(w, http.StatusNotFound, kernel.NotFound, "no MCP endpoint at "+r.URL.Path+"; the endpoint is "+endpointPattern)
		return
	}
	if reqlog.Active(r) {
		reqlog.Route(r, endpointPattern, project)
	}
	if err := h.checkOrigin(r); err != nil {
		writeError(w, http.StatusForbidden, kernel.Forbidden, err.Error())
		return
	}
	caller, err := h.authenticate(r, project, agent)
	if err != nil {
		h.writeAuthError(w, r, project, agent, err)
		return
	}
	// Long polls (claim_turn's wait_s) and event streams outlive the
	// server's read and write timeouts, which count from the request's start.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	if r.Method == http.MethodGet {
		_ = rc.SetWriteDeadline(time.Time{})
	} else {
		_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.MaxClaimWait + h.cfg.WaitTimeout + 10*time.Second))
	}
	reqCtx := r.Context()
	id := identity{project: project, agent: agent, caller: caller, base: h.base(r), detach: func() { inflight.Detach(reqCtx) }}
	ctx := context.WithValue(reqCtx, identityKey{}, id)
	if r.Method == http.MethodGet || r.Header.Get("Mcp-Method") == methodListen {
		// A stream (2025-11-25's GET, 2026-07-28's subscriptions/listen)
		// lasts until the client leaves, or until StopWaiting.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(h.stopCtx, cancel)()
	}
	if r.Method == http.MethodGet {
		// The GET stream only carries what the server sends: it waits,
		// holding no slot, as the HTTP API's event streams do.
		id.detach()
		h.streams.Add(1)
		defer h.streams.Add(-1)
	}
	h.mcp.ServeHTTP(w, r.WithContext(ctx))
}

// methodListen is the 2026-07-28 method of a subscription stream.
const methodListen = "subscriptions/listen"

// listenMiddleware gives back the in-flight slots of a subscriptions/listen
// request, which waits for notifications until the client leaves, and counts
// it as a stream meanwhile.
func (h *Handler) listenMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != methodListen {
			return next(ctx, method, req)
		}
		if id, err := identityFrom(ctx); err == nil && id.detach != nil {
			id.detach()
		}
		h.streams.Add(1)
		defer h.streams.Add(-1)
		return next(ctx, method, req)
	}
}

// StopWaiting ends every waiting claim_turn (it answers nothing claimed) and
// every stream, and makes later ones end at once: call it when the server
// shuts down, since http.Server.Shutdown waits for active requests
// (httpapi.Server.StopWaiting does the same for the HTTP API).
func (h *Handler) StopWaiting() { h.stopAll() }

// Waiting reports how many claim_turn calls wait and how many streams (GET
// and subscriptions/listen) are open now: they hold no in-flight slot.
func (h *Handler) Waiting() (claims, streams int64) {
	return h.claims.Load(), h.streams.Load()
}

// ProjectOf returns the project of a path of an MCP endpoint
// (/mcp/projects/{project_id}/agents/{agent_id}), for the HTTP layer to
// count the request against that project's in-flight bound
// (httpapi.Mount.Project). Other paths (the resource metadata) have none.
func ProjectOf(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, PathPrefix)
	if !ok {
		return "", false
	}
	project, _, ok := endpointOf(rest)
	return project, ok
}

// endpointOf reads "projects/{p}/agents/{a}".
func endpointOf(rest string) (project, agent string, ok bool) {
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[2] != "agents" || !kernel.ValidID(parts[1]) || !kernel.ValidID(parts[3]) {
		return "", "", false
	}
	return parts[1], parts[3], true
}

// base is the scheme and host the server is reached at.
func (h *Handler) base(r *http.Request) string { return faceauth.BaseURL(r, h.cfg.PublicURL) }

// checkOrigin refuses a browser request from an origin that is neither the
// server's own nor an allowed one.
//
// The server's own origin is that of Config.PublicURL, or the request's
// Host when it is an IP address or localhost. A Host that is any other DNS
// name proves nothing: in a DNS rebinding attack the attacker's name
// resolves to this server, and the browser sends that name as Host and the
// attacker's page as Origin, the two agreeing. Such a name is trusted only
// as the public URL's or as an allowed origin.
func (h *Handler) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	var own []string
	if hostIsAddress(r.Host) {
		own = append(own, scheme+"://"+r.Host)
	}
	if h.cfg.PublicURL != "" {
		own = append(own, originOf(h.cfg.PublicURL))
	}
	if slices.Contains(own, origin) || slices.Contains(h.cfg.AllowedOrigins, origin) {
		return nil
	}
	return fmt.Errorf("origin %s is not allowed to call this endpoint (allow it with --mcp-allowed-origin, or name serve's URL with --public-url)", origin)
}

// hostIsAddress reports whether a Host header names the server by an IP
// address or as localhost, names no DNS lookup can point elsewhere.
func hostIsAddress(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return strings.EqualFold(host, "localhost")
}

// originOf is the scheme://host of an absolute URL.
func originOf(u string) string {
	scheme, rest, _ := strings.Cut(u, "://")
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host
}

// authenticate checks the agent headers against the path, the throttle, and
// the bearer credential of the path's agent, as the HTTP API does
// (httpapi/auth.go, httpapi/protect.go).
func (h *Handler) authenticate(r *http.Request, project, agent string) (kernel.Caller, error) {
	if err := faceauth.CheckHeaders(r, project); err != nil {
		return kernel.Caller{}, err
	}
	if ha := r.Header.Get(faceauth.HeaderAgent); ha != "" && ha != agent {
		return kernel.Caller{}, kernel.Errorf(kernel.Forbidden, "%s %q does not match agent %s of the path", faceauth.HeaderAgent, ha, agent)
	}
	token, ok := faceauth.Bearer(r)
	// A credential the engine knows is served whoever else fails here.
	if err := h.guard.Admit(r, project, agent, func() bool { return ok && h.engine.KnownCredential(project, agent, token) }); err != nil {
		return kernel.Caller{}, err
	}
	if !ok {
		h.guard.Fail(r, project, agent)
		return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "missing Authorization: Bearer <agent credential token> of agent %s", agent)
	}
	c, err := h.engine.Authenticate(r.Context(), project, agent, token)
	if err != nil && kernel.ErrorKind(err) == kernel.Unauthorized {
		h.guard.Fail(r, project, agent)
	}
	return c, err
}

func (h *Handler) metadataURL(r *http.Request, project, agent string) string {
	return h.base(r) + MetadataPrefix + "projects/" + project + "/agents/" + agent
}

// writeAuthError answers a refused authentication.
func (h *Handler) writeAuthError(w http.ResponseWriter, r *http.Request, project, agent string, err error) {
	faceauth.WriteRefusal(w, h.cfg.Logger, err, fmt.Sprintf("Bearer resource_metadata=%q", h.metadataURL(r, project, agent)))
}

// serveMetadata answers the RFC 9728 protected resource metadata of an
// endpoint.
func (h *Handler) serveMetadata(w http.ResponseWriter, r *http.Request, project, agent string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowedError", "method "+r.Method+" is not allowed")
		return
	}
	base := h.base(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	json.NewEncoder(w).Encode(map[string]any{
		"resource":                 base + "/mcp/projects/" + project + "/agents/" + agent,
		"resource_name":            "turnledger MCP endpoint of agent " + agent + " in project " + project,
		"authorization_servers":    []string{},
		"bearer_methods_supported": []string{"header"},
		"resource_documentation": "Tokens are turnledger agent credential tokens, sent as Authorization: Bearer <token>. " +
			"There is no OAuth authorization server to discover: an operator issues a credential with the admin surface " +
			"(POST /admin/v1/projects/{project_id}/agent-credential-tokens:request) or the agent redeems a join invite " +
			"(POST /admin/v1/agent-joins:redeem). See docs/mcp.md.",
	})
}

func writeError(w http.ResponseWriter, status int, kind kernel.Kind, msg string) {
	jsonhttp.WriteError(w, status, string(kind), msg)
}
