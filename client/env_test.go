package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
)

// The tests run the client against the real server parts, wired as `serve`
// wires them: an embedded nats-server with JetStream, the ledger, the
// engine, a bbolt projection folded by a projector and the HTTP API on a
// loopback port. (cmd/turnledger's tests also run it against the binary's
// serve.)

const adminToken = "client-test-admin-token"

type server struct {
	url string
	api *httpapi.Server
}

func startServer(t *testing.T, claimTTL time.Duration) *server {
	t.Helper()
	srv := natstest.Start(t)
	nc := natstest.ConnectURL(t, srv.ClientURL())
	lcfg := ledger.DefaultConfig()
	lcfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(context.Background(), nc, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := projection.DefaultConfig()
	pcfg.NoSync = true
	store, err := projection.Open(filepath.Join(t.TempDir(), "projections.db"), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	kcfg := kernel.DefaultConfig()
	if claimTTL > 0 {
		kcfg.ClaimTTL = claimTTL
	}
	engine, err := kernel.NewEngine(l, kcfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		projection.NewProjector(store, l).Run(ctx)
	}()
	hcfg := httpapi.DefaultConfig()
	hcfg.AdminTokenHash = kernel.HashSecret(adminToken)
	hcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	api, err := httpapi.New(engine, store, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		api.StopWaiting()
		hs.Close()
		cancel()
		wg.Wait()
		store.Close()
	})
	return &server{url: hs.URL, api: api}
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
		Spec:       client.AgentSpec{AgentID: agent, Role: "worker", Enabled: true, AcceptsWork: true, Capacity: capacity, Capabilities: []string{"summarize"}, Grants: grants},
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
