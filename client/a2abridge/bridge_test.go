package a2abridge_test

import (
	"context"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/client/a2abridge"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/testclock"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

const adminToken = "bridge-test-admin-token"

// remoteAgent is a small A2A agent made with the a2a-go server. What it
// does depends on the first text part of a task's first message:
//
//	succeed  a status message "working on it", an artifact "out", COMPLETED with "done"
//	fail     FAILED with "boom"
//	ask      INPUT_REQUIRED "Approve?"; the answer's data part completes it
//	slow     WORKING, then waits for release (COMPLETED) or a cancel
//	hello    a message, no task
type remoteAgent struct {
	mu       sync.Mutex
	starts   map[string]int // executions started, by text
	started  chan a2a.TaskID
	release  chan struct{}
	canceled atomic.Int32
}

func (r *remoteAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask != nil && ec.StoredTask.Status.State == a2a.TaskStateInputRequired {
			answer, _ := ec.Message.Parts[0].Data().(map[string]any)
			text := "denied"
			if answer["approve"] == true {
				text = "approved"
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))), nil)
			return
		}
		text := ec.Message.Parts[0].Text()
		r.mu.Lock()
		r.starts[text]++
		r.mu.Unlock()
		if text == "hello" {
			yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("hello to you")), nil) // an answer, no task
			return
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		switch text {
		case "succeed":
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("working on it"))), nil) {
				return
			}
			art := a2a.NewArtifactEvent(ec, a2a.NewTextPart("the output"))
			art.Artifact.Name = "out"
			if !yield(art, nil) {
				return
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))), nil)
		case "fail":
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("boom"))), nil)
		case "ask":
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("Approve?"))), nil)
		case "slow":
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
				return
			}
			r.started <- ec.TaskID
			select {
			case <-r.release:
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("finally"))), nil)
			case <-ctx.Done():
			}
		}
	}
}

func (r *remoteAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		r.canceled.Add(1)
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (r *remoteAgent) startsOf(text string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts[text]
}

// startRemote serves the remote agent (JSON-RPC at /a2a, its card at the
// well-known path) on a loopback server.
func startRemote(t *testing.T) (*remoteAgent, string) {
	t.Helper()
	r := &remoteAgent{starts: map[string]int{}, started: make(chan a2a.TaskID, 4), release: make(chan struct{})}
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	card := &a2a.AgentCard{Name: "remote", Description: "a remote agent", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(hs.URL+"/a2a", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true}, DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "work", Name: "work", Description: "works", Tags: []string{}}}}
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(r)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return r, hs.URL
}

// switchable is a transport that can be frozen, as a process that stops
// dead: its requests hang until it is revived (or their context ends).
type switchable struct {
	mu    sync.Mutex
	alive chan struct{} // nil: alive
}

func (s *switchable) freeze() {
	s.mu.Lock()
	s.alive = make(chan struct{})
	s.mu.Unlock()
}

func (s *switchable) revive() {
	s.mu.Lock()
	if s.alive != nil {
		close(s.alive)
		s.alive = nil
	}
	s.mu.Unlock()
}

func (s *switchable) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	ch := s.alive
	s.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

type world struct {
	t        *testing.T
	url      string
	clock    *testclock.Offset
	admin    *client.Client
	token    string // the bridged agent's credential
	a2a      *a2aclient.Client
	remote   *remoteAgent
	remoteTo string
}

