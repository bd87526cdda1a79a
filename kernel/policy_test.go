package kernel

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// policyProject folds a project with agents of every grant, one credential
// each (plus a revoked and an expired one), and a Turn tree:
// root (req → a) and its child (a → b).
func policyProject(t *testing.T, now time.Time) *Project {
	t.Helper()
	p := NewProject("p1")
	var seq uint64
	add := func(typ, agg, id string, data any) {
		seq++
		Evolve(p, Recorded{Seq: seq, Event: Event{Type: typ, V: 1, ProjectID: "p1", Aggregate: agg, ID: id, At: now, Actor: Actor{Kind: ActorAdmin}, Data: data}})
	}
	for _, a := range []struct {
		id     string
		grants []string
	}{
		{"a", nil}, {"b", nil}, {"c", nil}, {"req", []string{GrantDispatch}},
		{"reader", []string{GrantRead}}, {"cadmin", []string{GrantCredentialAdmin}}, {"mgr", []string{GrantManage}},
		{"issuer", []string{GrantCredentialIssue}}, {"registrar", []string{GrantRegister}},
	} {
		add(EvAgentRegistered, AggAgent, a.id, &AgentRegistered{Spec: AgentSpec{AgentID: a.id, Role: "w", Enabled: true, AcceptsWork: true,
			Capacity: 1, Grants: a.grants, PublicMetadata: json.RawMessage(`{}`)}, Provenance: Provenance{Kind: "test"}})
		add(EvCredentialIssued, AggCredential, "cred-"+a.id, &CredentialIssued{CredentialID: "cred-" + a.id, AgentID: a.id, TokenHash: HashSecret("tok-" + a.id), ExpiresAt: now.Add(time.Hour)})
	}
	add(EvCredentialIssued, AggCredential, "cred-a-revoked", &CredentialIssued{CredentialID: "cred-a-revoked", AgentID: "a", TokenHash: HashSecret("revoked"), ExpiresAt: now.Add(time.Hour)})
	add(EvCredentialRevoked, AggCredential, "cred-a-revoked", &CredentialRevoked{CredentialID: "cred-a-revoked", AgentID: "a"})
	add(EvCredentialIssued, AggCredential, "cred-a-expired", &CredentialIssued{CredentialID: "cred-a-expired", AgentID: "a", TokenHash: HashSecret("expired"), ExpiresAt: now})
	add(EvTurnDispatched, AggTurn, "root", &TurnDispatched{TargetAgent: AgentRef{"p1", "a"}, RequestedBy: AgentRef{"p1", "req"},
		Input: json.RawMessage(`{}`), TurnKind: "k", DispatchKey: "k1", Authority: Authority{Mode: AuthorityRoot, RequestID: "r"}, RootTurnID: "root"})
	add(EvTurnDispatched, AggTurn, "child", &TurnDispatched{TargetAgent: AgentRef{"p1", "b"}, RequestedBy: AgentRef{"p1", "a"},
		Input: json.RawMessage(`{}`), TurnKind: "k", DispatchKey: "k2", Authority: Authority{Mode: AuthorityChild, ParentTurnID: "root"}, RootTurnID: "root", Depth: 1})
	return p
}

// policyBy is whom a command's requested_by names for the caller: itself, or for
// the admin some agent.
func policyBy(c Caller) string {
	if c.Admin {
		return "a"
	}
	return c.AgentID
}

func policyCaller(agent string) Caller { return Caller{AgentID: agent, CredentialID: "cred-" + agent} }

func TestAuthenticatePolicy(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	p := policyProject(t, now)
	for _, tc := range []struct {
		name, agent, token string
		want               Kind // "" for success
	}{
		{"own token", "a", "tok-a", ""},
		{"another agent's token", "a", "tok-b", Unauthorized},
		{"unknown token", "a", "nope", Unauthorized},
		{"unknown agent", "ghost", "tok-a", Unauthorized},
		{"revoked", "a", "revoked", Unauthorized},
		{"expired at expires_at", "a", "expired", Unauthorized},
	} {
		c, err := Authenticate(p, tc.agent, HashSecret(tc.token), now)
		if got := policyKind(err); got != tc.want {
			t.Errorf("Authenticate(%s) = %v, want %q", tc.name, err, tc.want)
		}
		if err == nil && (c.AgentID != tc.agent || c.CredentialID != "cred-"+tc.agent || c.Admin) {
			t.Errorf("Authenticate(%s) = %+v, want agent %s with its credential", tc.name, c, tc.agent)
		}
	}
}

