package client_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/stacktest"
)

// The tests run the client against the real server parts, wired as `serve`
// wires them (internal/stacktest); cmd/turnledger's tests also run it
// against the binary's serve.

const adminToken = stacktest.AdminToken

type server struct {
	url string
	api *httpapi.Server
}

func startServer(t *testing.T, claimTTL time.Duration) *server {
	t.Helper()
	st := stacktest.Start(t, stacktest.Config{ClaimTTL: claimTTL})
	return &server{url: st.URL, api: st.API}
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
