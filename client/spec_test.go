package client_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/client"
)

// specOf is what the agent directory says of a spec.
type specOf struct {
	Role                 string
	Enabled, AcceptsWork bool
	Capacity             int
	Capabilities, Grants []string
	Provenance           string
}

func specShown(a *client.Agent) specOf {
	return specOf{a.Role, a.Enabled, a.AcceptsWork, a.Capacity, a.Capabilities, a.Grants, a.Provenance.Kind}
}

// TestOneAgentSpec: one AgentSpec serves registration and the admin's
// bootstrap alike; a field left out takes the server's default (enabled,
// accepting work, capacity 1, role "agent"), false and 0 are said with
// new(…), and a registration that names no provenance is sent as the
// client's.
func TestOneAgentSpec(t *testing.T) {
	s := startServer(t, 0)
	adm := s.admin(t)
	ctx := context.Background()
	requester := client.AgentSpec{Role: "planner", Grants: []string{"turns:dispatch"}, AcceptsWork: new(false), Capacity: new(0)}

	plain, err := adm.RegisterAgent(ctx, "p", client.RegisterRequest{Spec: client.AgentSpec{AgentID: "plain"}})
	if err != nil {
		t.Fatal(err)
	}
	spec := requester
	spec.AgentID = "planner"
	planner, err := adm.RegisterAgent(ctx, "p", client.RegisterRequest{Spec: spec, Provenance: client.Provenance{Kind: client.ProvenanceManual, ExternalRef: "README"}})
	if err != nil {
		t.Fatal(err)
	}
	mat, err := adm.RequestAgentCredentialTokens(ctx, "p", client.TokensRequest{AgentID: "booted", Spec: &requester})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		got  *client.Agent
		want specOf
	}{
		{"a spec of only an agent id", plain, specOf{"agent", true, true, 1, []string{}, []string{}, client.ProvenanceClient}},
		{"a requester registered", planner, specOf{"planner", true, false, 0, []string{}, []string{"turns:dispatch"}, client.ProvenanceManual}},
		{"the same spec bootstrapped", &mat.Profile.Agent, specOf{"planner", true, false, 0, []string{}, []string{"turns:dispatch"}, client.ProvenanceAdminBootstrap}},
	} {
		if diff := cmp.Diff(tc.want, specShown(tc.got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	off, err := adm.RegisterAgent(ctx, "p", client.RegisterRequest{Spec: client.AgentSpec{AgentID: "plain", Enabled: new(false)}})
	if err != nil || off.Enabled {
		t.Errorf("registering again with Enabled new(false) = enabled %v, %v; want disabled", off != nil && off.Enabled, err)
	}
}

// TestListTurnsNewestFirst: NewestFirst lists the newest dispatch first and
// pages on in that order.
func TestListTurnsNewestFirst(t *testing.T) {
	s := startServer(t, 0)
	planner := s.agent(t, "p", "planner", 0, "turns:dispatch")
	s.agent(t, "p", "w", 1)
	var ids []string
	for _, key := range []string{"a", "b", "c"} {
		tv, err := planner.DispatchTurn(context.Background(), "p", client.DispatchRequest{
			TargetAgent: client.AgentRef{ProjectID: "p", AgentID: "w"}, TurnKind: "k", Input: map[string]any{},
			DispatchKey: key, Authority: client.Root("r-" + key)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append([]string{tv.TurnID}, ids...)
	}
	var got []string
	q := client.TurnQuery{NewestFirst: true, Limit: 2}
	for range 5 {
		pg, err := planner.ListTurns(context.Background(), "p", q)
		if err != nil {
			t.Fatal(err)
		}
		for _, tv := range pg.Items {
			got = append(got, tv.TurnID)
		}
		if !pg.More() {
			break
		}
		q.AfterLedgerSeq = *pg.NextAfterLedgerSeq
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("ListTurns newest first (-want +got):\n%s", diff)
	}
}
