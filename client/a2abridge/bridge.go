// Package a2abridge makes a remote A2A agent a turnledger agent: a Bridge
// claims the Turns targeted at one turnledger agent (with the Go client's
// Worker: claims, renewals, stop requests, shutdown) and forwards each to a
// remote agent over A2A, with the official Go SDK
// (github.com/a2aproject/a2a-go/v2). It lives in a package of its own so
// that the client package keeps to the standard library.
//
// For each Turn:
//
//   - The Turn's input is the message: its "parts" (and "metadata") when it
//     has them (the shape the A2A face of turnledger gives the Turns it
//     dispatches), else one data part holding the whole input. The
//     messageId is the turn_id; the Turn's context_id, when it has one, is
//     the contextId.
//   - The remote task's id is recorded at once (a record with role
//     RoleRemoteTask), so that the next bridge to claim the Turn — after a
//     crash, the claim expired and the Turn queued again — follows the same
//     remote task when the remote agent still has it, instead of sending
//     the work again.
//   - The remote task's status messages are appended as records with role
//     "message", its artifact updates as records with role "artifact"
//     ({"artifactId", "name", "parts"}), while the Worker renews the claim.
//   - The remote task's final state finishes the Turn: COMPLETED as
//     succeeded, FAILED and REJECTED as failed, CANCELED as stopped; the
//     final payload is {"remote_task_id", "state", "parts"} with the parts
//     of the final status message, if any.
//   - A remote INPUT_REQUIRED suspends the Turn awaiting input (the status
//     message's text as the prompt, a data part's "schema" as the schema);
//     the input provided continues the remote task (a message with its
//     taskId and the input's parts, or the input as a data part), recorded
//     with role RoleInputForwarded so it is sent once.
//   - A stop request of the Turn cancels the remote task.
package a2abridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/turnledger/turnledger/client"
)

// Roles of the records the bridge appends besides "message" and
// "artifact".
const (
	RoleRemoteTask     = "a2a.remote_task"     // {"task_id", "context_id"}: the remote task of the Turn
	RoleInputForwarded = "a2a.input_forwarded" // {"turn_seq"}: the input record sent to the remote task
)

// Config configures a Bridge.
type Config struct {
	// Client is the turnledger client of the bridged agent
	// (client.WithAgent with its credential).
	Client *client.Client
	// Remote is the a2a-go client of the remote agent (Dial makes one from
	// its card).
	Remote *a2aclient.Client
	// Worker configures the Worker that claims the Turns (Project and
	// Agent default to the client's; Capacity is the concurrency).
	Worker client.WorkerConfig
	// PollInterval is how often a remote task that cannot be subscribed to
	// is read again (default 1s).
	PollInterval time.Duration
	Logger       *slog.Logger
}

// Bridge forwards the Turns of one agent to a remote A2A agent.
type Bridge struct {
	cfg    Config
	worker *client.Worker
}

// New returns a Bridge; Run runs it.
func New(cfg Config) (*Bridge, error) {
	if cfg.Client == nil || cfg.Remote == nil {
		return nil, errors.New("a2abridge: a turnledger client and a remote A2A client are required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Worker.Logger == nil {
		cfg.Worker.Logger = cfg.Logger
	}
	b := &Bridge{cfg: cfg}
	w, err := cfg.Client.NewWorker(cfg.Worker, b.handle)
	if err != nil {
		return nil, err
	}
	b.worker = w
	return b, nil
}

// Run claims and forwards Turns until ctx ends (then as the Worker's Run
// shuts down).
func (b *Bridge) Run(ctx context.Context) error { return b.worker.Run(ctx) }

// Dial resolves a remote agent's card (cardURL is the card's URL, or the
// agent's base URL under which /.well-known/agent-card.json is) and
// returns an a2a-go client of it. hc (nil: http.DefaultClient) makes every
// request, the card's included; headers (an Authorization for the remote
// agent) are sent with every one.
func Dial(ctx context.Context, cardURL string, hc *http.Client, headers map[string]string) (*a2aclient.Client, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	if len(headers) > 0 {
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		c := *hc
		c.Transport = headerTransport{headers, base}
		hc = &c
	}
	base, path := cardURL, ""
	if i := strings.Index(cardURL, "/.well-known/"); i >= 0 {
		base, path = cardURL[:i], cardURL[i:]
	}
	var opts []agentcard.ResolveOption
	if path != "" {
		opts = append(opts, agentcard.WithPath(path))
	}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, base, opts...)
	if err != nil {
		return nil, fmt.Errorf("a2abridge: resolve the card at %s: %w", cardURL, err)
	}
	return a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc))
}

