package a2aapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"iter"
	"strconv"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/turnledger/turnledger/internal/inflight"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// service is the A2A request handler of the SDK's bindings: protocol in,
// engine commands and projection reads out.
type service struct{ h *Handler }

var _ a2asrv.RequestHandler = (*service)(nil)

// readTurn reads a task's Turn under the read policy, once the projections
// caught up with the engine (a client reads its own writes). A Turn of
// another agent than the endpoint's is not a task of this agent: not found.
func (s *service) readTurn(ctx context.Context, id identity, taskID string) (projection.TurnView, error) {
	h := s.h
	if !kernel.ValidID(taskID) {
		return projection.TurnView{}, a2a.NewError(a2a.ErrTaskNotFound, "no task "+strconv.Quote(taskID))
	}
	if err := h.wait(ctx, h.engine.Folded(id.project)); err != nil {
		return projection.TurnView{}, h.a2aError(err)
	}
	err := h.engine.ViewFolded(ctx, id.project, func(p *kernel.Project) error {
		return kernel.CanReadTurn(p, id.caller, h.cfg.Now(), taskID)
	})
	if err != nil {
		return projection.TurnView{}, h.a2aError(err)
	}
	v, err := h.store.Turn(id.project, taskID)
	if err != nil {
		return v, h.a2aError(err)
	}
	if v.TargetAgent.AgentID != id.agent {
		return v, a2a.NewError(a2a.ErrTaskNotFound, "task "+taskID+" is not a task of agent "+id.agent)
	}
	return v, nil
}

// context is every semantic record of a Turn.
func (s *service) context(project, turnID string) ([]projection.ContextItem, error) {
	var out []projection.ContextItem
	after := uint64(0)
	for {
		pg, err := s.h.store.Context(project, turnID, after, 500)
		if err != nil {
			return nil, s.h.a2aError(err)
		}
		out = append(out, pg.Items...)
		if !pg.HasMore || len(pg.Items) == 0 {
			return out, nil
		}
		after = pg.NextAfterTurnSeq
	}
}

func (s *service) task(id identity, v projection.TurnView, historyLength *int, artifacts bool) (*a2a.Task, error) {
	items, err := s.context(id.project, v.TurnID)
	if err != nil {
		return nil, err
	}
	return taskOf(v, items, historyLength, artifacts), nil
}

func (s *service) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	id, err := identityFrom(ctx)
	if err != nil {
		return nil, err
	}
	v, err := s.readTurn(ctx, id, string(req.ID))
	if err != nil {
		return nil, err
	}
	return s.task(id, v, req.HistoryLength, true)
}

// ListTasks lists the tasks of the endpoint's agent the caller may read,
// oldest first. pageToken is the Turn list's cursor (next_after_ledger_seq);
// totalSize counts the tasks of this page, not of every page (the Turn
// list counts no totals).
func (s *service) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	h := s.h
	id, err := identityFrom(ctx)
	if err != nil {
		return nil, err
	}
	size := req.PageSize
	switch {
	case size == 0:
		size = h.cfg.DefaultPageSize
	case size < 0 || size > h.cfg.MaxPageSize:
		return nil, a2a.NewError(a2a.ErrInvalidParams, "pageSize must be from 1 to "+strconv.Itoa(h.cfg.MaxPageSize))
	}
	f := projection.TurnFilter{TargetAgentID: id.agent, ContextID: req.ContextID}
	if err := kernel.CheckContextID(req.ContextID); err != nil {
		return nil, h.a2aError(err)
	}
	var outcomes []string
	if req.Status != a2a.TaskStateUnspecified {
		var ok bool
		if f.State, outcomes, f.AwaitingInputOnly, ok = turnStates(req.Status); !ok {
			return nil, a2a.NewError(a2a.ErrInvalidParams, "status "+string(req.Status)+" is not a task state of turnledger")
		}
	}
	if req.PageToken != "" {
		if f.AfterSeq, err = strconv.ParseUint(req.PageToken, 10, 64); err != nil {
			return nil, a2a.NewError(a2a.ErrInvalidParams, "pageToken must be the nextPageToken of a page")
		}
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, a2a.NewError(a2a.ErrInvalidParams, "historyLength must not be negative")
	}
	if err := h.wait(ctx, h.engine.Folded(id.project)); err != nil {
		return nil, h.a2aError(err)
	}
	err = h.engine.ViewFolded(ctx, id.project, func(p *kernel.Project) error {
		if _, err := p.Check(id.caller, h.cfg.Now()); err != nil {
			return err
		}
		f.VisibleTo = kernel.TurnsVisibleTo(p, id.caller)
		return nil
	})
	if err != nil {
		return nil, h.a2aError(err)
	}
	pg, err := h.store.TurnsPage(id.project, f, size)
	if err != nil {
		return nil, h.a2aError(err)
	}
	none := 0
	hist := req.HistoryLength
	if hist == nil {
		hist = &none
	}
	out := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, PageSize: size}
	for _, v := range pg.Items {
		if req.Status != a2a.TaskStateUnspecified && stateOf(v.State, outcomeOf(v), v.AwaitingInput != nil) != req.Status {
			continue
		}
		if len(outcomes) > 0 && outcomeOf(v) != outcomes[0] {
			continue
		}
		if req.StatusTimestampAfter != nil && !v.UpdatedAt.After(*req.StatusTimestampAfter) {
			continue
		}
		t, err := s.task(id, v, hist, req.IncludeArtifacts)
		if err != nil {
			return nil, err
		}
		out.Tasks = append(out.Tasks, t)
	}
	out.TotalSize = len(out.Tasks)
	if pg.HasMore {
		out.NextPageToken = strconv.FormatUint(pg.NextAfterSeq, 10)
	}
	return out, nil
}

