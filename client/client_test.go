package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnledger/turnledger/client"
)

// TestClientEveryRoute calls every method once against a real server and
// checks what each answers.
func TestClientEveryRoute(t *testing.T) {
	s := startServer(t, 0)
	ctx := context.Background()
	adm := s.admin(t)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch", "management", "projections:read")
	w := s.agent(t, "p", "w", 2)
	wRef := client.AgentRef{ProjectID: "p", AgentID: "w"}
	bossRef := client.AgentRef{ProjectID: "p", AgentID: "boss"}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s = %v", what, err)
		}
	}

	must("Healthz", adm.Healthz(ctx))
	_, err := adm.Readyz(ctx)
	must("Readyz", err)
	doc, err := adm.OpenAPI(ctx)
	must("OpenAPI", err)
	if !json.Valid(doc) {
		t.Error("OpenAPI returned invalid JSON")
	}
	// serve answers /metrics to loopback clients.
	if m, err := adm.Metrics(ctx); err != nil || !strings.Contains(m, "turnledger_commands_total") {
		t.Errorf("Metrics = %.80q, %v; want the Prometheus text with turnledger_commands_total", m, err)
	}

	// Credentials.
	creds, err := w.ListCredentials(ctx, "p", "w")
	must("ListCredentials", err)
	if len(creds.Items) != 1 || creds.Items[0].Status != "active" {
		t.Errorf("ListCredentials = %+v, want one active credential", creds.Items)
	}
	extra, err := adm.IssueCredential(ctx, "p", "w")
	must("IssueCredential", err)
	must("RevokeCredential", adm.RevokeCredential(ctx, "p", "w", extra.Credential.CredentialID))
	if _, err := client.New(s.url, client.WithAgent("p", "w", extra.Token)); err != nil {
		t.Fatal(err)
	}

	// Agents.
	a, err := w.GetAgent(ctx, "p", "w")
	must("GetAgent", err)
	if a.Capacity != 2 || !a.Admitting {
		t.Errorf("GetAgent = capacity %d admitting %v, want 2 true", a.Capacity, a.Admitting)
	}
	_, err = w.SubmitWorkMemoryReport(ctx, "p", "w", client.WorkMemoryReport{RequestID: "wm1", Summary: "s",
		Records: []client.WorkMemoryRecord{{Role: "observation", Payload: map[string]any{"a": 1}, SourceRefs: []any{}}}, DeclaredProjectID: "p", DeclaredAgentID: "w"})
	must("SubmitWorkMemoryReport", err)
	if a, err = boss.DrainAgent(ctx, "p", "w", bossRef); err != nil || !a.Drained {
		t.Errorf("DrainAgent = %+v, %v; want drained", a, err)
	}
	if a, err = boss.ResumeAgent(ctx, "p", "w", bossRef); err != nil || a.Drained {
		t.Errorf("ResumeAgent = %+v, %v; want not drained", a, err)
	}
	_, err = w.HeartbeatPresence(ctx, "p", "w")
	must("HeartbeatPresence", err)
	if a, err = boss.ReplacePublicMetadata(ctx, "p", "w", map[string]any{"team": "blue"}); err != nil || string(a.PublicMetadata) != `{"team":"blue"}` {
		t.Errorf("ReplacePublicMetadata = %s, %v", a.PublicMetadata, err)
	}

	// A Turn's life.
	if c, err := w.ClaimTurn(ctx, "p", "w", 0); c != nil || err != nil {
		t.Errorf("ClaimTurn with nothing queued = %v, %v; want nil, nil", c, err)
	}
	tv := dispatch(t, boss, "p", "boss", "w", "k1")
	c, err := w.ClaimTurn(ctx, "p", "w", time.Second)
	if err != nil || c == nil || c.Turn.TurnID != tv.TurnID {
		t.Fatalf("ClaimTurn = %+v, %v; want the Turn %s", c, err, tv.TurnID)
	}
	r, err := w.RenewClaim(ctx, c.Claim)
	must("RenewClaim", err)
	if r.Claim.Token != c.Claim.Token {
		t.Error("RenewClaim changed the token")
	}
	rec, err := w.AppendSemanticRecord(ctx, c.Claim, "note", map[string]any{"x": 1})
	if err != nil || rec.TurnSeq != 1 {
		t.Errorf("AppendSemanticRecord = %+v, %v; want turn_seq 1", rec, err)
	}
	kid, err := w.DispatchTurn(ctx, "p", client.DispatchRequest{RequestedBy: wRef, TargetAgent: wRef, TurnKind: "summarize", DispatchKey: "kid", Authority: client.Child(c.Claim)})
	must("DispatchTurn child", err)
	lin, err := w.TurnLineage(ctx, "p", kid.TurnID, 10)
	if err != nil || len(lin.Items) != 2 {
		t.Errorf("TurnLineage = %+v, %v; want 2 items", lin, err)
	}
	cp, err := w.TurnContext(ctx, "p", tv.TurnID, 0, 10)
	if err != nil || len(cp.Items) != 1 {
		t.Errorf("TurnContext = %+v, %v; want 1 record", cp, err)
	}
	if st, err := w.SuspendTurn(ctx, c.Claim); err != nil || st.State != "suspended" {
		t.Errorf("SuspendTurn = %+v, %v", st, err)
	}
	if st, err := boss.ResumeTurn(ctx, "p", tv.TurnID, bossRef); err != nil || st.State != "queued" {
		t.Errorf("ResumeTurn = %+v, %v", st, err)
	}
	c2, err := w.ClaimTurn(ctx, "p", "w", time.Second)
	if err != nil || c2 == nil {
		t.Fatalf("ClaimTurn after resume = %v, %v", c2, err)
	}
	if st, err := boss.StopTurn(ctx, "p", c2.Turn.TurnID, bossRef); err != nil || !st.StopRequested {
		t.Errorf("StopTurn = %+v, %v", st, err)
	}
	fin, err := w.FinishTurn(ctx, c2.Claim, client.FinishRequest{Outcome: "succeeded", FinalPayload: map[string]any{"done": true}, FinalRecordRole: "final"})
	if err != nil || fin.State != "finished" || fin.Outcome == nil || *fin.Outcome != "succeeded" {
		t.Errorf("FinishTurn = %+v, %v", fin, err)
	}
	got, err := w.GetTurn(ctx, "p", tv.TurnID)
	if err != nil || got.State != "finished" {
		t.Errorf("GetTurn = %+v, %v", got, err)
	}
	_, err = w.ReconcileExpiredClaims(ctx, "p")
	must("ReconcileExpiredClaims", err)

	// Pages.
	tf, err := w.TurnFeed(ctx, "p", tv.TurnID, client.FeedQuery{Limit: 2})
	if err != nil || len(tf.Items) != 2 || !tf.More() {
		t.Errorf("TurnFeed limit 2 = %d items more %v, %v", len(tf.Items), tf.More(), err)
	}
	af, err := w.AgentFeed(ctx, "p", "w", client.FeedQuery{AfterLedgerSeq: tf.Items[0].LedgerSeq})
	if err != nil || len(af.Items) == 0 || af.Items[0].LedgerSeq <= tf.Items[0].LedgerSeq {
		t.Errorf("AgentFeed after %d = %+v, %v", tf.Items[0].LedgerSeq, af, err)
	}
	pf, err := boss.ProjectFeed(ctx, "p", client.FeedQuery{})
	if err != nil || len(pf.Items) == 0 {
		t.Errorf("ProjectFeed = %v", err)
	}
	ag, err := boss.ListAgents(ctx, "p", client.AgentQuery{EnabledOnly: true})
	if err != nil || len(ag.Items) != 2 {
		t.Errorf("ListAgents = %+v, %v; want 2 agents", ag, err)
	}
	of, err := boss.ListTurnOffers(ctx, "p", client.OfferQuery{AgentID: "w"})
	if err != nil || len(of.Items) != 1 {
		t.Errorf("ListTurnOffers = %+v, %v", of, err)
	}
	tl, err := boss.ListTurns(ctx, "p", client.TurnQuery{State: "finished"})
	if err != nil || len(tl.Items) != 1 {
		t.Errorf("ListTurns finished = %+v, %v", tl, err)
	}

	// Admin surface.
	mat, err := adm.RequestAgentCredentialTokens(ctx, "p", client.TokensRequest{AgentID: "boot"})
	if err != nil || mat.AgentCredentialToken == "" || mat.Profile.AgentID != "boot" {
		t.Errorf("RequestAgentCredentialTokens = %+v, %v", mat, err)
	}
	one := 1
	for i, redeem := range []func(context.Context, string) (*client.CredentialMaterial, error){adm.RedeemJoin, adm.RedeemJoinByoa} {
		inv, err := adm.CreateJoinInvite(ctx, "p", client.InviteRequest{AgentID: []string{"j1", "j2"}[i], ProfileKind: "byoa", RuntimeKind: "go", Spec: &client.ProfileSpec{Capacity: &one}})
		must("CreateJoinInvite", err)
		anon, _ := client.New(s.url)
		if m, err := redeem(ctx, inv.JoinCode); err != nil || m.AgentCredentialToken == "" {
			t.Errorf("redeem %d = %+v, %v", i, m, err)
		}
		if _, err := anon.RedeemJoin(ctx, inv.JoinCode); !errors.Is(err, client.ErrUnauthorized) && !errors.Is(err, client.ErrNotFound) && !errors.Is(err, client.ErrConflict) && !errors.Is(err, client.ErrInvariant) {
			t.Errorf("a second redeem of a single-use code = %v, want a refusal", err)
		}
	}
}