func policyKind(err error) Kind {
	if err == nil {
		return ""
	}
	return ErrorKind(err)
}

// TestAuthorizeRead is the read policy table of the package doc.
func TestAuthorizeRead(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	p := policyProject(t, now)
	admin := Caller{Admin: true}
	revoked := Caller{AgentID: "a", CredentialID: "cred-a-revoked"}
	expired := Caller{AgentID: "a", CredentialID: "cred-a-expired"}
	forged := Caller{AgentID: "a", CredentialID: "cred-b"}
	for _, tc := range []struct {
		who    Caller
		action string
		agent  string
		want   Kind
	}{
		{admin, ReadProjectWide, "", ""},
		{admin, ReadCredentials, "a", ""},
		{policyCaller("a"), ReadDirectory, "", ""},
		{policyCaller("a"), ReadAgentFeed, "a", ""},
		{policyCaller("a"), ReadAgentFeed, "b", Forbidden},
		{policyCaller("reader"), ReadAgentFeed, "b", ""},
		{policyCaller("a"), ReadCredentials, "a", ""},
		{policyCaller("a"), ReadCredentials, "b", Forbidden},
		{policyCaller("reader"), ReadCredentials, "b", Forbidden},
		{policyCaller("cadmin"), ReadCredentials, "b", ""},
		{policyCaller("a"), ReadProjectWide, "", Forbidden},
		{policyCaller("mgr"), ReadProjectWide, "", Forbidden},
		{policyCaller("reader"), ReadProjectWide, "", ""},
		{Caller{}, ReadDirectory, "", Unauthorized},
		{revoked, ReadDirectory, "", Unauthorized},
		{expired, ReadDirectory, "", Unauthorized},
		{forged, ReadDirectory, "", Unauthorized},
	} {
		if got := policyKind(AuthorizeRead(p, tc.who, now, tc.action, tc.agent)); got != tc.want {
			t.Errorf("AuthorizeRead(%+v, %s, %q) = %q, want %q", tc.who, tc.action, tc.agent, got, tc.want)
		}
	}
}

// TestCanReadTurn: the target and requester of a Turn read it, and so do
// those of its root Turn; holders of the read grant and the admin read all.
func TestCanReadTurn(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	p := policyProject(t, now)
	for _, tc := range []struct {
		who  Caller
		turn string
		want Kind
	}{
		{policyCaller("a"), "root", ""},
		{policyCaller("req"), "root", ""},
		{policyCaller("b"), "root", Forbidden},
		{policyCaller("b"), "child", ""},
		{policyCaller("a"), "child", ""},
		{policyCaller("req"), "child", ""},
		{policyCaller("c"), "child", Forbidden},
		{policyCaller("mgr"), "child", Forbidden},
		{policyCaller("reader"), "child", ""},
		{Caller{Admin: true}, "root", ""},
		{policyCaller("c"), "ghost", NotFound},
		{Caller{AgentID: "a", CredentialID: "cred-a-revoked"}, "root", Unauthorized},
	} {
		if got := policyKind(CanReadTurn(p, tc.who, now, tc.turn)); got != tc.want {
			t.Errorf("CanReadTurn(%s, %s) = %q, want %q", tc.who.AgentID, tc.turn, got, tc.want)
		}
	}
}

