package kernel

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBootstrapDecidesOneEvent(t *testing.T) {
	h := newHarness(t)
	expires := t0.Add(time.Hour)
	boot := func(c Common, agent string, spec *SpecInput, cred string) Bootstrap {
		return Bootstrap{Common: c, AgentID: agent, Spec: spec, CredentialID: cred, TokenHash: "h-" + cred, ExpiresAt: expires}
	}
	// A new agent: registered with the defaults by the same event.
	evs := h.do(boot(admin, "newbie", nil, "cred_1"))
	d := evs[0].Data.(*CredentialIssued)
	want := &AgentRegistered{Spec: AgentSpec{AgentID: "newbie", Role: DefaultRole, Enabled: true, AcceptsWork: true, Capacity: DefaultCapacity,
		Capabilities: []string{}, Grants: []string{}, PublicMetadata: []byte(`{}`)}, Provenance: Provenance{Kind: ProvenanceAdminBootstrap}}
	if len(evs) != 1 || evs[0].Type != EvCredentialIssued || d.Via != ViaBootstrap || !cmp.Equal(want, d.Registration) {
		t.Fatalf("bootstrap of a new agent = %+v, want one credential.issued via bootstrap carrying %+v", evs, want)
	}
	if a := h.p.Agents["newbie"]; a == nil || a.Spec.Role != DefaultRole || h.p.Credentials["cred_1"] == nil {
		t.Fatalf("after the bootstrap: agent %+v, credential %+v", a, h.p.Credentials["cred_1"])
	}
	// An existing agent without a spec: only the credential.
	if evs := h.do(boot(admin, "newbie", nil, "cred_2")); evs[0].Data.(*CredentialIssued).Registration != nil {
		t.Errorf("bootstrap of an existing agent without a spec re-registered it: %+v", evs[0].Data)
	}
	// With a spec: the spec is replaced in the same event.
	role := "lead"
	if evs := h.do(boot(admin, "newbie", &SpecInput{AgentID: "newbie", Role: &role}, "cred_3")); evs[0].Data.(*CredentialIssued).Registration == nil || h.p.Agents["newbie"].Spec.Role != "lead" {
		t.Errorf("bootstrap with a spec = %+v, want a registration with role lead", evs[0].Data)
	}
	// Refusals append nothing: a spec naming another agent, a bad spec, and
	// a caller who may issue credentials but not register agents.
	h.refuse(boot(admin, "newbie", &SpecInput{AgentID: "other"}, "cred_4"), Validation)
	bad := -1
	h.refuse(boot(admin, "fresh", &SpecInput{Capacity: &bad}, "cred_5"), Validation)
	issuer := h.agent("issuer", 1, GrantCredentialIssue)
	h.refuse(boot(issuer, "fresh", nil, "cred_6"), Forbidden)
	if evs := h.do(boot(issuer, "newbie", nil, "cred_7")); len(evs) != 1 {
		t.Errorf("bootstrap of an existing agent by a credentials:issue holder = %+v, want one event", evs)
	}
}

func TestRedeemInviteDecidesOneEvent(t *testing.T) {
	h := newHarness(t)
	spec, _ := (&SpecInput{}).Resolve("newbie")
	h.do(CreateInvite{Common: admin, Invite: InviteCreated{InviteID: "inv_1", AgentID: "newbie", ProfileKind: "k", RuntimeKind: "r",
		ExpiresAt: t0.Add(time.Hour), SingleUse: false, CodeHash: "code-1", Spec: spec}})
	evs := h.do(RedeemInvite{CodeHash: "code-1", CredentialID: "cred_1", TokenHash: "tok-1", ExpiresAt: t0.Add(time.Hour)})
	d := evs[0].Data.(*InviteRedeemed)
	if evs[0].Actor != (Actor{Kind: ActorAgent, AgentID: "newbie"}) {
		t.Errorf("redeem actor = %+v, want the invited agent", evs[0].Actor)
	}
	if d.Registration == nil || d.Registration.Provenance != (Provenance{Kind: ProvenanceJoinInvite, ExternalRef: "inv_1"}) {
		t.Fatalf("first redeem = %+v, want a registration with provenance join_invite inv_1", d)
	}
	if c := h.p.Credentials["cred_1"]; h.p.Agents["newbie"] == nil || c == nil || c.Via != ViaJoin {
		t.Fatalf("after the redeem: agent %+v, credential %+v", h.p.Agents["newbie"], c)
	}
	// The agent exists now: a second redemption only issues a credential.
	if evs := h.do(RedeemInvite{CodeHash: "code-1", CredentialID: "cred_2", TokenHash: "tok-2", ExpiresAt: t0.Add(time.Hour)}); evs[0].Data.(*InviteRedeemed).Registration != nil {
		t.Errorf("redeem for an existing agent re-registered it: %+v", evs[0].Data)
	}
}

func TestInviteRequestDefaultsAndBounds(t *testing.T) {
	const day, week = 24 * time.Hour, 7 * 24 * time.Hour
	inv, ttl, err := InviteRequest{AgentID: "a"}.Invite(day, week)
	if err != nil || ttl != day || !inv.SingleUse || inv.Spec.Role != DefaultRole || inv.Spec.AgentID != "a" {
		t.Errorf("invite defaults = %+v, %s, %v; want single use, ttl %s, the default spec of a", inv, ttl, err, day)
	}
	no, secs := false, int64(60)
	if inv, ttl, err := (InviteRequest{AgentID: "a", SingleUse: &no, ExpiresInSeconds: &secs}).Invite(day, week); err != nil || ttl != time.Minute || inv.SingleUse {
		t.Errorf("invite with single_use false, 60 s = %+v, %s, %v", inv, ttl, err)
	}
	for _, s := range []int64{0, -1, int64(week/time.Second) + 1} {
		if _, _, err := (InviteRequest{AgentID: "a", ExpiresInSeconds: &s}).Invite(day, week); ErrorKind(err) != Validation {
			t.Errorf("invite with expires_in_seconds %d = %v, want a ValidationError", s, err)
		}
	}
}