// CancelTask requests a stop of the Turn and of its descendants. The task
// is CANCELED once the Turn is stopped: at once when no claim holds it,
// else when its holder stops or its claim ends.
func (s *service) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	h := s.h
	id, err := identityFrom(ctx)
	if err != nil {
		return nil, err
	}
	v, err := s.readTurn(ctx, id, string(req.ID))
	if err != nil {
		return nil, err
	}
	if v.State == kernel.StateFinished {
		return nil, a2a.NewError(a2a.ErrTaskNotCancelable, "task "+v.TurnID+" is finished ("+outcomeOf(v)+")")
	}
	seq, err := h.engine.Stop(ctx, id.project, kernel.Stop{Common: kernel.Common{Caller: id.caller}, TurnID: v.TurnID, RequestedBy: id.ref(), Cascade: true})
	if err != nil {
		return nil, h.a2aError(err)
	}
	if v, err = s.turnAt(ctx, id, v.TurnID, seq); err != nil {
		return nil, err
	}
	return s.task(id, v, nil, true)
}

// turnAt reads a Turn once the change at seq is committed to the
// projections, with the records a task shows.
func (s *service) turnAt(ctx context.Context, id identity, turnID string, seq uint64) (projection.TurnView, error) {
	if err := s.h.wait(ctx, seq); err != nil {
		return projection.TurnView{}, s.h.a2aError(err)
	}
	v, err := s.h.store.Turn(id.project, turnID)
	if err != nil {
		return v, s.h.a2aError(err)
	}
	return v, nil
}

// send dispatches a new Turn for a message without a task id, or provides
// the input a task waits for; it answers the Turn and the ledger_seq of
// the change.
func (s *service) send(ctx context.Context, req *a2a.SendMessageRequest) (identity, string, uint64, error) {
	h := s.h
	id, err := identityFrom(ctx)
	if err != nil {
		return id, "", 0, err
	}
	m := req.Message
	if m == nil {
		return id, "", 0, a2a.NewError(a2a.ErrInvalidParams, "message is required")
	}
	if m.ID == "" {
		return id, "", 0, a2a.NewError(a2a.ErrInvalidParams, "message.messageId is required: it is the dispatch key, so that a retried send is the same task")
	}
	if len(m.Parts) == 0 {
		return id, "", 0, a2a.NewError(a2a.ErrInvalidParams, "message.parts must hold at least one part")
	}
	input, err := inputOf(m)
	if err != nil {
		return id, "", 0, err
	}
	if m.TaskID != "" {
		v, err := s.readTurn(ctx, id, string(m.TaskID))
		if err != nil {
			return id, "", 0, err
		}
		if v.State != kernel.StateSuspended || v.AwaitingInput == nil {
			// The same answer sent again (its answer lost) is the same
			// answer: the task as it stands.
			if answered, err := s.answered(id, v.TurnID, m.ID); err != nil {
				return id, "", 0, err
			} else if answered {
				return id, v.TurnID, v.LedgerSeq, nil
			}
			if v.State == kernel.StateFinished {
				return id, "", 0, a2a.NewError(a2a.ErrUnsupportedOperation, "task "+v.TurnID+" is finished: send a message without taskId (and with its contextId) to start a new one")
			}
			return id, "", 0, a2a.NewError(a2a.ErrUnsupportedOperation, "task "+v.TurnID+" does not wait for input")
		}
		seq, err := h.engine.Execute(ctx, id.project, kernel.ProvideInput{Common: kernel.Common{Caller: id.caller}, TurnID: v.TurnID, Input: input})
		if err != nil {
			return id, "", 0, h.a2aError(err)
		}
		return id, v.TurnID, seq, nil
	}
	kind := DefaultTurnKind
	if sk, ok := m.Metadata[metaSkill].(string); ok && sk != "" {
		kind = sk
	} else if sk, ok := req.Metadata[metaSkill].(string); ok && sk != "" {
		kind = sk
	}
	contextID := m.ContextID
	if contextID == "" {
		// Derived from what makes the send unique, so that a retried send
		// without a contextId is the same dispatch.
		sum := sha256.Sum256([]byte(id.caller.AgentID + "\x00" + m.ID))
		contextID = "ctx-" + hex.EncodeToString(sum[:16])
	}
	res, err := h.engine.Dispatch(ctx, id.project, kernel.Dispatch{
		Common: kernel.Common{Caller: id.caller}, RequestedBy: id.ref(),
		TargetAgent: kernel.AgentRef{ProjectID: id.project, AgentID: id.agent},
		Input:       input, TurnKind: kind, DispatchKey: m.ID, Mode: kernel.AuthorityRoot, RequestID: m.ID, ContextID: contextID,
	})
	if err != nil {
		return id, "", 0, h.a2aError(err)
	}
	return id, res.TurnID, res.Seq, nil
}