// TestGrantsGuardCommands: each grant of the table allows its commands, and
// an agent without it is refused with Forbidden.
func TestGrantsGuardCommands(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	p := policyProject(t, now)
	spec := AgentSpec{AgentID: "new", Role: "w", Enabled: true, AcceptsWork: true, Capacity: 1, PublicMetadata: json.RawMessage(`{}`)}
	for _, tc := range []struct {
		name    string
		cmd     func(c Caller) Command
		granted string
	}{
		{"register", func(c Caller) Command {
			return RegisterAgent{Common: Common{Caller: c}, Spec: spec, Provenance: Provenance{Kind: "t"}}
		}, GrantRegister},
		{"issue a credential", func(c Caller) Command {
			return IssueCredential{Common: Common{Caller: c}, AgentID: "b", CredentialID: "x", TokenHash: "h", ExpiresAt: now.Add(time.Hour)}
		}, GrantCredentialIssue},
		{"revoke another agent's credential", func(c Caller) Command {
			return RevokeCredential{Common: Common{Caller: c}, AgentID: "b", CredentialID: "cred-b"}
		}, GrantCredentialAdmin},
		{"drain", func(c Caller) Command {
			return SetAgentAdmission{Common: Common{Caller: c}, AgentID: "b", RequestedBy: AgentRef{"p1", policyBy(c)}, Drain: true}
		}, GrantManage},
		{"another agent's metadata", func(c Caller) Command {
			return ReplaceMetadata{Common: Common{Caller: c}, AgentID: "b", Metadata: json.RawMessage(`{}`)}
		}, GrantManage},
		{"another agent's presence", func(c Caller) Command {
			return Heartbeat{Common: Common{Caller: c}, AgentID: "b"}
		}, GrantManage},
		{"dispatch a root Turn", func(c Caller) Command {
			return Dispatch{Common: Common{Caller: c}, TurnID: "t9", RequestedBy: AgentRef{"p1", policyBy(c)}, TargetAgent: AgentRef{"p1", "b"},
				Input: json.RawMessage(`{}`), TurnKind: "k", DispatchKey: "k9", Mode: AuthorityRoot, RequestID: "r9", MaxDepth: 8}
		}, GrantDispatch},
	} {
		grant := tc.granted
		holder := map[string]string{GrantRegister: "registrar", GrantCredentialIssue: "issuer", GrantCredentialAdmin: "cadmin", GrantManage: "mgr", GrantDispatch: "req"}[grant]
		if _, err := Decide(p, tc.cmd(policyCaller(holder)), now); err != nil {
			t.Errorf("%s by %s (holds %s) = %v, want allowed", tc.name, holder, grant, err)
		}
		for _, other := range []string{"c", "reader", "cadmin", "mgr", "issuer", "registrar", "req"} {
			if other == holder {
				continue
			}
			if _, err := Decide(p, tc.cmd(policyCaller(other)), now); policyKind(err) != Forbidden {
				t.Errorf("%s by %s (without %s) = %v, want %s", tc.name, other, grant, err, Forbidden)
			}
		}
		if _, err := Decide(p, tc.cmd(Caller{Admin: true}), now); err != nil {
			t.Errorf("%s by the admin = %v, want allowed", tc.name, err)
		}
	}
}

func TestInvolvedAndTurnReaders(t *testing.T) {
	ref := func(p, a string) AgentRef { return AgentRef{ProjectID: p, AgentID: a} }
	d := &TurnDispatched{TargetAgent: ref("p1", "alice"), RequestedBy: ref("p2", "bob")}
	if got, want := Involved("p1", d), []string{"alice"}; !slices.Equal(got, want) {
		t.Errorf("Involved(p1, alice <- p2/bob) = %v, want %v", got, want)
	}
	d.RequestedBy.ProjectID = "p1"
	if got, want := Involved("p1", d), []string{"alice", "bob"}; !slices.Equal(got, want) {
		t.Errorf("Involved(p1, alice <- bob) = %v, want %v", got, want)
	}
	self := &TurnDispatched{TargetAgent: ref("p1", "alice"), RequestedBy: ref("p1", "alice")}
	if got, want := Involved("p1", self), []string{"alice"}; !slices.Equal(got, want) {
		t.Errorf("Involved(p1, alice <- alice) = %v, want %v", got, want)
	}
	child := &TurnDispatched{TargetAgent: ref("p1", "carol"), RequestedBy: ref("p1", "bob")}
	if got, want := TurnReaders("p1", child, d), []string{"carol", "bob", "alice"}; !slices.Equal(got, want) {
		t.Errorf("TurnReaders(child carol <- bob, root alice <- bob) = %v, want %v", got, want)
	}
	if got, want := TurnReaders("p1", child, nil), []string{"carol", "bob"}; !slices.Equal(got, want) {
		t.Errorf("TurnReaders(root carol <- bob) = %v, want %v", got, want)
	}
}
