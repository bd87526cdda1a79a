package a2aapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/internal/inflight"
	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// Streams (SendStreamingMessage, SubscribeToTask) are the Turn's feed, one
// SSE frame per Turn event, read as the HTTP API's event streams read it
// (httpapi/sse.go): page by page under a watch of the project taken before
// each read, then waiting on the projection's notification.
//
//	id: <ledger_seq>
//	data: <a StreamResponse; in a JSON-RPC response for the JSON-RPC binding>
//
// The first frame of a Turn (turn.dispatched) is the task; a record with
// role "artifact" is an artifact update; every other event is a status
// update with the task's state after it (the kernel's own fold of the
// events, kernel.EvolveTurn), and a message when the event carries one (a
// record, an input provided, a prompt, the final payload). Each event's
// metadata holds its ledger_seq and type. The stream ends after the event
// that finishes the Turn; a wait for input does not end it.
//
// A request with Last-Event-ID: <ledger_seq> continues after it: a
// reconnect gets no gap and no duplicate, on any instance, since the
// frames are the ledger's. (A2A's own streams carry no id; this is
// turnledger's extension, ResumeExtension.) For SendStreamingMessage the
// message is sent again: its messageId makes it the same task.

// rpcFrame is the JSON-RPC request a stream answers.
type rpcFrame struct{ id any }

// streamStart begins a stream: the Turn and the ledger_seq to wait for.
type streamStart func(ctx context.Context) (turnID string, seq uint64, err error)

// stream serves a stream of the Turn that start names. A refusal before
// the first frame is handed to the SDK's binding (through the context),
// which writes it as the binding writes every error.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, body []byte, rest string, id identity, rpc *rpcFrame, start streamStart) {
	ctx := r.Context()
	after, err := lastEventID(r)
	var turnID string
	var seq uint64
	if err == nil {
		turnID, seq, err = start(ctx)
	}
	if err == nil {
		err = h.wait(ctx, seq)
	}
	if err != nil {
		r2 := r.Clone(context.WithValue(ctx, streamErrKey{}, h.a2aError(err)))
		r2.Body = io.NopCloser(bytes.NewReader(body))
		if rpc != nil {
			h.jsonrpc.ServeHTTP(w, r2)
			return
		}
		r2.URL.Path, r2.URL.RawPath = rest, ""
		h.rest.ServeHTTP(w, r2)
		return
	}
	rc := http.NewResponseController(w)
	// Lift the server's read deadline: it counts from the start of the
	// request, and its expiry would cancel the stream's context.
	_ = rc.SetReadDeadline(time.Time{})
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	inflight.Detach(ctx) // a stream waits on notifications: its slots go back
	w.WriteHeader(http.StatusOK)

	var buf bytes.Buffer
	send := func() bool {
		rc.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		if err == nil {
			err = rc.Flush()
		}
		return err == nil
	}
	fail := func(err error) {
		if ctx.Err() != nil {
			return
		}
		err = h.a2aError(err)
		if rpc != nil {
			data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rpc.id, "error": rpcError(err)})
			buf.WriteString("data: ")
			buf.Write(data)
		} else {
			kind, msg := faceauth.ErrorBody(h.cfg.Logger, err)
			data, _ := json.Marshal(jsonhttp.ErrorBody{Error: string(kind), Message: msg})
			buf.WriteString("event: error\ndata: ")
			buf.Write(data)
		}
		buf.WriteString("\n\n")
		send()
	}
	buf.WriteString(": events of task " + turnID + " after ledger_seq " + strconv.FormatUint(after, 10) + "\n\n")
	if !send() {
		return
	}
	var t *kernel.Turn // the Turn folded from its events so far
	read := uint64(0)  // the last event folded
	heartbeat := time.NewTicker(h.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	for {
		changed, stop := h.store.WatchProject(id.project)
		for {
			pg, err := h.store.TurnFeed(id.project, turnID, read, 500)
			if err != nil {
				stop()
				fail(err)
				return
			}
			for _, it := range pg.Items {
				rec, err := recordedOf(it)
				if err != nil {
					stop()
					fail(err)
					return
				}
				t = kernel.EvolveTurn(t, rec)
				read = it.LedgerSeq
				if t == nil || it.LedgerSeq <= after {
					continue
				}
				if err := writeFrame(&buf, rpc, it, frameOf(t, rec)); err != nil {
					stop()
					fail(err)
					return
				}
				after = it.LedgerSeq
			}
			if buf.Len() > 0 && !send() {
				stop()
				return
			}
			if t != nil && t.State == kernel.StateFinished {
				stop()
				return
			}
			if !pg.HasMore || len(pg.Items) == 0 {
				break
			}
		}
		select {
		case <-changed:
		case <-heartbeat.C:
			if err := h.recheck(r, id, turnID); err != nil {
				stop()
				fail(err)
				return
			}
			buf.WriteString(": heartbeat\n\n")
			if !send() {
				stop()
				return
			}
		case <-ctx.Done():
			stop()
			return
		case <-h.stopping:
			stop()
			return
		}
		stop()
		if h.store.Closed() {
			return
		}
	}
}

// lastEventID is the cursor of a resumed stream: 0 without the header.
func lastEventID(r *http.Request) (uint64, error) {
	v := r.Header.Values("Last-Event-ID")
	if len(v) == 0 {
		return 0, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v[0]), 10, 64)
	if len(v) > 1 || err != nil {
		return 0, a2a.NewError(a2a.ErrInvalidParams, "Last-Event-ID must be one ledger_seq (a non-negative integer), not "+strconv.Quote(strings.Join(v, ", ")))
	}
	return n, nil
}

