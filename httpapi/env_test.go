package httpapi_test

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

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
)

const adminToken = "test-admin-token"

// clock is a settable clock for the engine and the API.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is one turnledger instance over real parts: an embedded nats-server
// with JetStream (memory storage), a bbolt projection file in a temporary
// directory, and the API on a loopback HTTP server.
type env struct {
	t      testing.TB
	url    string
	clock  *clock
	ledger *ledger.Store
	store  *projection.Store
	engine *engine.Engine
	api    *httpapi.Server
}

const testSecretKey = "the instances' shared secret key"

// newEnv starts an instance on a fresh NATS server.
func newEnv(t testing.TB) *env {
	t.Helper()
	srv := natstest.Start(t)
	return newEnvOn(t, srv.ClientURL(), &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)})
}

// newEnvOn starts another instance on an existing NATS server: instances
// share nothing but NATS.
func newEnvOn(t testing.TB, natsURL string, clk *clock, configure ...func(*httpapi.Config)) *env {
	t.Helper()
	nc := natstest.ConnectURL(t, natsURL)
	lcfg := ledger.DefaultConfig()
	lcfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(context.Background(), nc, lcfg)
	if err != nil {
		t.Fatalf("ledger.Open = %v", err)
	}
	pcfg := projection.DefaultConfig()
	pcfg.NoSync = true
	pcfg.Now = clk.Now
	store, err := projection.Open(filepath.Join(t.TempDir(), "projections.db"), pcfg)
	if err != nil {
		t.Fatalf("projection.Open = %v", err)
	}
	kcfg := engine.DefaultConfig()
	kcfg.Now = clk.Now
	kcfg.SecretKey = []byte(testSecretKey) // shared by the instances of a test, as in a deployment
	engine, err := engine.New(l, kcfg)
	if err != nil {
		t.Fatalf("engine.New = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		projection.NewProjector(store, l).Run(ctx)
	}()
	hcfg := httpapi.DefaultConfig()
	hcfg.AdminTokenHash = kernel.HashSecret(adminToken)
	hcfg.Now = clk.Now
	hcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, f := range configure {
		f(&hcfg)
	}
	api, err := httpapi.New(engine, store, hcfg)
	if err != nil {
		t.Fatalf("httpapi.New = %v", err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		api.StopWaiting()
		hs.Close()
		cancel()
		<-done
		store.Close()
	})
	return &env{t: t, url: hs.URL, clock: clk, ledger: l, store: store, engine: engine, api: api}
}

// response is a decoded HTTP response.
type response struct {
	status int
	body   []byte
}

func (r response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errorName returns the `error` field of an error body.
func (r response) errorName() string {
	var b struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	json.Unmarshal(r.body, &b)
	return b.Error
}

// as is who sends a request: the admin, an agent with its token, or nobody.
type as struct {
	project, agent, token string
	admin                 bool
	key                   string // an Idempotency-Key to send
}

// withKey is who, sending the Idempotency-Key k.
func (who as) withKey(k string) as { who.key = k; return who }

var (
	asAdmin  = as{admin: true}
	asNobody = as{}
)

func (e *env) do(who as, method, path string, body any) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if who.key != "" {
		req.Header.Set(httpapi.IdempotencyHeader, who.key)
	}
	switch {
	case who.admin:
		req.Header.Set("Authorization", "Bearer "+adminToken)
	case who.agent != "":
		req.Header.Set(httpapi.HeaderProject, who.project)
		req.Header.Set(httpapi.HeaderAgent, who.agent)
		req.Header.Set("Authorization", "Bearer "+who.token)
	case who.token != "":
		req.Header.Set("Authorization", "Bearer "+who.token) // a bearer alone: an input token
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: data}
}

// must sends a request and fails the test unless the status is want.
func (e *env) must(who as, method, path string, body any, want int) response {
	e.t.Helper()
	r := e.do(who, method, path, body)
	if r.status != want {
		e.t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.body, want)
	}
	return r
}

func ref(project, agent string) map[string]string {
	return map[string]string{"project_id": project, "agent_id": agent}
}

// register registers an agent with the admin bearer and issues it a
// credential; it returns who the agent is.
func (e *env) register(project, agent string, capacity int, grants ...string) as {
	e.t.Helper()
	if grants == nil {
		grants = []string{}
	}
	e.must(asAdmin, "POST", "/v3r1/projects/"+project+"/agents:register", map[string]any{
		"spec": map[string]any{"agent_id": agent, "role": "worker", "description": "", "enabled": true, "accepts_work": true,
			"capacity": capacity, "capabilities": []string{"summarize"}, "grants": grants, "public_metadata": map[string]any{}},
		"provenance": map[string]any{"kind": "test", "external_ref": "", "payload_hash": nil},
	}, 200)
	r := e.must(asAdmin, "POST", "/v3r1/projects/"+project+"/agents/"+agent+"/credentials:issue", nil, 200)
	var issued struct {
		Token string `json:"token"`
	}
	r.decode(e.t, &issued)
	return as{project: project, agent: agent, token: issued.Token}
}

func dispatchBody(project, from, to, key string, input any) map[string]any {
	return map[string]any{
		"requested_by": ref(project, from), "target_agent": ref(project, to), "input": input,
		"turn_kind": "summarize", "dispatch_key": key,
		"authority": map[string]any{"mode": "root_request", "request_id": "req-" + key},
		"meta":      nil, "trace": nil,
	}
}

// turn is the part of a Turn snapshot tests look at.
type turn struct {
	TurnID          string          `json:"turn_id"`
	State           string          `json:"state"`
	Outcome         *string         `json:"outcome"`
	StopRequested   bool            `json:"stop_requested"`
	StopRequestedAt *time.Time      `json:"stop_requested_at"`
	LastTurnSeq     uint64          `json:"last_turn_seq"`
	Depth           int             `json:"depth"`
	RootTurnID      string          `json:"root_turn_id"`
	FinalPayload    json.RawMessage `json:"final_payload"`
	Claim           *struct {
		AgentID   string    `json:"agent_id"`
		ExpiresAt time.Time `json:"expires_at"`
	} `json:"claim"`
}

type claimToken struct {
	ProjectID string `json:"project_id"`
	TurnID    string `json:"turn_id"`
	AgentID   string `json:"agent_id"`
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

type claimed struct {
	Claim claimToken `json:"claim"`
	Turn  turn       `json:"turn"`
}

func (e *env) dispatch(who as, to, key string) turn {
	e.t.Helper()
	var tv turn
	e.must(who, "POST", "/v3r1/projects/"+who.project+"/turns:dispatch", dispatchBody(who.project, who.agent, to, key, map[string]any{"q": key}), 200).decode(e.t, &tv)
	return tv
}

// claim claims the next Turn for who; nil when none.
func (e *env) claim(who as) *claimed {
	e.t.Helper()
	r := e.must(who, "POST", "/v3r1/projects/"+who.project+"/agents/"+who.agent+"/claims:claim",
		map[string]any{"agent": ref(who.project, who.agent), "meta": nil, "trace": nil}, 200)
	if string(bytes.TrimSpace(r.body)) == "null" {
		return nil
	}
	var c claimed
	r.decode(e.t, &c)
	return &c
}
