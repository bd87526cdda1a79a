package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

// The tests run the client against the whole service as `turnledger serve`
// wires it (package serve), with the ledger's stream in memory, the data
// directory in t.TempDir() and no background reaper; cmd/turnledger's tests
// also run it against the binary's serve.

const adminToken = "client-test-admin-token"

type server struct {
	url string
	api *httpapi.Server
}

// serverConfig changes the defaults of a test server; zero fields keep them.
type serverConfig struct {
	ClaimTTL time.Duration
	// Now is the clock of the engine, the projections and the API (default
	// time.Now), so that a test can expire claims without sleeping.
	Now func() time.Time
}

func startServer(t *testing.T, claimTTL time.Duration) *server {
	t.Helper()
	return startServerWith(t, serverConfig{ClaimTTL: claimTTL})
}

// startServerWith starts a server that stops when the test ends.
func startServerWith(t *testing.T, sc serverConfig) *server {
	t.Helper()
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir, cfg.AdminToken = "127.0.0.1:0", t.TempDir(), adminToken
	cfg.Ledger.Storage = ledger.MemoryStorage
	cfg.ReapInterval = 0
	// A project's write model loads without a bound: under -race on a busy
	// machine the first request of a project could pass the 500 ms default
	// and be answered 503, which these tests, about the client, do not
	// retry (the shedding is httpapi's and serve's to test).
	cfg.Kernel.LoadWait = 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if sc.ClaimTTL > 0 {
		cfg.Kernel.ClaimTTL = sc.ClaimTTL
	}
	cfg.Now = sc.Now
	s, err := serve.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &server{url: s.URL(), api: s.API()}
}

func (s *server) admin(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(s.url, client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// agent registers an agent and returns a client authenticated as it.
func (s *server) agent(t *testing.T, project, agent string, capacity int, grants ...string) *client.Client {
	t.Helper()
	return s.agentWith(t, project, agent, capacity, http.DefaultClient, grants...)
}

func (s *server) agentWith(t *testing.T, project, agent string, capacity int, hc *http.Client, grants ...string) *client.Client {
	t.Helper()
	ctx := context.Background()
	adm := s.admin(t)
	_, err := adm.RegisterAgent(ctx, project, client.RegisterRequest{
		Spec:       client.AgentSpec{AgentID: agent, Role: "worker", Capacity: new(capacity), Capabilities: []string{"summarize"}, Grants: grants},
		Provenance: client.Provenance{Kind: "test"},
	})
	if err != nil {
		t.Fatalf("RegisterAgent(%s) = %v", agent, err)
	}
	cred, err := adm.IssueCredential(ctx, project, agent)
	if err != nil {
		t.Fatalf("IssueCredential(%s) = %v", agent, err)
	}
	c, err := client.New(s.url, client.WithAgent(project, agent, cred.Token), client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func dispatch(t *testing.T, c *client.Client, project, from, to, key string) *client.Turn {
	t.Helper()
	tv, err := c.DispatchTurn(context.Background(), project, client.DispatchRequest{
		RequestedBy: client.AgentRef{ProjectID: project, AgentID: from},
		TargetAgent: client.AgentRef{ProjectID: project, AgentID: to},
		Input:       map[string]any{"text": key}, TurnKind: "summarize", DispatchKey: key,
		Authority: client.Root("req-" + key),
	})
	if err != nil {
		t.Fatalf("DispatchTurn(%s) = %v", key, err)
	}
	return tv
}