// recheck authenticates the caller again and applies the read policy of
// the Turn: a credential revoked through any instance ends the stream at
// the next heartbeat.
func (h *Handler) recheck(r *http.Request, id identity, turnID string) error {
	token, _ := faceauth.Bearer(r)
	c, err := h.engine.AuthenticateToken(r.Context(), id.project, token)
	if err != nil {
		return err
	}
	return h.engine.ViewFolded(r.Context(), id.project, func(p *kernel.Project) error {
		return kernel.CanReadTurn(p, c, h.cfg.Now(), turnID)
	})
}

// recordedOf is a feed item as the ledger event it shows.
func recordedOf(it projection.FeedItem) (kernel.Recorded, error) {
	b, err := json.Marshal(it)
	if err != nil {
		return kernel.Recorded{}, err
	}
	e, err := kernel.UnmarshalEvent(b)
	if err != nil {
		return kernel.Recorded{}, err
	}
	return kernel.Recorded{Seq: it.LedgerSeq, Event: e}, nil
}

// frameOf is the A2A event of a Turn event, t being the Turn after it.
func frameOf(t *kernel.Turn, rec kernel.Recorded) a2a.Event {
	e := rec.Event
	ctxID := t.Dispatch.ContextID
	if ctxID == "" {
		ctxID = t.RootTurnID()
	}
	meta := map[string]any{metaLedgerSeq: rec.Seq, metaEvent: e.Type}
	at := e.At
	status := a2a.TaskStatus{State: stateOf(t.State, t.Outcome, t.AwaitingInput != nil), Timestamp: &at}
	switch d := e.Data.(type) {
	case *kernel.TurnDispatched:
		v := projection.TurnView{TurnID: t.ID, Input: d.Input, RootTurnID: t.RootTurnID()}
		if d.ContextID != "" {
			v.ContextID = &d.ContextID
		}
		return &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: ctxID, Status: status, History: []*a2a.Message{inputMessage(v)}, Metadata: meta}
	case *kernel.TurnRecordAppended:
		it := projection.ContextItem{TurnSeq: d.TurnSeq, Role: d.Role, Payload: d.Payload}
		switch {
		case d.Role == roleArtifact:
			return &a2a.TaskArtifactUpdateEvent{TaskID: a2a.TaskID(t.ID), ContextID: ctxID, Artifact: recordArtifact(t.ID, it, false), Metadata: meta}
		case !strings.HasPrefix(d.Role, bookkeepingPrefix):
			status.Message = recordMessage(t.ID, ctxID, it)
		}
	case *kernel.TurnInputProvided:
		status.Message = recordMessage(t.ID, ctxID, projection.ContextItem{TurnSeq: d.TurnSeq, Role: kernel.RoleInput, Payload: d.Input})
	case *kernel.TurnSuspended:
		if w := t.AwaitingInput; w != nil {
			status.Message = promptMessage(t.ID, ctxID, t.TurnSeq, w.Prompt, w.Schema)
		}
	case *kernel.TurnFinished:
		if !kernel.IsNull(d.FinalPayload) && len(d.FinalPayload) > 0 {
			status.Message = recordMessage(t.ID, ctxID, projection.ContextItem{TurnSeq: t.TurnSeq, Role: d.FinalRecordRole, Payload: d.FinalPayload})
		}
	}
	if status.Message == nil && t.State == kernel.StateFinished && t.Outcome != "succeeded" {
		status.Message = &a2a.Message{ID: t.ID + "-status-" + strconv.FormatUint(rec.Seq, 10), Role: a2a.MessageRoleAgent,
			TaskID: a2a.TaskID(t.ID), ContextID: ctxID, Parts: a2a.ContentParts{a2a.NewTextPart("the Turn finished " + t.Outcome)}}
	}
	return &a2a.TaskStatusUpdateEvent{TaskID: a2a.TaskID(t.ID), ContextID: ctxID, Status: status, Metadata: meta}
}

// writeFrame appends one SSE frame, id: <ledger_seq>.
func writeFrame(buf *bytes.Buffer, rpc *rpcFrame, it projection.FeedItem, ev a2a.Event) error {
	var v any = a2a.StreamResponse{Event: ev}
	if rpc != nil {
		v = map[string]any{"jsonrpc": "2.0", "id": rpc.id, "result": v}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf.WriteString("id: ")
	buf.WriteString(strconv.FormatUint(it.LedgerSeq, 10))
	buf.WriteString("\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	return nil
}

// rpcCodes are the JSON-RPC codes of A2A errors (the specification's
// table, as the SDK writes them).
var rpcCodes = []struct {
	err  error
	code int
}{
	{a2a.ErrParseError, -32700}, {a2a.ErrInvalidRequest, -32600}, {a2a.ErrMethodNotFound, -32601},
	{a2a.ErrInvalidParams, -32602}, {a2a.ErrInternalError, -32603}, {a2a.ErrTaskNotFound, -32001},
	{a2a.ErrTaskNotCancelable, -32002}, {a2a.ErrPushNotificationNotSupported, -32003},
	{a2a.ErrUnsupportedOperation, -32004}, {a2a.ErrUnauthenticated, -31401}, {a2a.ErrUnauthorized, -31403},
}

// rpcError is the JSON-RPC error object of an A2A error.
func rpcError(err error) map[string]any {
	code := -32603
	for _, c := range rpcCodes {
		if errors.Is(err, c.err) {
			code = c.code
			break
		}
	}
	msg := err.Error()
	var ae *a2a.Error
	if errors.As(err, &ae) {
		msg = ae.Message
	}
	return map[string]any{"code": code, "message": msg}
}
