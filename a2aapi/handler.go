package a2aapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/internal/reqlog"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// PathPrefix is the prefix of every A2A path: mount the Handler under it.
const PathPrefix = "/a2a/"

// CardPath is the Agent Card's path under an agent's base URL.
const CardPath = "/.well-known/agent-card.json"

// endpointPattern is the route of the request log.
const endpointPattern = "/a2a/projects/{project_id}/agents/{agent_id}"

// JSON-RPC methods served by this package rather than the SDK: the
// streams, whose frames carry the ledger_seq as their id.
const (
	methodStream    = "SendStreamingMessage"
	methodSubscribe = "SubscribeToTask"
)

// Handler serves the A2A endpoints of every agent.
type Handler struct {
	engine   *engine.Engine
	store    *projection.Store
	cfg      Config
	guard    *faceauth.Guard
	jsonrpc  http.Handler // the SDK's JSON-RPC binding over service
	rest     http.Handler // the SDK's HTTP+JSON binding over service
	svc      *service
	stopping chan struct{}
	stopOnce sync.Once
}

// New returns the A2A handler over an engine (commands) and a projection
// store (reads).
func New(e *engine.Engine, store *projection.Store, cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{engine: e, store: store, cfg: cfg, guard: faceauth.GuardOf(cfg.AuthGuard, cfg.AuthFailures, cfg.Now), stopping: make(chan struct{})}
	h.svc = &service{h: h}
	opts := []a2asrv.TransportOption{a2asrv.WithTransportPanicHandler(func(r any) error {
		cfg.Logger.Error("a2a handler panicked", "panic", r)
		return a2a.ErrInternalError
	})}
	h.jsonrpc = a2asrv.NewJSONRPCHandler(h.svc, opts...)
	h.rest = a2asrv.NewRESTHandler(h.svc, opts...)
	return h, nil
}

// identity is who calls which endpoint: the path's project and agent (the
// A2A agent), and the caller the bearer token authenticated.
type identity struct {
	project, agent string
	caller         kernel.Caller
	base           string // the agent's base URL
}

type identityKey struct{}

// identityFrom returns the caller the HTTP layer authenticated; a missing
// one is an error, never a default.
func identityFrom(ctx context.Context) (identity, error) {
	id, ok := ctx.Value(identityKey{}).(identity)
	if !ok {
		return identity{}, a2a.NewError(a2a.ErrUnauthenticated, "no authenticated caller")
	}
	return id, nil
}

func (id identity) ref() kernel.AgentRef {
	return kernel.AgentRef{ProjectID: id.project, AgentID: id.caller.AgentID}
}

// ProjectOf returns the project of an A2A path, for the HTTP layer to count
// the request against that project's in-flight bound
// (httpapi.Mount.Project).
func ProjectOf(path string) (string, bool) {
	project, _, _, ok := endpointOf(path)
	return project, ok
}

// endpointOf reads "/a2a/projects/{p}/agents/{a}" and what follows it.
func endpointOf(path string) (project, agent, rest string, ok bool) {
	tail, found := strings.CutPrefix(path, PathPrefix)
	if !found {
		return "", "", "", false
	}
	parts := strings.SplitN(tail, "/", 5)
	if len(parts) < 4 || parts[0] != "projects" || parts[2] != "agents" || !kernel.ValidID(parts[1]) || !kernel.ValidID(parts[3]) {
		return "", "", "", false
	}
	if len(parts) == 5 {
		rest = "/" + parts[4]
	}
	return parts[1], parts[3], rest, true
}