// newWorld starts turnledger serve (A2A face included), registers the
// requester "boss" and the bridged agent "proxy", and starts the remote
// agent; the test's A2A client talks to proxy through serve.
func newWorld(t *testing.T) *world {
	t.Helper()
	clk := &testclock.Offset{}
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir, cfg.AdminToken = "127.0.0.1:0", t.TempDir(), adminToken
	cfg.Ledger.Storage = ledger.MemoryStorage
	cfg.ReapInterval = 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Now = clk.Now
	cfg.Kernel.ClaimTTL = 3 * time.Second // renewed every second: a stop request is seen within one
	s, err := serve.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	w := &world{t: t, url: s.URL(), clock: clk}
	w.admin, err = client.New(w.url, client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	register := func(id string, accepts bool, grants ...string) string {
		if _, err := w.admin.RegisterAgent(ctx, "p", client.RegisterRequest{
			Spec:       client.AgentSpec{AgentID: id, Role: "worker", AcceptsWork: new(accepts), Capacity: new(2), Capabilities: []string{"work"}, Grants: grants},
			Provenance: client.Provenance{Kind: "test"}}); err != nil {
			t.Fatal(err)
		}
		cred, err := w.admin.IssueCredential(ctx, "p", id)
		if err != nil {
			t.Fatal(err)
		}
		return cred.Token
	}
	boss := register("boss", false, "turns:dispatch")
	w.token = register("proxy", true)
	base := w.url + "/a2a/projects/p/agents/proxy"
	card, err := agentcard.NewResolver(http.DefaultClient).Resolve(ctx, base, agentcard.WithRequestHeader("Authorization", "Bearer "+boss))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: bearerTransport{boss}}
	if w.a2a, err = a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc)); err != nil {
		t.Fatal(err)
	}
	w.remote, w.remoteTo = startRemote(t)
	return w
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// bridge runs a bridge for proxy over the transport given (nil: the
// default) until the returned stop is called. It forwards one Turn at a
// time, so that no claim request of its is in flight while it works one.
func (w *world) bridge(tr http.RoundTripper) (stop func()) {
	w.t.Helper()
	if tr == nil {
		tr = http.DefaultTransport
	}
	c, err := client.New(w.url, client.WithAgent("p", "proxy", w.token), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		w.t.Fatal(err)
	}
	remote, err := a2abridge.Dial(context.Background(), w.remoteTo, &http.Client{Transport: tr}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	b, err := a2abridge.New(a2abridge.Config{Client: c, Remote: remote, PollInterval: 10 * time.Millisecond,
		Worker: client.WorkerConfig{Capacity: 1, Wait: 200 * time.Millisecond, RetryDelay: 10 * time.Millisecond, ShutdownGrace: 10 * time.Millisecond, PresenceInterval: -1},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	w.t.Cleanup(stop)
	return stop
}

// send sends a message to proxy over A2A (through serve) and returns the
// task.
func (w *world) send(id, text string) *a2a.Task {
	w.t.Helper()
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.ID = id
	res, err := w.a2a.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		w.t.Fatalf("SendMessage(%s) = %v", text, err)
	}
	return res.(*a2a.Task)
}

// until waits for the task to reach the state, within a bound.
func (w *world) until(id a2a.TaskID, want a2a.TaskState) *a2a.Task {
	w.t.Helper()
	var task *a2a.Task
	checkfor.Until(w.t, 15*time.Second, "task "+string(id)+" "+string(want), func() bool {
		t, err := w.a2a.GetTask(context.Background(), &a2a.GetTaskRequest{ID: id})
		task = t
		return err == nil && t.Status.State == want
	})
	return task
}

func texts(ps a2a.ContentParts) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Text())
	}
	return out
}

func TestBridgeSuccessAndFailure(t *testing.T) {
	w := newWorld(t)
	w.bridge(nil)
	ok := w.until(w.send("m-ok", "succeed").ID, a2a.TaskStateCompleted)
	var agentSaid []string
	for _, m := range ok.History {
		if m.Role == a2a.MessageRoleAgent {
			agentSaid = append(agentSaid, texts(m.Parts)...)
		}
	}
	if len(agentSaid) != 1 || agentSaid[0] != "working on it" {
		t.Errorf("agent messages of the bridged task = %q, want the remote's status message", agentSaid)
	}
	if len(ok.Artifacts) != 2 || ok.Artifacts[0].Name != "out" || texts(ok.Artifacts[0].Parts)[0] != "the output" || ok.Artifacts[1].ID != "final" {
		t.Errorf("artifacts = %+v, want the remote's artifact then the final payload", ok.Artifacts)
	}
	failed := w.until(w.send("m-fail", "fail").ID, a2a.TaskStateFailed)
	if failed.Status.Message == nil {
		t.Errorf("a failed task has no status message")
	}
	if n := w.remote.startsOf("succeed") + w.remote.startsOf("fail"); n != 2 {
		t.Errorf("the remote agent started %d tasks, want 2", n)
	}
	// A remote agent that answers with a message, no task: the answer is
	// the result.
	hello := w.until(w.send("m-hello", "hello").ID, a2a.TaskStateCompleted)
	if got := texts(hello.Artifacts[len(hello.Artifacts)-1].Parts); len(got) != 1 || got[0] != "hello to you" {
		t.Errorf("final artifact of a message answer = %q, want the message", got)
	}
}