// answered reports whether the message of this id provided an input of
// the Turn already.
func (s *service) answered(id identity, turnID, messageID string) (bool, error) {
	items, err := s.context(id.project, turnID)
	if err != nil {
		return false, err
	}
	for _, it := range items {
		if it.Role == kernel.RoleInput && payloadOf(it.Payload).MessageID == messageID {
			return true, nil
		}
	}
	return false, nil
}

// SendMessage dispatches (or provides input) and answers the task: at once
// with returnImmediately, else once it finished or waits for input, or
// after Config.SendWait as it stands then.
func (s *service) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	h := s.h
	id, turnID, seq, err := s.send(ctx, req)
	if err != nil {
		return nil, err
	}
	v, err := s.turnAt(ctx, id, turnID, seq)
	if err != nil {
		return nil, err
	}
	var hist *int
	if req.Config != nil {
		hist = req.Config.HistoryLength
	}
	if req.Config != nil && req.Config.ReturnImmediately || h.cfg.SendWait == 0 {
		return s.task(id, v, hist, true)
	}
	// From here the send only waits on notifications: its slots go back.
	inflight.Detach(ctx)
	deadline := time.NewTimer(h.cfg.SendWait)
	defer deadline.Stop()
	for !settled(v) {
		changed, stop := h.store.WatchProject(id.project)
		if v, err = h.store.Turn(id.project, turnID); err != nil {
			stop()
			return nil, h.a2aError(err)
		}
		if settled(v) {
			stop()
			break
		}
		select {
		case <-changed:
		case <-deadline.C:
			stop()
			return s.task(id, v, hist, true)
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-h.stopping:
			stop()
			return s.task(id, v, hist, true)
		}
		stop()
	}
	return s.task(id, v, hist, true)
}

// settled reports whether a blocking send may answer: the Turn finished or
// waits for input.
func settled(v projection.TurnView) bool {
	return v.State == kernel.StateFinished || v.State == kernel.StateSuspended && v.AwaitingInput != nil
}

// streamErrKey carries the refusal of a stream to the SDK, which writes it
// in its binding's form (stream.go).
type streamErrKey struct{}

func streamErr(ctx context.Context) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		err, _ := ctx.Value(streamErrKey{}).(error)
		if err == nil {
			err = a2a.NewError(a2a.ErrInternalError, "streams are served by turnledger's stream writer")
		}
		yield(nil, err)
	}
}

func (s *service) SubscribeToTask(ctx context.Context, _ *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return streamErr(ctx)
}

func (s *service) SendStreamingMessage(ctx context.Context, _ *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return streamErr(ctx)
}

// startStream begins SendStreamingMessage: the send, then the Turn's
// events.
func (s *service) startStream(ctx context.Context, req *a2a.SendMessageRequest) (string, uint64, error) {
	_, turnID, seq, err := s.send(ctx, req)
	return turnID, seq, err
}

// startSubscribe begins SubscribeToTask: the Turn's events.
func (s *service) startSubscribe(ctx context.Context, taskID string) (string, uint64, error) {
	id, err := identityFrom(ctx)
	if err != nil {
		return "", 0, err
	}
	v, err := s.readTurn(ctx, id, taskID)
	if err != nil {
		return "", 0, err
	}
	return v.TurnID, v.LedgerSeq, nil
}

// Push notifications are not served: a client follows a task with
// SubscribeToTask, whose stream resumes (stream.go).
func (s *service) GetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (s *service) ListTaskPushConfigs(context.Context, *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (s *service) CreateTaskPushConfig(context.Context, *a2a.PushConfig) (*a2a.PushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (s *service) DeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigRequest) error {
	return a2a.ErrPushNotificationNotSupported
}

func (s *service) GetExtendedAgentCard(context.Context, *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, a2a.ErrExtendedCardNotConfigured
}
