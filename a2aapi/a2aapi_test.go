package a2aapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/a2aapi"
	"github.com/turnledger/turnledger/client"
)

var bindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON}

// message is a user message with one text part.
func message(id, text string) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.ID = id
	return m
}

func send(t *testing.T, c *a2aclient.Client, m *a2a.Message, immediately bool) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: immediately}})
	if err != nil {
		t.Fatalf("SendMessage(%s) = %v", m.ID, err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage(%s) = %T, want a task", m.ID, res)
	}
	return task
}

func TestCardDiscovery(t *testing.T) {
	e := newEnv(t, nil)
	boss := e.agent("p", "boss", false, "turns:dispatch")
	e.agent("p", "writer", true)
	card, err := e.card("p", "writer", boss)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	base := e.base("p", "writer")
	want := &a2a.AgentCard{
		Name: "writer", Description: "agent writer", Version: a2aapi.Version,
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: base, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: base, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2a.Version},
		},
		Capabilities: a2a.AgentCapabilities{Streaming: true, Extensions: []a2a.AgentExtension{{URI: a2aapi.ResumeExtension,
			Description: card.Capabilities.Extensions[0].Description}}},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             []a2a.AgentSkill{{ID: "summarize", Name: "summarize", Description: card.Skills[0].Description, Tags: []string{"turn_kind"}}},
		SecuritySchemes: a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "a turnledger agent credential token of the calling agent, of this agent's project"}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"bearer": a2a.SecuritySchemeScopes{}}},
	}
	if diff := cmp.Diff(want, card); diff != "" {
		t.Errorf("card of writer (-want +got):\n%s", diff)
	}

	// A drained agent's card says so.
	e.admin("POST", "/v3r1/projects/p/management/agents/writer:drain", map[string]any{"agent": map[string]any{"project_id": "p", "agent_id": "writer"}, "requested_by": map[string]any{"project_id": "p", "agent_id": "boss"}}, nil)
	card, err = e.card("p", "writer", boss)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(card.Description, "not accepting tasks: drained") {
		t.Errorf("card of a drained agent: description %q does not say it is drained", card.Description)
	}

	// No card without a credential of the project; none of an unknown agent.
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{"/a2a/projects/p/agents/writer/.well-known/agent-card.json", "", 401},
		{"/a2a/projects/p/agents/writer/.well-known/agent-card.json", "tla_wrong", 401},
		{"/a2a/projects/p/agents/ghost/.well-known/agent-card.json", boss, 404},
	} {
		req, _ := http.NewRequest("GET", e.url+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), `"error"`) {
			t.Errorf("GET %s with token %q = %d %s, want %d with an {error, message} body", tc.path, tc.token, resp.StatusCode, body, tc.status)
		}
	}
}