func TestBridgeInputRequired(t *testing.T) {
	w := newWorld(t)
	w.bridge(nil)
	task := w.until(w.send("m-ask", "ask").ID, a2a.TaskStateInputRequired)
	if got := texts(task.Status.Message.Parts); len(got) == 0 || got[0] != "Approve?" {
		t.Fatalf("prompt = %q, want the remote's", got)
	}
	answer := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewDataPart(map[string]any{"approve": true}))
	if _, err := w.a2a.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: answer, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}); err != nil {
		t.Fatal(err)
	}
	done := w.until(task.ID, a2a.TaskStateCompleted)
	final := done.Artifacts[len(done.Artifacts)-1]
	if got := texts(final.Parts); len(got) != 1 || got[0] != "approved" {
		t.Errorf("final artifact = %q, want the remote's final message on the answer, approved", got)
	}
	if w.remote.startsOf("ask") != 1 {
		t.Errorf("the remote agent started %d tasks for one Turn, want 1 (the answer continues it)", w.remote.startsOf("ask"))
	}
}

func TestBridgeCancel(t *testing.T) {
	w := newWorld(t)
	w.bridge(nil)
	task := w.send("m-slow", "slow")
	<-w.remote.started
	w.until(task.ID, a2a.TaskStateWorking)
	if _, err := w.a2a.CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: task.ID}); err != nil {
		t.Fatal(err)
	}
	w.until(task.ID, a2a.TaskStateCanceled)
	if w.remote.canceled.Load() != 1 {
		t.Errorf("the remote task was canceled %d times, want 1", w.remote.canceled.Load())
	}
}

// TestBridgeKilledMidTask: a bridge that stops dead mid-task loses
// nothing: its claim expires, the Turn is queued again, and the next bridge
// follows the same remote task to its end. What the dead bridge sends when
// it wakes up is fenced off.
func TestBridgeKilledMidTask(t *testing.T) {
	w := newWorld(t)
	tr := &switchable{}
	stop1 := w.bridge(tr)
	task := w.send("m-kill", "slow")
	<-w.remote.started
	w.until(task.ID, a2a.TaskStateWorking)
	ctx := context.Background()
	checkfor.Until(t, 10*time.Second, "the bridge to record the remote task", func() bool {
		items, err := w.admin.TurnContext(ctx, "p", string(task.ID), 0, 50)
		return err == nil && len(items.Items) > 0 && items.Items[0].Role == a2abridge.RoleRemoteTask
	})
	tr.freeze()                // the first bridge stops dead: no renewal, no release
	w.clock.Advance(time.Hour) // past the claim's expiry
	if _, err := w.admin.ReconcileExpiredClaims(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	w.until(task.ID, a2a.TaskStateSubmitted)
	w.bridge(nil)
	checkfor.Until(t, 10*time.Second, "the second bridge to claim the Turn", func() bool {
		turn, err := w.admin.GetTurn(ctx, "p", string(task.ID))
		return err == nil && turn.State == "claimed" && turn.Attempts == 2
	})
	close(w.remote.release)
	done := w.until(task.ID, a2a.TaskStateCompleted)
	if n := w.remote.startsOf("slow"); n != 1 {
		t.Errorf("the remote agent started %d tasks, want 1: the next bridge follows the same one", n)
	}
	// The dead bridge wakes up and stops: whatever it sends now is fenced off.
	tr.revive()
	stop1()
	turn, err := w.admin.GetTurn(ctx, "p", string(done.ID))
	if err != nil || turn.Attempts != 2 || turn.Outcome == nil || *turn.Outcome != "succeeded" {
		t.Errorf("Turn after a dead bridge: %+v, %v; want succeeded at the second attempt", turn, err)
	}
}
