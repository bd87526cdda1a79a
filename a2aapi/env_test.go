package a2aapi_test

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

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/turnledger/turnledger/a2aapi"
	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
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
// API with the A2A handler mounted (as serve mounts it) on a loopback
// server.
type env struct {
	t       testing.TB
	url     string
	natsURL string
	dbPath  string
	clock   *clock
	cfg     func(*a2aapi.Config)
	hcfg    func(*httpapi.Config)
	api     *httpapi.Server
	stop    func()
}

func newEnv(t testing.TB, cfg func(*a2aapi.Config)) *env {
	return newEnvWith(t, cfg, nil)
}

// newEnvWith is newEnv with the HTTP API's configuration edited by hcfg.
func newEnvWith(t testing.TB, cfg func(*a2aapi.Config), hcfg func(*httpapi.Config)) *env {
	t.Helper()
	srv := natstest.Start(t)
	e := &env{t: t, natsURL: srv.ClientURL(), dbPath: filepath.Join(t.TempDir(), "projections.db"),
		clock: &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}, cfg: cfg, hcfg: hcfg}
	e.start()
	return e
}

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
	acfg := a2aapi.DefaultConfig()
	acfg.Now = e.clock.Now
	acfg.Logger = logger
	if e.cfg != nil {
		e.cfg(&acfg)
	}
	ah, err := a2aapi.New(eng, store, acfg)
	if err != nil {
		t.Fatalf("a2aapi.New = %v", err)
	}
	hcfg := httpapi.DefaultConfig()
	hcfg.AdminTokenHash = kernel.HashSecret(adminToken)
	hcfg.Now = e.clock.Now
	hcfg.Logger = logger
	hcfg.Mounts = []httpapi.Mount{{Prefix: a2aapi.PathPrefix, Handler: ah, Project: a2aapi.ProjectOf}}
	if e.hcfg != nil {
		e.hcfg(&hcfg)
	}
	api, err := httpapi.New(eng, store, hcfg)
	if err != nil {
		t.Fatalf("httpapi.New = %v", err)
	}
	hs := httptest.NewServer(api)
	e.url, e.api = hs.URL, api
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			api.StopWaiting()
			ah.StopWaiting()
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

func (e *env) base(project, agent string) string {
	return e.url + "/a2a/projects/" + project + "/agents/" + agent
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

// card resolves an agent's card with the a2a-go resolver.
func (e *env) card(project, agent, token string) (*a2a.AgentCard, error) {
	return agentcard.NewResolver(http.DefaultClient).Resolve(context.Background(), e.base(project, agent),
		agentcard.WithRequestHeader("Authorization", "Bearer "+token))
}

// client is an a2a-go client of an agent, made from its card, speaking
// the binding given, as the caller whose token it is.
func (e *env) client(project, agent, token string, binding a2a.TransportProtocol) *a2aclient.Client {
	e.t.Helper()
	card, err := e.card(project, agent, token)
	if err != nil {
		e.t.Fatalf("resolve the card of %s: %v", agent, err)
	}
	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	c, err := a2aclient.NewFromCard(context.Background(), card,
		a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}))
	if err != nil {
		e.t.Fatalf("a2aclient.NewFromCard: %v", err)
	}
	e.t.Cleanup(func() { c.Destroy() })
	return c
}

// worker is the Go client of an agent (the one that works the Turns).
func (e *env) worker(project, agent, token string) *client.Client {
	e.t.Helper()
	c, err := client.New(e.url, client.WithAgent(project, agent, token))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds, within a bound.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	checkfor.Until(t, 10*time.Second, what, cond)
}

// another starts a second instance over the same NATS server, with
// projections of its own (folded from the same stream).
func (e *env) another() *env {
	e.t.Helper()
	o := &env{t: e.t, natsURL: e.natsURL, dbPath: filepath.Join(e.t.TempDir(), "other.db"), clock: e.clock, cfg: e.cfg}
	o.start()
	return o
}