// TestTaskToCompleted: a task sent by an A2A client, worked by a worker
// with the Go client (a note, an artifact, the final payload), read back
// with its history and artifacts; over both bindings.
func TestTaskToCompleted(t *testing.T) {
	e := newEnv(t, nil)
	boss := e.agent("p", "boss", false, "turns:dispatch")
	wtok := e.agent("p", "writer", true)
	w := e.worker("p", "writer", wtok)
	ctx := context.Background()
	for _, binding := range bindings {
		t.Run(string(binding), func(t *testing.T) {
			c := e.client("p", "writer", boss, binding)
			m := message("msg-"+string(binding), "summarize this")
			m.ContextID = "ctx-" + string(binding)
			m.Metadata = map[string]any{"skill": "summarize"}
			task := send(t, c, m, true)
			if task.Status.State != a2a.TaskStateSubmitted || task.ContextID != m.ContextID {
				t.Fatalf("sent task = %s in context %q, want SUBMITTED in %q", task.Status.State, task.ContextID, m.ContextID)
			}
			claim, err := w.ClaimTurn(ctx, "p", "writer", 0)
			if err != nil || claim == nil {
				t.Fatalf("ClaimTurn = %v, %v", claim, err)
			}
			if claim.Turn.TurnID != string(task.ID) || claim.Turn.TurnKind != "summarize" {
				t.Fatalf("claimed %s (%s), want task %s of kind summarize", claim.Turn.TurnID, claim.Turn.TurnKind, task.ID)
			}
			got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil || got.Status.State != a2a.TaskStateWorking {
				t.Fatalf("GetTask of a claimed Turn = %v, %v; want WORKING", got, err)
			}
			if _, err := w.AppendSemanticRecord(ctx, claim.Claim, "note", map[string]any{"parts": []any{map[string]any{"text": "reading"}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.AppendSemanticRecord(ctx, claim.Claim, "artifact", map[string]any{"artifactId": "draft", "name": "draft",
				"parts": []any{map[string]any{"text": "a draft"}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.FinishTurn(ctx, claim.Claim, client.FinishRequest{Outcome: "succeeded", FinalPayload: map[string]any{"summary": "short"}, FinalRecordRole: "final"}); err != nil {
				t.Fatal(err)
			}
			got, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.State != a2a.TaskStateCompleted {
				t.Errorf("state = %s, want COMPLETED", got.Status.State)
			}
			type msg struct {
				Role a2a.MessageRole
				Text string
			}
			var history []msg
			for _, h := range got.History {
				history = append(history, msg{h.Role, h.Parts[0].Text()})
			}
			if diff := cmp.Diff([]msg{{a2a.MessageRoleUser, "summarize this"}, {a2a.MessageRoleAgent, "reading"}}, history); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
			if len(got.Artifacts) != 2 || got.Artifacts[0].ID != "draft" || got.Artifacts[0].Parts[0].Text() != "a draft" ||
				got.Artifacts[1].ID != "final" || !cmp.Equal(got.Artifacts[1].Parts[0].Data(), map[string]any{"summary": "short"}) {
				t.Errorf("artifacts = %+v, want the draft then the final payload", got.Artifacts)
			}
			one := 1
			got, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID, HistoryLength: &one})
			if err != nil || len(got.History) != 1 || got.History[0].Parts[0].Text() != "reading" {
				t.Errorf("GetTask(historyLength 1) history = %+v, %v; want the last message", got.History, err)
			}
			list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: m.ContextID})
			if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != task.ID {
				t.Errorf("ListTasks(contextId %s) = %+v, %v; want the one task", m.ContextID, list, err)
			}
		})
	}
}

// TestBlockingSendAndResend: a blocking send answers once the task is
// finished; a retried send (same messageId) is the same task; ListTasks
// filters by status and pages.
func TestBlockingSendAndResend(t *testing.T) {
	e := newEnv(t, nil)
	boss := e.agent("p", "boss", false, "turns:dispatch")
	wtok := e.agent("p", "writer", true)
	w := e.worker("p", "writer", wtok)
	c := e.client("p", "writer", boss, a2a.TransportProtocolJSONRPC)
	ctx := context.Background()
	done := make(chan *a2a.Task, 1)
	go func() {
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: message("m1", "work")})
		if err != nil {
			t.Errorf("blocking SendMessage = %v", err)
			done <- nil
			return
		}
		done <- res.(*a2a.Task)
	}()
	var claim *client.ClaimResult
	waitFor(t, "the Turn to be claimable", func() bool {
		var err error
		claim, err = w.ClaimTurn(ctx, "p", "writer", 0)
		return err == nil && claim != nil
	})
	if _, err := w.FinishTurn(ctx, claim.Claim, client.FinishRequest{Outcome: "failed", FinalPayload: map[string]any{"error": "no"}, FinalRecordRole: "error"}); err != nil {
		t.Fatal(err)
	}
	task := <-done
	if task == nil || task.Status.State != a2a.TaskStateFailed || string(task.ID) != claim.Turn.TurnID {
		t.Fatalf("blocking send answered %+v, want the task FAILED", task)
	}
	again := send(t, c, message("m1", "work"), true)
	if again.ID != task.ID {
		t.Errorf("a re-sent message made task %s, want %s", again.ID, task.ID)
	}
	changed := message("m1", "other work")
	if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: changed, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Errorf("another message under a used messageId = %v, want %v", err, a2a.ErrUnsupportedOperation)
	}
	other := send(t, c, message("m2", "more"), true)
	failed, err := c.ListTasks(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateFailed})
	if err != nil || len(failed.Tasks) != 1 || failed.Tasks[0].ID != task.ID {
		t.Errorf("ListTasks(FAILED) = %+v, %v; want %s", failed, err, task.ID)
	}
	page, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 1})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != task.ID || page.NextPageToken == "" {
		t.Fatalf("ListTasks(pageSize 1) = %+v, %v", page, err)
	}
	next, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 1, PageToken: page.NextPageToken})
	if err != nil || len(next.Tasks) != 1 || next.Tasks[0].ID != other.ID {
		t.Errorf("ListTasks(second page) = %+v, %v; want %s", next, err, other.ID)
	}
}

