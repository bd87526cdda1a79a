package mcpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/mcpapi"
)

type turnView struct {
	TurnID        string          `json:"turn_id"`
	State         string          `json:"state"`
	Outcome       *string         `json:"outcome"`
	FinalPayload  json.RawMessage `json:"final_payload"`
	AwaitingInput *struct {
		Prompt string `json:"prompt"`
	} `json:"awaiting_input"`
	RequestedBy kernel.AgentRef `json:"requested_by"`
}

type claimed struct {
	Claim *kernel.ClaimToken `json:"claim"`
	Turn  *turnView          `json:"turn"`
}

type errBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

var eras = []string{"2025-11-25", "2026-07-28"}

// A requester and a worker, each its own MCP client, drive a Turn from
// dispatch to finish through tools only, in both protocol eras.
func TestRequesterAndWorkerDriveATurn(t *testing.T) {
	e := newEnv(t)
	reqTok := e.agent("p1", "req", false, "turns:dispatch")
	wrkTok := e.agent("p1", "wrk", true)
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			requester := e.client("p1", "req", reqTok, era, nil)
			worker := e.client("p1", "wrk", wrkTok, era, nil)
			if got := requester.InitializeResult().ProtocolVersion; got != era {
				t.Fatalf("negotiated protocol = %s, want %s", got, era)
			}
			// Every method served is declared: prompts/list answers, empty.
			caps := requester.InitializeResult().Capabilities
			if caps.Prompts == nil || caps.Tools == nil || caps.Resources == nil || !caps.Resources.Subscribe {
				t.Errorf("server capabilities = %+v, want prompts, tools and resources with subscribe", caps)
			}
			if pl, err := requester.ListPrompts(context.Background(), nil); err != nil || len(pl.Prompts) != 0 {
				t.Errorf("prompts/list = %+v, %v; want no prompts", pl, err)
			}

			var tools []string
			for tool, err := range requester.Tools(context.Background(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				if tool.OutputSchema == nil || tool.Description == "" {
					t.Errorf("tool %s has no output schema or description", tool.Name)
				}
				tools = append(tools, tool.Name)
			}
			want := []string{"dispatch_turn", "claim_turn", "append_record", "renew_claim", "suspend_turn", "provide_input",
				"finish_turn", "stop_turn", "retry_turn", "get_turn", "get_turn_context", "list_turns", "read_feed", "list_agents"}
			if !slices.Equal(tools, want) {
				t.Fatalf("tools/list = %v, want %v", tools, want)
			}

			var d turnView
			mustCall(t, requester, "dispatch_turn", map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{"text": "hello"}}, &d)
			if d.State != "queued" || d.RequestedBy.AgentID != "req" {
				t.Fatalf("dispatch_turn = %+v, want queued, requested by req", d)
			}
			var c claimed
			mustCall(t, worker, "claim_turn", map[string]any{"wait_s": 5}, &c)
			if c.Claim == nil || c.Turn.TurnID != d.TurnID || c.Turn.State != "claimed" {
				t.Fatalf("claim_turn = %+v, want the claim of %s", c, d.TurnID)
			}
			var rec struct {
				TurnSeq uint64 `json:"turn_seq"`
			}
			mustCall(t, worker, "append_record", map[string]any{"claim": c.Claim, "payload": map[string]any{"step": 1}, "role": "assistant"}, &rec)
			if rec.TurnSeq == 0 {
				t.Errorf("append_record turn_seq = 0")
			}
			var renewed struct {
				Claim kernel.ClaimToken `json:"claim"`
			}
			mustCall(t, worker, "renew_claim", map[string]any{"claim": c.Claim}, &renewed)
			var fin turnView
			mustCall(t, worker, "finish_turn", map[string]any{"claim": renewed.Claim, "outcome": "succeeded", "final_payload": map[string]any{"summary": "hi"}}, &fin)
			if fin.State != "finished" || fin.Outcome == nil || *fin.Outcome != "succeeded" {
				t.Fatalf("finish_turn = %+v, want finished succeeded", fin)
			}

			var got turnView
			mustCall(t, requester, "get_turn", map[string]any{"turn_id": d.TurnID}, &got)
			if got.State != "finished" || string(got.FinalPayload) != `{"summary":"hi"}` {
				t.Fatalf("get_turn = %+v", got)
			}
			var pg struct {
				Items []json.RawMessage `json:"items"`
			}
			mustCall(t, requester, "get_turn_context", map[string]any{"turn_id": d.TurnID}, &pg)
			if len(pg.Items) < 2 {
				t.Errorf("get_turn_context items = %d, want the record and the final record", len(pg.Items))
			}
			mustCall(t, requester, "list_turns", map[string]any{"state": "finished"}, &pg)
			if len(pg.Items) == 0 {
				t.Errorf("list_turns state=finished is empty")
			}
			mustCall(t, requester, "read_feed", map[string]any{"feed": "turn", "turn_id": d.TurnID}, &pg)
			if len(pg.Items) < 4 {
				t.Errorf("read_feed turn items = %d, want dispatched, claimed, record, renewed, finished", len(pg.Items))
			}
			mustCall(t, worker, "read_feed", map[string]any{"feed": "agent"}, &pg)
			if len(pg.Items) == 0 {
				t.Errorf("read_feed agent is empty")
			}
			mustCall(t, requester, "list_agents", map[string]any{}, &pg)
			if len(pg.Items) != 2 {
				t.Errorf("list_agents items = %d, want 2", len(pg.Items))
			}
			// structuredContent is the HTTP route's answer.
			var viaHTTP turnView
			e.admin("GET", "/v3r1/projects/p1/turns/"+d.TurnID, nil, &viaHTTP)
			if viaHTTP.State != got.State || string(viaHTTP.FinalPayload) != string(got.FinalPayload) {
				t.Errorf("HTTP turn = %+v, MCP turn = %+v", viaHTTP, got)
			}
		})
	}
}