type headerTransport struct {
	h    map[string]string
	base http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// parts is the payload shape of messages and artifacts.
type parts struct {
	MessageID  string           `json:"messageId,omitempty"`
	Parts      a2a.ContentParts `json:"parts"`
	Metadata   map[string]any   `json:"metadata,omitempty"`
	ArtifactID a2a.ArtifactID   `json:"artifactId,omitempty"`
	Name       string           `json:"name,omitempty"`
}

// partsOf reads a payload as parts: its "parts", else one data part.
func partsOf(raw json.RawMessage) parts {
	var p parts
	if json.Unmarshal(raw, &p) == nil && len(p.Parts) > 0 {
		return p
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		v = string(raw)
	}
	return parts{Parts: a2a.ContentParts{a2a.NewDataPart(v)}}
}

// remoteTask is the payload of a RoleRemoteTask record.
type remoteTask struct {
	TaskID    a2a.TaskID `json:"task_id"`
	ContextID string     `json:"context_id"`
}

// state is what the Turn's records say of the remote side.
type state struct {
	remote         *remoteTask
	input          json.RawMessage // the latest input record
	inputSeq       uint64
	forwardedInput uint64 // the turn_seq of the latest input sent on
	// The remote messages and artifacts recorded already, by id: what a
	// bridge sees again (a snapshot, or after a crash) is recorded once.
	messages  map[string]bool
	artifacts map[a2a.ArtifactID]bool
}

func (b *Bridge) read(ctx context.Context, job *client.Job) (state, error) {
	s := state{messages: map[string]bool{}, artifacts: map[a2a.ArtifactID]bool{}}
	var after uint64
	for {
		pg, err := b.cfg.Client.TurnContext(ctx, job.Turn.ProjectID, job.Turn.TurnID, after, 200)
		if err != nil {
			return s, err
		}
		for _, it := range pg.Items {
			switch it.Role {
			case RoleRemoteTask:
				var r remoteTask
				if json.Unmarshal(it.Payload, &r) == nil && r.TaskID != "" {
					s.remote = &r
				}
			case "input":
				s.input, s.inputSeq = it.Payload, it.TurnSeq
			case "message", "artifact":
				var p parts
				if json.Unmarshal(it.Payload, &p) == nil {
					if p.MessageID != "" {
						s.messages[p.MessageID] = true
					}
					if p.ArtifactID != "" {
						s.artifacts[p.ArtifactID] = true
					}
				}
			case RoleInputForwarded:
				var f struct {
					TurnSeq uint64 `json:"turn_seq"`
				}
				if json.Unmarshal(it.Payload, &f) == nil {
					s.forwardedInput = f.TurnSeq
				}
			}
		}
		if !pg.More() || pg.NextAfterTurnSeq == nil {
			return s, nil
		}
		after = *pg.NextAfterTurnSeq
	}
}

// handle forwards one Turn.
func (b *Bridge) handle(ctx context.Context, job *client.Job) (client.Result, error) {
	log := b.cfg.Logger.With("turn_id", job.Turn.TurnID)
	s, err := b.read(ctx, job)
	if err != nil {
		return client.Result{}, client.RetryLater(err)
	}
	var task *a2a.Task
	if s.remote != nil {
		task, err = b.cfg.Remote.GetTask(ctx, &a2a.GetTaskRequest{ID: s.remote.TaskID})
		switch {
		case errors.Is(err, a2a.ErrTaskNotFound):
			log.Info("a2a bridge: the remote agent no longer has the task; sending the work again", "remote_task_id", s.remote.TaskID)
			task = nil
		case err != nil:
			return b.failed(ctx, job, fmt.Errorf("read remote task %s: %w", s.remote.TaskID, err))
		default:
			log.Info("a2a bridge: following the remote task of an earlier claim", "remote_task_id", task.ID)
		}
	}
	if task == nil {
		msg := partsOf(job.Turn.Input)
		m := &a2a.Message{ID: job.Turn.TurnID, Role: a2a.MessageRoleUser, Parts: msg.Parts, Metadata: msg.Metadata}
		if job.Turn.ContextID != nil {
			m.ContextID = *job.Turn.ContextID
		}
		if job.Turn.TurnKind != "" {
			m.SetMeta("skill", job.Turn.TurnKind)
		}
		res, err := b.cfg.Remote.SendMessage(ctx, &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
		if err != nil {
			return b.failed(ctx, job, fmt.Errorf("send the Turn to the remote agent: %w", err))
		}
		switch r := res.(type) {
		case *a2a.Message:
			// No task: the answer is the result.
			return client.Result{Outcome: "succeeded", FinalPayload: map[string]any{"parts": r.Parts, "state": "MESSAGE"}}, nil
		case *a2a.Task:
			task = r
		}
		if _, err := job.Append(ctx, RoleRemoteTask, remoteTask{TaskID: task.ID, ContextID: task.ContextID}); err != nil {
			return b.failed(ctx, job, err)
		}
	}
	return b.follow(ctx, job, &s, task)
}

// follow follows the remote task until it finishes (the Turn's result) or
// asks for input (the Turn suspended).
func (b *Bridge) follow(ctx context.Context, job *client.Job, s *state, task *a2a.Task) (client.Result, error) {
	st := task.Status
	if err := b.catchUp(ctx, job, s, task); err != nil {
		return b.failed(ctx, job, err)
	}
	for {
		switch st.State {
		case a2a.TaskStateCompleted:
			return client.Result{Outcome: "succeeded", FinalPayload: final(task.ID, st)}, nil
		case a2a.TaskStateFailed, a2a.TaskStateRejected:
			return client.Result{Outcome: "failed", FinalPayload: final(task.ID, st), FinalRecordRole: "error"}, nil
		case a2a.TaskStateCanceled:
			return client.Result{Outcome: "stopped", FinalPayload: final(task.ID, st)}, nil
		case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
			if s.inputSeq > s.forwardedInput {
				in := partsOf(s.input)
				m := &a2a.Message{ID: job.Turn.TurnID + "-input-" + strconv.FormatUint(s.inputSeq, 10), Role: a2a.MessageRoleUser,
					TaskID: task.ID, ContextID: task.ContextID, Parts: in.Parts, Metadata: in.Metadata}
				res, err := b.cfg.Remote.SendMessage(ctx, &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
				if err != nil {
					return b.failed(ctx, job, fmt.Errorf("send the input to remote task %s: %w", task.ID, err))
				}
				if _, err := job.Append(ctx, RoleInputForwarded, map[string]any{"turn_seq": s.inputSeq}); err != nil {
					return b.failed(ctx, job, err)
				}
				s.forwardedInput = s.inputSeq
				if t, ok := res.(*a2a.Task); ok {
					st = t.Status
				} else {
					st = a2a.TaskStatus{State: a2a.TaskStateWorking}
				}
				if st.State == a2a.TaskStateInputRequired {
					st.State = a2a.TaskStateWorking // the answer is under way: read the task again below
				}
				continue
			}
			prompt, schema := promptOf(st)
			if _, err := job.AwaitInput(ctx, prompt, schema, nil); err != nil {
				return b.failed(ctx, job, err)
			}
			return client.Result{}, nil
		}
		// Submitted or working: follow its events, then read it again.
		next, err := b.watch(ctx, job, s, task)
		if err != nil {
			return b.failed(ctx, job, err)
		}
		st = next
	}
}

// catchUp records what a snapshot of the remote task holds that the Turn
// has not recorded yet: the agent's messages of its history and of a
// working status, and its artifacts.
func (b *Bridge) catchUp(ctx context.Context, job *client.Job, s *state, task *a2a.Task) error {
	msgs := task.History
	if m := task.Status.Message; m != nil && (task.Status.State == a2a.TaskStateWorking || task.Status.State == a2a.TaskStateSubmitted) {
		msgs = append(msgs[:len(msgs):len(msgs)], m)
	}
	for _, m := range msgs {
		if err := b.message(ctx, job, s, m); err != nil {
			return err
		}
	}
	for _, a := range task.Artifacts {
		if err := b.artifact(ctx, job, s, a); err != nil {
			return err
		}
	}
	return nil
}

// message records an agent message of the remote task, once.
func (b *Bridge) message(ctx context.Context, job *client.Job, s *state, m *a2a.Message) error {
	if m == nil || m.Role != a2a.MessageRoleAgent || m.ID != "" && s.messages[m.ID] {
		return nil
	}
	if _, err := job.Append(ctx, "message", parts{MessageID: m.ID, Parts: m.Parts, Metadata: m.Metadata}); err != nil {
		return err
	}
	s.messages[m.ID] = true
	return nil
}

// artifact records an artifact of the remote task, once.
func (b *Bridge) artifact(ctx context.Context, job *client.Job, s *state, a *a2a.Artifact) error {
	if a == nil || a.ID != "" && s.artifacts[a.ID] {
		return nil
	}
	if _, err := job.Append(ctx, "artifact", parts{ArtifactID: a.ID, Name: a.Name, Parts: a.Parts}); err != nil {
		return err
	}
	s.artifacts[a.ID] = true
	return nil
}

// watch follows a task's updates until its stream ends, recording its
// messages and whole artifacts; then it reads the task again, records what
// the stream missed, and answers its status.
func (b *Bridge) watch(ctx context.Context, job *client.Job, s *state, task *a2a.Task) (a2a.TaskStatus, error) {
	subscribed := false
	for ev, err := range b.cfg.Remote.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}) {
		if err != nil {
			break // a task that cannot be subscribed to (or a broken stream) is read again below
		}
		subscribed = true
		switch ev := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
			if st := ev.Status.State; st == a2a.TaskStateWorking || st == a2a.TaskStateSubmitted {
				if err := b.message(ctx, job, s, ev.Status.Message); err != nil {
					return a2a.TaskStatus{}, err
				}
			}
		case *a2a.TaskArtifactUpdateEvent:
			if !ev.Append {
				if err := b.artifact(ctx, job, s, ev.Artifact); err != nil {
					return a2a.TaskStatus{}, err
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return a2a.TaskStatus{}, err
	}
	for {
		t, err := b.cfg.Remote.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			return a2a.TaskStatus{}, fmt.Errorf("read remote task %s: %w", task.ID, err)
		}
		if err := b.catchUp(ctx, job, s, t); err != nil {
			return a2a.TaskStatus{}, err
		}
		if subscribed || (t.Status.State != a2a.TaskStateSubmitted && t.Status.State != a2a.TaskStateWorking) {
			return t.Status, nil
		}
		// Not subscribable and still working: read it again shortly.
		select {
		case <-ctx.Done():
			return a2a.TaskStatus{}, ctx.Err()
		case <-time.After(b.cfg.PollInterval):
		}
	}
}

// failed ends a Turn whose forwarding failed: a stop request cancels the
// remote task (the Worker then finishes the Turn as stopped); any other
// failure asks for another attempt.
func (b *Bridge) failed(ctx context.Context, job *client.Job, err error) (client.Result, error) {
	if errors.Is(context.Cause(ctx), client.ErrStopRequested) || job.StopRequested() {
		b.cancelRemote(ctx, job)
		return client.Result{}, fmt.Errorf("stopped: %w", context.Cause(ctx))
	}
	if ctx.Err() != nil {
		return client.Result{}, context.Cause(ctx) // a lost claim or a shutdown: the Worker does not finish the Turn
	}
	return client.Result{}, client.RetryLater(err)
}

// cancelRemote cancels the remote task of a stopped Turn.
func (b *Bridge) cancelRemote(ctx context.Context, job *client.Job) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s, err := b.read(cctx, job)
	if err != nil || s.remote == nil {
		return
	}
	if _, err := b.cfg.Remote.CancelTask(cctx, &a2a.CancelTaskRequest{ID: s.remote.TaskID}); err != nil && !errors.Is(err, a2a.ErrTaskNotCancelable) {
		b.cfg.Logger.Warn("a2a bridge: cancel the remote task", "turn_id", job.Turn.TurnID, "remote_task_id", s.remote.TaskID, "err", err)
	}
}

// final is the final payload of a Turn from its remote task's last status.
func final(id a2a.TaskID, st a2a.TaskStatus) map[string]any {
	out := map[string]any{"remote_task_id": id, "state": st.State}
	if st.Message != nil {
		out["parts"] = st.Message.Parts
	}
	return out
}

// promptOf is the prompt and schema of a remote wait for input: the
// status message's text, and the "schema" of a data part.
func promptOf(st a2a.TaskStatus) (string, any) {
	var texts []string
	var schema any
	if m := st.Message; m != nil {
		for _, p := range m.Parts {
			if t := p.Text(); t != "" {
				texts = append(texts, t)
			}
			if d, ok := p.Data().(map[string]any); ok && d["schema"] != nil {
				schema = d["schema"]
			}
		}
	}
	if len(texts) == 0 {
		if st.State == a2a.TaskStateAuthRequired {
			return "the remote agent asks for authentication", schema
		}
		return "the remote agent asks for input", schema
	}
	return strings.Join(texts, "\n"), schema
}