// StopWaiting ends every stream (serve calls it on shutdown).
func (h *Handler) StopWaiting() {
	h.stopOnce.Do(func() { close(h.stopping) })
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	project, agent, rest, ok := endpointOf(r.URL.Path)
	if !ok {
		writeError(w, http.StatusNotFound, kernel.NotFound, "no A2A agent at "+r.URL.Path+"; an agent's base URL is "+endpointPattern)
		return
	}
	if reqlog.Active(r) {
		reqlog.Route(r, endpointPattern+routeOf(rest), project)
	}
	caller, err := h.authenticate(r, project, agent)
	if err != nil {
		faceauth.WriteRefusal(w, h.cfg.Logger, err, `Bearer realm="turnledger"`)
		return
	}
	// A blocking SendMessage (Config.SendWait) and the streams outlive the
	// server's read and write timeouts, which count from the request's
	// start; streams set a deadline per write of their own.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.SendWait + 2*h.cfg.WaitTimeout + 10*time.Second))
	id := identity{project: project, agent: agent, caller: caller, base: h.base(r) + "/a2a/projects/" + project + "/agents/" + agent}
	ctx := context.WithValue(r.Context(), identityKey{}, id)
	r = r.WithContext(ctx)
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
	}
	switch {
	case rest == CardPath:
		h.serveCard(w, r, id)
	case rest == "":
		h.serveJSONRPC(w, r, id)
	case rest == "/message:stream" && r.Method == http.MethodPost:
		body, ok := readBody(w, r, h.cfg.MaxBodyBytes)
		if !ok {
			return
		}
		var req a2a.SendMessageRequest
		perr := json.Unmarshal(body, &req)
		h.stream(w, r, body, rest, id, nil, func(ctx context.Context) (string, uint64, error) {
			if perr != nil {
				return "", 0, a2a.NewError(a2a.ErrInvalidParams, "the body must be a SendMessageRequest: "+perr.Error())
			}
			return h.svc.startStream(ctx, &req)
		})
	case strings.HasPrefix(rest, "/tasks/") && strings.HasSuffix(rest, ":subscribe") && (r.Method == http.MethodPost || r.Method == http.MethodGet):
		body, ok := readBody(w, r, h.cfg.MaxBodyBytes)
		if !ok {
			return
		}
		taskID := strings.TrimSuffix(strings.TrimPrefix(rest, "/tasks/"), ":subscribe")
		h.stream(w, r, body, rest, id, nil, func(ctx context.Context) (string, uint64, error) { return h.svc.startSubscribe(ctx, taskID) })
	default:
		// The SDK's HTTP+JSON binding serves the rest at paths relative to
		// the base URL.
		r2 := r.Clone(ctx)
		r2.URL.Path, r2.URL.RawPath = rest, ""
		h.rest.ServeHTTP(w, r2)
	}
}

// routeOf is the route of the request log for the path after an agent's
// base URL: task ids are not part of it.
func routeOf(rest string) string {
	tail, ok := strings.CutPrefix(rest, "/tasks/")
	if !ok || tail == "" {
		return rest
	}
	if i := strings.IndexAny(tail, ":/"); i >= 0 {
		return "/tasks/{task_id}" + tail[i:]
	}
	return "/tasks/{task_id}"
}