func TestCancelTask(t *testing.T) {
	e := newEnv(t, nil)
	boss := e.agent("p", "boss", false, "turns:dispatch")
	wtok := e.agent("p", "writer", true)
	w := e.worker("p", "writer", wtok)
	ctx := context.Background()
	for _, binding := range bindings {
		t.Run(string(binding), func(t *testing.T) {
			c := e.client("p", "writer", boss, binding)
			queued := send(t, c, message("q-"+string(binding), "never mind"), true)
			got, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: queued.ID})
			if err != nil || got.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("CancelTask(queued) = %+v, %v; want CANCELED", got, err)
			}
			if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: queued.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
				t.Errorf("CancelTask(canceled) = %v, want %v", err, a2a.ErrTaskNotCancelable)
			}
			// A claimed task: a stop request, CANCELED once its holder stops.
			held := send(t, c, message("h-"+string(binding), "long work"), true)
			claim, err := w.ClaimTurn(ctx, "p", "writer", 0)
			if err != nil || claim == nil {
				t.Fatal(err)
			}
			got, err = c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: held.ID})
			if err != nil || got.Status.State != a2a.TaskStateWorking {
				t.Fatalf("CancelTask(claimed) = %+v, %v; want WORKING until the holder stops", got, err)
			}
			renew, err := w.RenewClaim(ctx, claim.Claim)
			if err != nil || !renew.StopRequested {
				t.Fatalf("RenewClaim after a cancel = %+v, %v; want stop_requested", renew, err)
			}
			if _, err := w.FinishTurn(ctx, claim.Claim, client.FinishRequest{Outcome: "stopped"}); err != nil {
				t.Fatal(err)
			}
			got, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: held.ID})
			if err != nil || got.Status.State != a2a.TaskStateCanceled {
				t.Errorf("GetTask after the holder stopped = %+v, %v; want CANCELED", got, err)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	e := newEnv(t, nil)
	boss := e.agent("p", "boss", false, "turns:dispatch")
	nogrant := e.agent("p", "nogrant", false)
	e.agent("p", "writer", true)
	e.agent("p", "lazy", false)
	e.agent("p", "drained", true)
	e.admin("POST", "/v3r1/projects/p/management/agents/drained:drain", map[string]any{"agent": map[string]any{"project_id": "p", "agent_id": "drained"}, "requested_by": map[string]any{"project_id": "p", "agent_id": "boss"}}, nil)
	ctx := context.Background()
	for _, binding := range bindings {
		t.Run(string(binding), func(t *testing.T) {
			send := func(c *a2aclient.Client, id string) error {
				_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: message(id, "x"), Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
				return err
			}
			if err := send(e.client("p", "writer", nogrant, binding), "n1"); !errors.Is(err, a2a.ErrUnauthorized) {
				t.Errorf("send without turns:dispatch = %v, want %v", err, a2a.ErrUnauthorized)
			}
			if err := send(e.client("p", "drained", boss, binding), "d1"); !errors.Is(err, a2a.ErrUnsupportedOperation) {
				t.Errorf("send to a drained agent = %v, want %v", err, a2a.ErrUnsupportedOperation)
			}
			if err := send(e.client("p", "lazy", boss, binding), "l1"); !errors.Is(err, a2a.ErrUnsupportedOperation) {
				t.Errorf("send to an agent not accepting work = %v, want %v", err, a2a.ErrUnsupportedOperation)
			}
			c := e.client("p", "writer", boss, binding)
			if _, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: "turn_0000000000000000000000000000dead"}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("GetTask(unknown) = %v, want %v", err, a2a.ErrTaskNotFound)
			}
			if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: "nope"}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("CancelTask(unknown) = %v, want %v", err, a2a.ErrTaskNotFound)
			}
			// A task of another agent is not a task of this one.
			task := send2(t, c, "w-"+string(binding))
			if _, err := e.client("p", "lazy", boss, binding).GetTask(ctx, &a2a.GetTaskRequest{ID: task}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("GetTask of writer's task at lazy = %v, want %v", err, a2a.ErrTaskNotFound)
			}
			// Another agent without the read grant does not see it.
			if _, err := e.client("p", "writer", nogrant, binding).GetTask(ctx, &a2a.GetTaskRequest{ID: task}); err == nil {
				t.Errorf("GetTask by an agent that may not read the Turn succeeded")
			}
		})
	}
	// A wrong token is refused before any binding, 401 with the HTTP API's body.
	for _, tc := range []struct{ name, auth string }{{"no token", ""}, {"wrong token", "Bearer tla_wrong"}, {"basic", "Basic eDp5"}} {
		req, _ := http.NewRequest("POST", e.base("p", "writer"), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`))
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(body), `"error":"UnauthorizedError"`) || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %s, want 401 UnauthorizedError with WWW-Authenticate", tc.name, resp.StatusCode, body)
		}
	}
	hc := &http.Client{Transport: bearer{"tla_wrong", http.DefaultTransport}}
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(e.base("p", "writer"), a2a.TransportProtocolHTTPJSON)}, a2aclient.WithRESTTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: "x"}); err == nil {
		t.Error("GetTask with a wrong token succeeded")
	}
	// X-Svc-Agent-Id must match the token's agent when sent.
	req, _ := http.NewRequest("POST", e.base("p", "writer"), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`))
	req.Header.Set("Authorization", "Bearer "+boss)
	req.Header.Set("X-Svc-Agent-Id", "writer")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("X-Svc-Agent-Id of another agent = %d, want 403", resp.StatusCode)
	}
}