// TestClientErrors: refusals come back as *Error with the status, the
// error name and the message.
func TestClientErrors(t *testing.T) {
	s := startServer(t, 0)
	ctx := context.Background()
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	w := s.agent(t, "p", "w", 1)

	got, err := w.GetTurn(ctx, "p", "nope")
	if got != nil {
		t.Errorf("GetTurn(nope) = %+v with its error, want nil", got)
	}
	if a, err := w.GetAgent(ctx, "p", "nobody"); a != nil || err == nil {
		t.Errorf("GetAgent(nobody) = %+v, %v; want nil and an error", a, err)
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound || ce.Name != "NotFoundError" || ce.Message == "" {
		t.Errorf("GetTurn(nope) = %v, want a 404 NotFoundError with a message", err)
	}
	if !errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrConflict) {
		t.Errorf("errors.Is(%v, ErrNotFound) should hold and ErrConflict not", err)
	}
	if _, err := w.ProjectFeed(ctx, "p", client.FeedQuery{}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("ProjectFeed as a plain agent = %v, want ForbiddenError", err)
	}
	bad, _ := client.New(s.url, client.WithAgent("p", "w", "wrong"))
	if _, err := bad.GetAgent(ctx, "p", "w"); !errors.As(err, &ce) || ce.Status != 401 {
		t.Errorf("a wrong token = %v, want 401", err)
	}
	if _, err := w.ClaimTurn(ctx, "p", "w", 2*time.Minute); !errors.Is(err, client.ErrValidation) {
		t.Errorf("ClaimTurn with a 2m wait = %v, want ValidationError", err)
	}
	dispatch(t, boss, "p", "boss", "w", "k")
	c, err := w.ClaimTurn(ctx, "p", "w", 0)
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	forged := c.Claim
	forged.Token = "forged"
	if _, err := w.RenewClaim(ctx, forged); !errors.Is(err, client.ErrFencing) || !errors.As(err, &ce) || ce.Status != 409 {
		t.Errorf("RenewClaim with a forged token = %v, want 409 FencingError", err)
	}
	if _, err := client.New("not a url"); err == nil {
		t.Error("New(not a url) = nil error")
	}
}

// TestDispatchDefaultsFromTheClient: a dispatch names neither the project
// nor the requester when the client's agent is the requester.
func TestDispatchDefaultsFromTheClient(t *testing.T) {
	s := startServer(t, 0)
	boss := s.agent(t, "p", "boss", 1, "turns:dispatch")
	s.agent(t, "p", "w", 1)
	tv, err := boss.DispatchTurn(context.Background(), "", client.DispatchRequest{
		TargetAgent: client.AgentRef{AgentID: "w"}, TurnKind: "summarize", DispatchKey: "short",
		Authority: client.Authority{Mode: "root_request", RequestID: "r"},
	})
	if err != nil {
		t.Fatalf("DispatchTurn with the defaults = %v", err)
	}
	want := client.AgentRef{ProjectID: "p", AgentID: "boss"}
	if tv.ProjectID != "p" || tv.RequestedBy != want || tv.TargetAgent != (client.AgentRef{ProjectID: "p", AgentID: "w"}) {
		t.Errorf("the Turn = project %s, requested by %+v, target %+v", tv.ProjectID, tv.RequestedBy, tv.TargetAgent)
	}
}
