package mcpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/mcpapi"
	"github.com/turnledger/turnledger/projection"
)

const adminToken = "test-admin-token"

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// env is one instance over real parts: an embedded nats-server (memory
// storage), a bbolt projection file in a temporary directory, and the HTTP
// API with the MCP handler mounted on a loopback server.
type env struct {
	t       testing.TB
	url     string
	natsURL string
	dbPath  string
	clock   *clock
	store   *projection.Store // the projections of the running instance
	stop    func()
	tune    func(*httpapi.Config) // changes the HTTP API's configuration
	api     *httpapi.Server
	mcp     *mcpapi.Handler
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with the HTTP API's configuration changed by tune.
func newEnvWith(t testing.TB, tune func(*httpapi.Config)) *env {
	t.Helper()
	srv := natstest.Start(t)
	e := &env{t: t, natsURL: srv.ClientURL(), dbPath: filepath.Join(t.TempDir(), "projections.db"),
		clock: &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}, tune: tune}
	e.start()
	return e
}

// start starts the instance (again, after restart's stop): a new engine,
// projector and servers over the same NATS and projection file.
func (e *env) start() {
	t := e.t
	nc := natstest.ConnectURL(t, e.natsURL)
	lcfg := ledger.DefaultConfig()
	lcfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(context.Background(), nc, lcfg)
	if err != nil {
		t.Fatalf("ledger.Open = %v", err)
	}
	pcfg := projection.DefaultConfig()
	pcfg.NoSync = true
	pcfg.Now = e.clock.Now
	store, err := projection.Open(e.dbPath, pcfg)
	if err != nil {
		t.Fatalf("projection.Open = %v", err)
	}
	e.store = store
	kcfg := engine.DefaultConfig()
	kcfg.Now = e.clock.Now
	kcfg.SecretKey = []byte("the instances' shared secret key")
	eng, err := engine.New(l, kcfg)
	if err != nil {
		t.Fatalf("engine.New = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		projection.NewProjector(store, l).Run(ctx)
	}()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	mcfg := mcpapi.DefaultConfig()
	mcfg.Now = e.clock.Now
	mcfg.Logger = logger
	mcfg.AllowedOrigins = []string{"https://console.example"}
	mh, err := mcpapi.New(eng, store, mcfg)
	if err != nil {
		t.Fatalf("mcpapi.New = %v", err)
	}
	hcfg := httpapi.DefaultConfig()
	hcfg.AdminTokenHash = kernel.HashSecret(adminToken)
	hcfg.Now = e.clock.Now
	hcfg.Logger = logger
	hcfg.Mounts = []httpapi.Mount{{Prefix: mcpapi.PathPrefix, Handler: mh, Project: mcpapi.ProjectOf}, {Prefix: mcpapi.MetadataPrefix, Handler: mh}}
	if e.tune != nil {
		e.tune(&hcfg)
	}
	api, err := httpapi.New(eng, store, hcfg)
	if err != nil {
		t.Fatalf("httpapi.New = %v", err)
	}
	hs := httptest.NewServer(api)
	e.url, e.api, e.mcp = hs.URL, api, mh
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			api.StopWaiting()
			mh.StopWaiting()
			hs.CloseClientConnections()
			hs.Close()
			cancel()
			<-done
			store.Close()
			nc.Close()
		})
	}
	t.Cleanup(e.stop)
}

// restart stops the instance and starts a new one over the same NATS
// server and projection file.
func (e *env) restart() {
	e.stop()
	e.start()
}

// admin sends a request of the HTTP API with the admin bearer.
func (e *env) admin(method, path string, body any, out any) {
	e.t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, e.url+path, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		json.Unmarshal(raw, out)
	}
}

// agent registers an agent and returns its credential token.
func (e *env) agent(project, id string, acceptsWork bool, grants ...string) string {
	e.t.Helper()
	if grants == nil {
		grants = []string{}
	}
	e.admin("POST", "/v3r1/projects/"+project+"/agents:register", map[string]any{
		"spec": map[string]any{"agent_id": id, "role": "worker", "description": "agent " + id, "enabled": true,
			"accepts_work": acceptsWork, "capacity": 1, "capabilities": []string{"summarize"}, "grants": grants,
			"public_metadata": map[string]any{}},
		"provenance": map[string]any{"kind": "test", "external_ref": "ref-" + id, "payload_hash": nil},
	}, nil)
	var got struct {
		Token string `json:"token"`
	}
	e.admin("POST", "/v3r1/projects/"+project+"/agents/"+id+"/credentials:issue", nil, &got)
	return got.Token
}

func (e *env) endpoint(project, agent string) string {
	return e.url + "/mcp/projects/" + project + "/agents/" + agent
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// client connects the Go SDK's client to an agent's endpoint, speaking
// the protocol version given.
func (e *env) client(project, agent, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	e.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-" + agent, Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: e.endpoint(project, agent),
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		e.t.Fatalf("connect %s as %s (%s): %v", e.endpoint(project, agent), agent, version, err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and decodes its structured content into out.
func call(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	if out != nil {
		data, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("tools/call %s: decode %s: %v", name, data, err)
		}
	}
	return res
}

// mustCall is call that fails the test on a refusal.
func mustCall(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	if res := call(t, cs, name, args, out); res.IsError {
		data, _ := json.Marshal(res.StructuredContent)
		t.Fatalf("tools/call %s: refused %s", name, data)
	}
}

// rpc sends one JSON-RPC request of the 2026-07-28 protocol (stateless),
// declaring the tasks extension, and returns the raw result or error.
func (e *env) rpc(project, agent, token, method string, params map[string]any) (result, rpcErr json.RawMessage) {
	e.t.Helper()
	return e.rpcWith(map[string]any{"extensions": map[string]any{mcpapi.TasksExtension: map[string]any{}}}, project, agent, token, method, params)
}

// rpcWith is rpc with the client capabilities given.
func (e *env) rpcWith(caps map[string]any, project, agent, token, method string, params map[string]any) (result, rpcErr json.RawMessage) {
	e.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest("POST", e.endpoint(project, agent), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	} else if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 && !bytes.Contains(raw, []byte(`"jsonrpc"`)) {
		e.t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, raw)
	}
	// The answer (an error may come with a 4xx status) is JSON or one SSE event carrying it.
	if i := bytes.Index(raw, []byte("data: ")); i >= 0 && !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		raw = raw[i+len("data: "):]
		if j := bytes.IndexByte(raw, '\n'); j >= 0 {
			raw = raw[:j]
		}
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		e.t.Fatalf("%s: decode %s: %v", method, raw, err)
	}
	return msg.Result, msg.Error
}

// openListen sends a 2026-07-28 subscriptions/listen request (JSON-RPC id
// id) for the resources given and returns its open SSE response, once it
// is answered 200. Raw HTTP, since the SDK client does not tell when the
// server acknowledged the listen.
func (e *env) openListen(ctx context.Context, project, agent, token string, id int, uris ...string) *http.Response {
	e.t.Helper()
	params := map[string]any{"notifications": map[string]any{"resourceSubscriptions": uris},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params})
	req, _ := http.NewRequestWithContext(ctx, "POST", e.endpoint(project, agent), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.t.Fatalf("subscriptions/listen: HTTP %d %s", resp.StatusCode, raw)
	}
	return resp
}