// The endpoint refuses missing or wrong credentials with a 401 that points
// at its resource metadata, a foreign Origin with a 403, and agent headers
// that do not match the path with a 403.
func TestEndpointAuthentication(t *testing.T) {
	e := newEnv(t)
	tok := e.agent("p1", "a1", true)
	url := e.endpoint("p1", "a1")
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	post := func(h map[string]string) *http.Response {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	meta := e.url + "/.well-known/oauth-protected-resource/mcp/projects/p1/agents/a1"
	for name, h := range map[string]map[string]string{
		"no token":    {},
		"wrong token": {"Authorization": "Bearer nope"},
		"other agent": {"Authorization": "Bearer " + e.agent("p1", "a2", true)},
	} {
		resp := post(h)
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer resource_metadata="`+meta+`"` {
			t.Errorf("%s: %d %q, want 401 with the resource metadata", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if resp := post(map[string]string{"Authorization": "Bearer " + tok, "Origin": "https://evil.example"}); resp.StatusCode != 403 {
		t.Errorf("foreign origin: %d, want 403", resp.StatusCode)
	}
	for _, origin := range []string{"https://console.example", e.url} {
		if resp := post(map[string]string{"Authorization": "Bearer " + tok, "Origin": origin}); resp.StatusCode != 200 {
			t.Errorf("origin %s: %d, want 200", origin, resp.StatusCode)
		}
	}
	// DNS rebinding: a name that resolves to the server, sent as both Host
	// and Origin by a browser on the attacker's page, is not serve's own.
	if resp := post(map[string]string{"Authorization": "Bearer " + tok, "Host": "evil.example", "Origin": "http://evil.example"}); resp.StatusCode != 403 {
		t.Errorf("rebound name as Host and Origin: %d, want 403", resp.StatusCode)
	}
	port := e.url[strings.LastIndex(e.url, ":")+1:]
	if resp := post(map[string]string{"Authorization": "Bearer " + tok, "Host": "localhost:" + port, "Origin": "http://localhost:" + port}); resp.StatusCode != 200 {
		t.Errorf("localhost as Host and Origin: %d, want 200", resp.StatusCode)
	}
	if resp := post(map[string]string{"Authorization": "Bearer " + tok, "X-Svc-Agent-Id": "a2"}); resp.StatusCode != 403 {
		t.Errorf("mismatched X-Svc-Agent-Id: %d, want 403", resp.StatusCode)
	}
	if resp := post(map[string]string{"Authorization": "Bearer " + tok, "X-Svc-Project-Id": "p2"}); resp.StatusCode != 403 {
		t.Errorf("mismatched X-Svc-Project-Id: %d, want 403", resp.StatusCode)
	}
	if resp := post(map[string]string{"Authorization": "Bearer " + tok, "X-Svc-Agent-Id": "a1", "X-Svc-Project-Id": "p1"}); resp.StatusCode != 200 {
		t.Errorf("matching headers: %d, want 200", resp.StatusCode)
	}

	resp, err := http.Get(meta)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md struct {
		Resource string   `json:"resource"`
		AS       []string `json:"authorization_servers"`
		Doc      string   `json:"resource_documentation"`
	}
	json.NewDecoder(resp.Body).Decode(&md)
	if resp.StatusCode != 200 || md.Resource != url || len(md.AS) != 0 || !strings.Contains(md.Doc, "agent credential") || !strings.Contains(md.Doc, "no OAuth authorization server") {
		t.Errorf("resource metadata = %d %+v", resp.StatusCode, md)
	}
}

// Every tool answers a refusal as a tool result with isError and the HTTP
// API's {error, message} body.
func TestToolRefusals(t *testing.T) {
	e := newEnv(t)
	reqTok := e.agent("p1", "req", false, "turns:dispatch")
	wrkTok := e.agent("p1", "wrk", true)
	otherTok := e.agent("p1", "other", true)
	requester := e.client("p1", "req", reqTok, "2025-11-25", nil)
	worker := e.client("p1", "wrk", wrkTok, "2025-11-25", nil)
	other := e.client("p1", "other", otherTok, "2025-11-25", nil)

	var d turnView
	mustCall(t, requester, "dispatch_turn", map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{"x": 1}}, &d)
	forged := kernel.ClaimToken{ProjectID: "p1", TurnID: d.TurnID, AgentID: "wrk", Token: "forged", ExpiresAt: time.Now().Add(time.Hour)}
	for _, tc := range []struct {
		cs   *mcp.ClientSession
		tool string
		args map[string]any
		want kernel.Kind
	}{
		{requester, "dispatch_turn", map[string]any{"target_agent_id": "nobody", "turn_kind": "summarize"}, ""},
		{requester, "dispatch_turn", map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "bogus": 1}, kernel.Validation},
		{worker, "claim_turn", map[string]any{"wait_s": 3600}, kernel.Validation},
		{worker, "append_record", map[string]any{"claim": forged, "payload": 1}, kernel.Fencing},
		{worker, "renew_claim", map[string]any{"claim": forged}, kernel.Fencing},
		{worker, "suspend_turn", map[string]any{"claim": forged}, kernel.Fencing},
		{requester, "provide_input", map[string]any{"turn_id": d.TurnID, "input": 1}, ""},
		{worker, "finish_turn", map[string]any{"claim": forged, "outcome": "succeeded"}, kernel.Fencing},
		{other, "stop_turn", map[string]any{"turn_id": d.TurnID}, ""},
		{requester, "retry_turn", map[string]any{"turn_id": d.TurnID}, ""},
		{other, "get_turn", map[string]any{"turn_id": d.TurnID}, ""},
		{other, "get_turn_context", map[string]any{"turn_id": d.TurnID}, ""},
		{requester, "list_turns", map[string]any{"state": "sleeping"}, kernel.Validation},
		{requester, "read_feed", map[string]any{"feed": "everything"}, kernel.Validation},
		{requester, "list_agents", map[string]any{"limit": 0}, kernel.Validation},
	} {
		var b errBody
		res := call(t, tc.cs, tc.tool, tc.args, &b)
		if !res.IsError || b.Error == "" || b.Message == "" {
			t.Errorf("%s(%v) = isError %v %+v, want a refusal", tc.tool, tc.args, res.IsError, b)
			continue
		}
		if tc.want != "" && b.Error != string(tc.want) {
			t.Errorf("%s(%v) error = %s (%s), want %s", tc.tool, tc.args, b.Error, b.Message, tc.want)
		}
		t.Logf("%s: %s: %s", tc.tool, b.Error, b.Message)
	}
}

// A subscription to a Turn's resource sends an update notification when the
// Turn changes; the resource reads as get_turn answers.
func TestResourceUpdates(t *testing.T) {
	e := newEnv(t)
	reqTok := e.agent("p1", "req", false, "turns:dispatch")
	wrkTok := e.agent("p1", "wrk", true)
	updated := make(chan string, 16)
	requester := e.client("p1", "req", reqTok, "2025-11-25", &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	})
	worker := e.client("p1", "wrk", wrkTok, "2025-11-25", nil)

	var templates []string
	for tpl, err := range requester.ResourceTemplates(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		templates = append(templates, tpl.URITemplate)
	}
	slices.Sort(templates)
	if want := []string{"turnledger://turns/{turn_id}", "turnledger://turns/{turn_id}/context"}; !slices.Equal(templates, want) {
		t.Fatalf("resource templates = %v, want %v", templates, want)
	}
	var d turnView
	mustCall(t, requester, "dispatch_turn", map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{"x": 1}}, &d)
	uri := "turnledger://turns/" + d.TurnID
	res, err := requester.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	var v turnView
	json.Unmarshal([]byte(res.Contents[0].Text), &v)
	if v.TurnID != d.TurnID || v.State != "queued" {
		t.Fatalf("resources/read %s = %s", uri, res.Contents[0].Text)
	}
	if _, err := requester.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri + "/context"}); err != nil {
		t.Fatal(err)
	}
	if err := requester.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	var c claimed
	mustCall(t, worker, "claim_turn", map[string]any{}, &c)
	select {
	case got := <-updated:
		if got != uri {
			t.Fatalf("updated %s, want %s", got, uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/resources/updated after the Turn was claimed")
	}
	// A Turn the caller may not read cannot be subscribed to.
	other := e.client("p1", "other", e.agent("p1", "other", true), "2025-11-25", nil)
	if err := other.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err == nil {
		t.Errorf("subscribe to a Turn the caller may not read succeeded")
	}
}

// In the 2026-07-28 era a subscription is a subscriptions/listen stream
// naming the Turn's resource: after its acknowledgement, it sends an update
// notification when the Turn changes. Raw JSON-RPC over HTTP, since the SDK
// client does not tell when the server acknowledged the listen.
func TestResourceUpdatesListen(t *testing.T) {
	e := newEnv(t)
	reqTok := e.agent("p1", "req", false, "turns:dispatch")
	wrkTok := e.agent("p1", "wrk", true)
	worker := e.client("p1", "wrk", wrkTok, "2026-07-28", nil)
	if v := worker.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the client speaks %s, want 2026-07-28", v)
	}
	requester := e.client("p1", "req", reqTok, "2026-07-28", nil)
	var d turnView
	mustCall(t, requester, "dispatch_turn", map[string]any{"target_agent_id": "wrk", "turn_kind": "summarize", "input": map[string]any{"x": 1}}, &d)
	uri := "turnledger://turns/" + d.TurnID

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := e.openListen(ctx, "p1", "req", reqTok, 7, uri)
	defer resp.Body.Close()
	type message struct {
		Method string `json:"method"`
		Params struct {
			URI  string         `json:"uri"`
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
		Error json.RawMessage `json:"error"`
	}
	msgs := make(chan message, 16)
	go func() {
		defer close(msgs)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m message
				json.Unmarshal([]byte(data), &m)
				msgs <- m
			}
		}
	}()
	next := func(what string) message {
		t.Helper()
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("the subscriptions/listen stream ended before %s", what)
			}
			return m
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s on the subscriptions/listen stream", what)
		}
		return message{}
	}
	if m := next("acknowledgement"); m.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message of the stream = %+v, want the acknowledgement", m)
	}
	var c claimed
	mustCall(t, worker, "claim_turn", map[string]any{}, &c)
	m := next("notifications/resources/updated after the Turn was claimed")
	if m.Method != "notifications/resources/updated" || m.Params.URI != uri {
		t.Fatalf("message after the claim = %+v, want notifications/resources/updated of %s", m, uri)
	}
	if id := m.Params.Meta["io.modelcontextprotocol/subscriptionId"]; fmt.Sprint(id) != "7" {
		t.Errorf("the notification names subscription %v, want 7", id)
	}

	// A Turn the caller may not read cannot be listened to.
	otherTok := e.agent("p1", "other", true)
	if _, rerr := e.rpc("p1", "other", otherTok, "subscriptions/listen", map[string]any{
		"notifications": map[string]any{"resourceSubscriptions": []string{uri}}}); rerr == nil {
		t.Errorf("subscriptions/listen to a Turn the caller may not read was accepted")
	}
}

// ProjectOf names the project of an endpoint's path, for the HTTP layer's
// per-project in-flight bound, and of no other path.
func TestProjectOf(t *testing.T) {
	for _, tc := range []struct {
		path, want string
		ok         bool
	}{
		{"/mcp/projects/p1/agents/a1", "p1", true},
		{"/mcp/projects/p1/agents/a1/extra", "", false},
		{"/mcp/projects/bad id/agents/a1", "", false},
		{"/.well-known/oauth-protected-resource/mcp/projects/p1/agents/a1", "", false},
		{"/v3r1/projects/p1/agents/a1", "", false},
	} {
		if got, ok := mcpapi.ProjectOf(tc.path); got != tc.want || ok != tc.ok {
			t.Errorf("ProjectOf(%q) = %q, %v; want %q, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}