// serveJSONRPC hands a JSON-RPC request to the SDK, but for the streaming
// methods, which are served here.
func (h *Handler) serveJSONRPC(w http.ResponseWriter, r *http.Request, id identity) {
	if r.Method != http.MethodPost {
		h.jsonrpc.ServeHTTP(w, r)
		return
	}
	body, ok := readBody(w, r, h.cfg.MaxBodyBytes)
	if !ok {
		return
	}
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      any             `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &env) != nil || env.JSONRPC != "2.0" || env.Method != methodStream && env.Method != methodSubscribe {
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.jsonrpc.ServeHTTP(w, r)
		return
	}
	var start streamStart
	switch env.Method {
	case methodStream:
		var req a2a.SendMessageRequest
		err := json.Unmarshal(env.Params, &req)
		start = func(ctx context.Context) (string, uint64, error) {
			if err != nil {
				return "", 0, a2a.NewError(a2a.ErrInvalidParams, "params must be a SendMessageRequest: "+err.Error())
			}
			return h.svc.startStream(ctx, &req)
		}
	default:
		var req a2a.SubscribeToTaskRequest
		err := json.Unmarshal(env.Params, &req)
		start = func(ctx context.Context) (string, uint64, error) {
			if err != nil {
				return "", 0, a2a.NewError(a2a.ErrInvalidParams, "params must be a SubscribeToTaskRequest: "+err.Error())
			}
			return h.svc.startSubscribe(ctx, string(req.ID))
		}
	}
	h.stream(w, r, body, "", id, &rpcFrame{id: env.ID}, start)
}

// readBody reads a request body within the bound, or answers 413.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, bool) {
	if r.Body == nil {
		return nil, true
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, kernel.Validation, fmt.Sprintf("the request body must be at most %d bytes", max))
		return nil, false
	}
	return body, true
}

// base is the scheme and host the server is reached at.
func (h *Handler) base(r *http.Request) string { return faceauth.BaseURL(r, h.cfg.PublicURL) }

// authenticate checks the identity headers, the throttle and the bearer
// token, which names the calling agent of the path's project; the
// X-Svc-* headers, when sent, must match. The throttle is that of the HTTP
// API and the MCP endpoint, keyed by address and by the endpoint's agent.
func (h *Handler) authenticate(r *http.Request, project, agent string) (kernel.Caller, error) {
	if err := faceauth.CheckHeaders(r, project); err != nil {
		return kernel.Caller{}, err
	}
	token, ok := faceauth.Bearer(r)
	if err := h.guard.Admit(r, project, agent, func() bool { return ok && h.engine.KnownToken(project, token) }); err != nil {
		return kernel.Caller{}, err
	}
	if !ok {
		h.guard.Fail(r, project, agent)
		return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "missing Authorization: Bearer <agent credential token> of an agent of project %s", project)
	}
	c, err := h.engine.AuthenticateToken(r.Context(), project, token)
	if err != nil {
		if kernel.ErrorKind(err) == kernel.Unauthorized {
			h.guard.Fail(r, project, agent)
		}
		return c, err
	}
	if ha := r.Header.Get(faceauth.HeaderAgent); ha != "" && ha != c.AgentID {
		return kernel.Caller{}, kernel.Errorf(kernel.Forbidden, "%s %q does not match the agent of the token", faceauth.HeaderAgent, ha)
	}
	return c, nil
}

func writeError(w http.ResponseWriter, status int, kind kernel.Kind, msg string) {
	jsonhttp.WriteError(w, status, string(kind), msg)
}

// a2aError is the A2A error of a refusal of the engine or the projections:
//
//	NotFoundError                   TaskNotFoundError
//	ValidationError, KernelError    InvalidParamsError
//	UnauthorizedError               unauthenticated
//	ForbiddenError                  permission denied
//	InvariantError, ConflictError,  UnsupportedOperationError (a drained,
//	FencingError                    disabled or non-accepting agent, a
//	                                dispatch key reused with another message)
//	ServiceUnavailableError,        InternalError
//	InternalError
//
// The message is the engine's.
func (h *Handler) a2aError(err error) error {
	var ae *a2a.Error
	if errors.As(err, &ae) {
		return err
	}
	kind, msg := faceauth.ErrorBody(h.cfg.Logger, err)
	var base error
	switch kind {
	case kernel.NotFound:
		base = a2a.ErrTaskNotFound
	case kernel.Validation, kernel.BadRequest:
		base = a2a.ErrInvalidParams
	case kernel.Unauthorized:
		base = a2a.ErrUnauthenticated
	case kernel.Forbidden:
		base = a2a.ErrUnauthorized
	case kernel.Invariant, kernel.Conflict, kernel.Fencing:
		base = a2a.ErrUnsupportedOperation
	default:
		base = a2a.ErrInternalError
	}
	return a2a.NewError(base, msg).WithDetails(map[string]any{"error": string(kind)})
}

// wait blocks until the projections committed seq.
func (h *Handler) wait(ctx context.Context, seq uint64) error {
	return faceauth.Wait(ctx, h.store, seq, h.cfg.WaitTimeout)
}
