package mcpapi

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/kernel"
)

// Resource URIs of a Turn.
const (
	turnURIPrefix   = "turnledger://turns/"
	contextSuffix   = "/context"
	turnTemplate    = "turnledger://turns/{turn_id}"
	contextTemplate = "turnledger://turns/{turn_id}/context"
)

func (h *Handler) addResources() {
	h.server.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: turnTemplate, Name: "turn", Title: "Turn snapshot", MIMEType: "application/json",
		Description: "The Turn's snapshot, as get_turn answers it. Subscribe to be told when the Turn changes.",
	}, h.readResource)
	h.server.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: contextTemplate, Name: "turn-context", Title: "Turn context", MIMEType: "application/json",
		Description: "The first page of the Turn's semantic records, as get_turn_context answers it. Subscribe to be told when the Turn changes.",
	}, h.readResource)
}

// turnOfURI reads the Turn id of a resource URI and whether it is the
// context's.
func turnOfURI(uri string) (turnID string, isContext, ok bool) {
	rest, ok := strings.CutPrefix(uri, turnURIPrefix)
	if !ok {
		return "", false, false
	}
	rest, isContext = strings.CutSuffix(rest, contextSuffix)
	return rest, isContext, kernel.ValidID(rest)
}

func (h *Handler) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	turnID, isContext, ok := turnOfURI(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	id, err := identityFrom(ctx)
	if err != nil {
		return nil, h.rpcError(err)
	}
	var v any
	if isContext {
		v, err = h.contextPage(ctx, id, turnID, 0, h.cfg.DefaultLimit)
	} else {
		v, err = h.readTurn(ctx, id, turnID)
	}
	if err != nil {
		if kernel.ErrorKind(err) == kernel.NotFound || isNotFound(err) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, h.rpcError(err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(data)}}}, nil
}

// maxCompletions is how many values a completion answers at most (MCP's
// limit for completion/complete).
const maxCompletions = 100

// complete answers completion/complete. The turn_id of the Turn resource
// templates completes to the ids of the Turns the endpoint's agent may read
// that begin with what was typed, newest first (projection.Store.TurnIDs),
// hasMore set when there may be more. Another argument of a template
// completes to nothing; a prompt (there are none) or another template is
// refused as invalid params.
func (h *Handler) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := req.Params
	if p.Ref == nil || p.Ref.Type != "ref/resource" || (p.Ref.URI != turnTemplate && p.Ref.URI != contextTemplate) {
		what := "no reference"
		if p.Ref != nil {
			what = p.Ref.Type + " " + p.Ref.Name + p.Ref.URI
		}
		return nil, h.rpcError(kernel.Errorf(kernel.Validation,
			"%s has nothing to complete: completions are served for the turn_id of %s and %s", what, turnTemplate, contextTemplate))
	}
	res := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
	typed := p.Argument.Value
	if p.Argument.Name != "turn_id" || (typed != "" && !kernel.ValidID(typed)) {
		return res, nil // no Turn id begins so
	}
	id, err := identityFrom(ctx)
	if err != nil {
		return nil, h.rpcError(err)
	}
	if err := h.caughtUp(ctx, id); err != nil {
		return nil, h.rpcError(err)
	}
	visibleTo, err := h.engine.TurnsVisibleTo(ctx, id.project, id.caller)
	if err != nil {
		return nil, h.rpcError(err)
	}
	ids, more, err := h.store.TurnIDs(id.project, visibleTo, typed, maxCompletions)
	if err != nil {
		return nil, h.rpcError(err)
	}
	res.Completion.Values, res.Completion.HasMore = ids, more
	return res, nil
}

func isNotFound(err error) bool {
	name, _ := faceauth.ErrorBody(discard, err)
	return name == kernel.NotFound
}

// rpcError is a refusal as a JSON-RPC error (outside tools, which answer
// refusals as results): invalid params for the client's mistakes, internal
// error otherwise, with the {error, message} body as data.
func (h *Handler) rpcError(err error) error {
	name, msg := faceauth.ErrorBody(h.cfg.Logger, err)
	data, _ := json.Marshal(jsonhttp.ErrorBody{Error: string(name), Message: msg})
	code := int64(jsonrpc.CodeInvalidParams)
	if name == kernel.Internal || name == kernel.Unavailable {
		code = jsonrpc.CodeInternalError
	}
	return &jsonrpc.Error{Code: code, Message: msg, Data: data}
}

// subscriptions watch the Turns that sessions subscribed to, one watch per
// resource URI of a project, and tell the SDK (which tells the subscribed
// sessions) when the Turn changes.
type subscriptions struct {
	h       *Handler
	mu      sync.Mutex
	watches map[string]*turnWatch // by project and URI
}

type turnWatch struct {
	sessions map[*mcp.ServerSession]bool
	cancel   context.CancelFunc
}

func newSubscriptions(h *Handler) *subscriptions {
	return &subscriptions{h: h, watches: map[string]*turnWatch{}}
}

func (s *subscriptions) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	turnID, _, ok := turnOfURI(uri)
	if !ok {
		return mcp.ResourceNotFoundError(uri)
	}
	id, err := identityFrom(ctx)
	if err != nil {
		return s.h.rpcError(err)
	}
	v, err := s.h.readTurn(ctx, id, turnID)
	if err != nil {
		if isNotFound(err) {
			return mcp.ResourceNotFoundError(uri)
		}
		return s.h.rpcError(err)
	}
	key := id.project + "\x00" + uri
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.watches[key]
	if w == nil {
		wctx, cancel := context.WithCancel(context.Background())
		w = &turnWatch{sessions: map[*mcp.ServerSession]bool{}, cancel: cancel}
		s.watches[key] = w
		go s.watch(wctx, id.project, turnID, uri, v.LedgerSeq)
	}
	if !w.sessions[req.Session] {
		w.sessions[req.Session] = true
		go func(ss *mcp.ServerSession) {
			ss.Wait()
			s.drop(key, ss)
		}(req.Session)
	}
	return nil
}

func (s *subscriptions) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	id, err := identityFrom(ctx)
	if err != nil {
		return s.h.rpcError(err)
	}
	s.drop(id.project+"\x00"+req.Params.URI, req.Session)
	return nil
}

// drop ends a session's subscription, and the watch with its last one.
func (s *subscriptions) drop(key string, ss *mcp.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.watches[key]
	if w == nil || !w.sessions[ss] {
		return
	}
	delete(w.sessions, ss)
	if len(w.sessions) == 0 {
		w.cancel()
		delete(s.watches, key)
	}
}

// watch sends notifications/resources/updated for uri each time the Turn's
// ledger_seq moves past last, the one it had when the subscription was
// answered (read there, not here: a change between the answer and this
// goroutine's start would otherwise go unnotified), waking on the
// projection's commits (never polling).
func (s *subscriptions) watch(ctx context.Context, project, turnID, uri string, last uint64) {
	for {
		changed, stop := s.h.store.WatchProject(project)
		if v, err := s.h.store.Turn(project, turnID); err == nil && v.LedgerSeq != last {
			last = v.LedgerSeq
			s.h.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
		select {
		case <-changed:
			stop()
			if s.h.store.Closed() {
				return
			}
		case <-ctx.Done():
			stop()
			return
		}
	}
}