func send2(t *testing.T, c *a2aclient.Client, id string) a2a.TaskID {
	t.Helper()
	return send(t, c, message(id, "x"), true).ID
}

// TestInputRequired: a worker waits for input; the task is INPUT_REQUIRED
// with the prompt; a second message with the task id answers it, and the
// worker finds the answer in the Turn's context.
func TestInputRequired(t *testing.T) {
	e := newEnv(t, nil)
	boss := e.agent("p", "boss", false, "turns:dispatch")
	wtok := e.agent("p", "writer", true)
	w := e.worker("p", "writer", wtok)
	ctx := context.Background()
	c := e.client("p", "writer", boss, a2a.TransportProtocolJSONRPC)
	task := send(t, c, message("ask", "refund 20 EUR"), true)
	claim, err := w.ClaimTurn(ctx, "p", "writer", 0)
	if err != nil || claim == nil {
		t.Fatal(err)
	}
	if _, err := w.SuspendTurnForInput(ctx, claim.Claim, client.InputWait{Prompt: "Approve?"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateInputRequired || got.Status.Message == nil || got.Status.Message.Parts[0].Text() != "Approve?" {
		t.Fatalf("GetTask of a Turn awaiting input = %+v, %v; want INPUT_REQUIRED with the prompt", got, err)
	}
	answer := a2a.NewMessageForTask(a2a.MessageRoleUser, got, a2a.NewDataPart(map[string]any{"approve": true}))
	answer.ID = "answer-1"
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: answer, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatalf("SendMessage(answer) = %v", err)
	}
	if after := res.(*a2a.Task); after.ID != task.ID || after.Status.State != a2a.TaskStateSubmitted {
		t.Errorf("answered task = %s %s, want %s SUBMITTED", after.ID, after.Status.State, task.ID)
	}
	// The same answer sent again (its answer lost) is the same answer;
	// another one is refused: the task no longer waits.
	res, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: answer, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil || res.(*a2a.Task).ID != task.ID {
		t.Errorf("the answer sent again = %v, %v; want the task", res, err)
	}
	other := a2a.NewMessageForTask(a2a.MessageRoleUser, got, a2a.NewDataPart(map[string]any{"approve": false}))
	other.ID = "answer-2"
	if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: other}); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Errorf("a second answer = %v, want %v", err, a2a.ErrUnsupportedOperation)
	}
	claim, err = w.ClaimTurn(ctx, "p", "writer", 0)
	if err != nil || claim == nil {
		t.Fatal(err)
	}
	items, err := w.TurnContext(ctx, "p", claim.Turn.TurnID, 0, 10)
	if err != nil || len(items.Items) != 1 || items.Items[0].Role != "input" {
		t.Fatalf("context after the answer = %+v, %v; want the input record", items, err)
	}
	if _, err := w.FinishTurn(ctx, claim.Claim, client.FinishRequest{Outcome: "succeeded", FinalPayload: map[string]any{"refunded": true}, FinalRecordRole: "final"}); err != nil {
		t.Fatal(err)
	}
	got, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted || len(got.History) != 2 || got.History[1].Role != a2a.MessageRoleUser {
		t.Errorf("finished task = %+v, %v; want COMPLETED with the answer in its history", got, err)
	}
}

// TestFailedAuthenticationsAreThrottled: past the burst of failures from an
// address, a wrong token is answered 429 with Retry-After, while a valid
// credential is still served.
func TestFailedAuthenticationsAreThrottled(t *testing.T) {
	e := newEnv(t, func(c *a2aapi.Config) { c.AuthFailures.Burst, c.AuthFailures.Every = 2, time.Hour })
	boss := e.agent("p", "boss", false, "turns:dispatch")
	e.agent("p", "writer", true)
	get := func(token string) *http.Response {
		req, _ := http.NewRequest("GET", e.base("p", "writer")+"/.well-known/agent-card.json", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	var codes []int
	for range 3 {
		codes = append(codes, get("tla_wrong").StatusCode)
	}
	if diff := cmp.Diff([]int{401, 401, 429}, codes); diff != "" {
		t.Errorf("statuses of three wrong tokens (-want +got):\n%s", diff)
	}
	if resp := get("tla_wrong"); resp.Header.Get("Retry-After") == "" {
		t.Error("a throttled request has no Retry-After")
	}
	if resp := get(boss); resp.StatusCode != 200 {
		t.Errorf("a valid credential while the address is throttled = %d, want 200", resp.StatusCode)
	}
}
