package projection

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

func TestAgentSnapshot(t *testing.T) {
	l := newEvents()
	reg := l.register("w", "coder", 3, "code", "review", "code")
	l.dispatch("t1", "w", "b", "code")
	l.dispatch("t2", "w", "b", "code")
	claim := l.claim("t1", "w", "c1") // the agent acts: last seen
	meta := l.add(kernel.EvAgentMetadataSet, proj, kernel.AggAgent, "w", admin(), &kernel.AgentMetadataReplaced{PublicMetadata: raw(`{"v":2}`)})
	s := applied(t, l)

	hash := "sha256:abc"
	want := AgentView{
		ProjectID: proj, AgentID: "w", Role: "coder", Description: "w agent", Enabled: true, AcceptsWork: true,
		Admitting: true, Capacity: 3, ActiveClaims: 1, FreeCapacity: 2,
		Capabilities: []string{"code", "review"}, Grants: []string{"dispatch"}, PublicMetadata: raw(`{"v":2}`),
		Provenance:   ProvenanceView{Kind: "manual", ExternalRef: "ref-w"},
		RegisteredAt: reg.Event.At, UpdatedAt: meta.Event.At, LastSeenAt: ptr(claim.Event.At),
		Presence: PresenceOnline, LedgerSeq: meta.Seq,
	}
	got, err := s.Agent(proj, "w", claim.Event.At.Add(59*time.Second))
	if err != nil {
		t.Fatalf("Agent(w) = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Agent(w) mismatch (-want +got):\n%s", diff)
	}

	// Presence from the clock passed in.
	for _, tt := range []struct {
		now  time.Time
		want string
	}{
		{claim.Event.At, PresenceOnline},
		{claim.Event.At.Add(kernel.PresenceWindow - time.Second), PresenceOnline},
		{claim.Event.At.Add(kernel.PresenceWindow), PresenceOffline},
		{claim.Event.At.Add(time.Hour), PresenceOffline},
	} {
		got, _ := s.Agent(proj, "w", tt.now)
		if got.Presence != tt.want {
			t.Errorf("Agent(w, now=%v).Presence = %q, want %q", tt.now, got.Presence, tt.want)
		}
	}

	// Heartbeat, drain, resume, re-registration.
	hb := l.add(kernel.EvAgentHeartbeat, proj, kernel.AggAgent, "w", admin(), &kernel.AgentHeartbeat{})
	dr := l.add(kernel.EvAgentDrained, proj, kernel.AggAgent, "w", admin(), &kernel.AgentDrained{RequestedBy: ref("b")})
	mustApply(t, s, l.since(meta.Seq))
	got, _ = s.Agent(proj, "w", hb.Event.At)
	want.LastSeenAt, want.Drained, want.Admitting, want.UpdatedAt, want.LedgerSeq = ptr(hb.Event.At), true, false, dr.Event.At, dr.Seq
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Agent(w) after heartbeat and drain mismatch (-want +got):\n%s", diff)
	}
	l.add(kernel.EvAgentRegistered, proj, kernel.AggAgent, "w", admin(), &kernel.AgentRegistered{
		Spec:       kernel.AgentSpec{AgentID: "w", Role: "tester", Enabled: false, AcceptsWork: true, Capacity: 1, Capabilities: []string{"test"}},
		Provenance: kernel.Provenance{Kind: "join", PayloadHash: &hash},
	})
	res := l.add(kernel.EvAgentResumed, proj, kernel.AggAgent, "w", admin(), &kernel.AgentResumed{RequestedBy: ref("b")})
	mustApply(t, s, l.since(dr.Seq))
	got, _ = s.Agent(proj, "w", res.Event.At.Add(kernel.PresenceWindow))
	want = AgentView{
		ProjectID: proj, AgentID: "w", Role: "tester", Enabled: false, AcceptsWork: true, Capacity: 1,
		ActiveClaims: 1, FreeCapacity: 0, Capabilities: []string{"test"}, Grants: []string{}, PublicMetadata: raw(`{}`),
		Provenance:   ProvenanceView{Kind: "join", PayloadHash: &hash},
		RegisteredAt: reg.Event.At, UpdatedAt: res.Event.At, LastSeenAt: ptr(hb.Event.At), Presence: PresenceOffline, LedgerSeq: res.Seq,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Agent(w) after re-registration and resume mismatch (-want +got):\n%s", diff)
	}

	if _, err := s.Agent(proj, "nobody", l.now()); !errors.Is(err, ErrNotFound) {
		t.Errorf("Agent(nobody) = %v, want ErrNotFound", err)
	}
	if _, err := s.Agent("p2", "w", l.now()); !errors.Is(err, ErrNotFound) {
		t.Errorf("Agent(p2, w) = %v, want ErrNotFound", err)
	}
	// Never seen.
	l2 := newEvents()
	l2.register("quiet", "r", 1)
	s2 := applied(t, l2)
	got, _ = s2.Agent(proj, "quiet", l2.now())
	if got.Presence != PresenceNever || got.LastSeenAt != nil {
		t.Errorf("Agent(quiet) presence, last_seen_at = %q, %v; want never, nil", got.Presence, got.LastSeenAt)
	}
}

// directory builds agents a..e:
//
//	a  coder   enabled, accepts work              caps code, review   capacity 2
//	b  coder   enabled, accepts work, drained     caps code           capacity 1
//	c  tester  disabled, accepts work             caps test           capacity 1
//	d  coder   enabled, does not accept work      caps code           capacity 1
//	e  lead    enabled, accepts work              no caps             capacity 0
func directory(t *testing.T) (*Store, *events) {
	t.Helper()
	l := newEvents()
	reg := func(id, role string, enabled, accepts bool, capacity int, caps ...string) {
		l.add(kernel.EvAgentRegistered, proj, kernel.AggAgent, id, admin(), &kernel.AgentRegistered{
			Spec: kernel.AgentSpec{AgentID: id, Role: role, Enabled: enabled, AcceptsWork: accepts, Capacity: capacity, Capabilities: caps},
		})
	}
	reg("d", "coder", true, false, 1, "code")
	reg("a", "coder", true, true, 2, "code", "review")
	reg("b", "coder", true, true, 1, "code")
	reg("c", "tester", false, true, 1, "test")
	reg("e", "lead", true, true, 0)
	l.add(kernel.EvAgentDrained, proj, kernel.AggAgent, "b", admin(), &kernel.AgentDrained{})
	// Work for the offers: a has 2 queued code Turns and 1 queued review,
	// one code Turn claimed; b has 1 queued code Turn.
	l.dispatch("t1", "a", "e", "code")
	l.dispatch("t2", "a", "e", "code")
	l.dispatch("t3", "a", "e", "code")
	l.dispatch("t4", "a", "e", "review")
	l.dispatch("t5", "b", "e", "code")
	l.dispatch("t6", "a", "e", "review")
	l.claim("t1", "a", "c1")
	l.claim("t6", "a", "c6")
	l.finish("t6", "a", "c6", "succeeded", "", 0)
	l.add(kernel.EvAgentRegistered, "p2", kernel.AggAgent, "a", admin(), &kernel.AgentRegistered{Spec: kernel.AgentSpec{AgentID: "a", Capabilities: []string{"code"}}})
	return applied(t, l), l
}

func TestAgentsFilters(t *testing.T) {
	s, l := directory(t)
	tests := []struct {
		name  string
		f     AgentFilter
		limit int
		want  []string
	}{
		{"all by id", AgentFilter{}, 500, []string{"a", "b", "c", "d", "e"}},
		{"limit", AgentFilter{}, 2, []string{"a", "b"}},
		{"agent id", AgentFilter{AgentID: "c"}, 500, []string{"c"}},
		{"unknown agent id", AgentFilter{AgentID: "zz"}, 500, []string{}},
		{"enabled only", AgentFilter{EnabledOnly: true}, 500, []string{"a", "b", "d", "e"}},
		{"accepts work only", AgentFilter{AcceptsWorkOnly: true}, 500, []string{"a", "c", "e"}},
		{"role", AgentFilter{Role: "coder"}, 500, []string{"a", "b", "d"}},
		{"capability", AgentFilter{Capability: "code"}, 500, []string{"a", "b", "d"}},
		{"capability review", AgentFilter{Capability: "review"}, 500, []string{"a"}},
		{"enabled and accepting coders", AgentFilter{EnabledOnly: true, AcceptsWorkOnly: true, Role: "coder", Capability: "code"}, 500, []string{"a"}},
		{"agent id not matching other filters", AgentFilter{AgentID: "c", EnabledOnly: true}, 500, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Agents(proj, tt.f, tt.limit, l.now())
			if err != nil {
				t.Fatalf("Agents(%+v) = %v", tt.f, err)
			}
			ids := []string{}
			for _, v := range got {
				ids = append(ids, v.AgentID)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("Agents(%+v, %d) mismatch (-want +got):\n%s", tt.f, tt.limit, diff)
			}
		})
	}
	got, _ := s.Agents(proj, AgentFilter{AgentID: "a"}, 500, l.now())
	if len(got) != 1 || got[0].ActiveClaims != 1 || got[0].FreeCapacity != 1 || !got[0].Admitting {
		t.Errorf("Agents(a) = %+v, want 1 active claim, free capacity 1, admitting", got)
	}
}

func TestTurnOffers(t *testing.T) {
	s, l := directory(t)
	offer := func(agent, kind, role string, enabled, accepts, drained bool, capacity, free, queued int) TurnOffer {
		return TurnOffer{AgentID: agent, TurnKind: kind, Role: role, Enabled: enabled, AcceptsWork: accepts, Drained: drained,
			Admitting: enabled && accepts && !drained, Capacity: capacity, FreeCapacity: free, Queued: queued, Presence: PresenceOnline}
	}
	aCode := offer("a", "code", "coder", true, true, false, 2, 1, 2)
	aCode.Presence = PresenceOnline // a claimed just now
	bCode := offer("b", "code", "coder", true, true, true, 1, 1, 1)
	bCode.Presence = PresenceNever
	dCode := offer("d", "code", "coder", true, false, false, 1, 1, 0)
	dCode.Presence = PresenceNever
	aReview := offer("a", "review", "coder", true, true, false, 2, 1, 1)
	cTest := offer("c", "test", "tester", false, true, false, 1, 1, 0)
	cTest.Presence = PresenceNever
	tests := []struct {
		name  string
		f     OfferFilter
		limit int
		want  []TurnOffer
	}{
		{"all by kind then agent", OfferFilter{}, 500, []TurnOffer{aCode, bCode, dCode, aReview, cTest}},
		{"limit", OfferFilter{}, 2, []TurnOffer{aCode, bCode}},
		{"turn kind", OfferFilter{TurnKind: "code"}, 500, []TurnOffer{aCode, bCode, dCode}},
		{"turn kind nobody offers", OfferFilter{TurnKind: "cook"}, 500, []TurnOffer{}},
		{"agent", OfferFilter{AgentID: "a"}, 500, []TurnOffer{aCode, aReview}},
		{"enabled only", OfferFilter{EnabledOnly: true}, 500, []TurnOffer{aCode, bCode, dCode, aReview}},
		{"accepts work only", OfferFilter{AcceptsWorkOnly: true}, 500, []TurnOffer{aCode, aReview, cTest}},
		{"admitting code offers", OfferFilter{TurnKind: "code", EnabledOnly: true, AcceptsWorkOnly: true}, 500, []TurnOffer{aCode}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.TurnOffers(proj, tt.f, tt.limit, l.now())
			if err != nil {
				t.Fatalf("TurnOffers(%+v) = %v", tt.f, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("TurnOffers(%+v, %d) mismatch (-want +got):\n%s", tt.f, tt.limit, diff)
			}
		})
	}
	// Re-registration drops an offer whose capability went away.
	l.add(kernel.EvAgentRegistered, proj, kernel.AggAgent, "a", admin(), &kernel.AgentRegistered{Spec: kernel.AgentSpec{AgentID: "a", Role: "coder", Enabled: true, AcceptsWork: true, Capacity: 2, Capabilities: []string{"review"}}})
	mustApply(t, s, l.since(s.Checkpoint()))
	got, _ := s.TurnOffers(proj, OfferFilter{AgentID: "a"}, 500, l.now())
	if diff := cmp.Diff([]TurnOffer{aReview}, got); diff != "" {
		t.Errorf("TurnOffers(a) after re-registration mismatch (-want +got):\n%s", diff)
	}
}

func TestCredentials(t *testing.T) {
	l := newEvents()
	l.register("w", "worker", 1)
	l.register("v", "worker", 1)
	c1 := l.issue("w", "cred1", time.Hour)
	c2 := l.issue("w", "cred2", time.Minute)
	c3 := l.issue("w", "cred0", time.Hour) // ids do not sort by issue order
	l.issue("v", "credv", time.Hour)
	rv := l.add(kernel.EvCredentialRevoked, proj, kernel.AggCredential, "cred1", admin(), &kernel.CredentialRevoked{CredentialID: "cred1", AgentID: "w"})
	j := l.add(kernel.EvInviteRedeemed, proj, kernel.AggInvite, "inv", admin(), &kernel.InviteRedeemed{InviteID: "inv", AgentID: "w", CredentialID: "credj", ExpiresAt: t0.Add(24 * time.Hour)})
	s := applied(t, l)

	view := func(r kernel.Recorded, status, via string) CredentialView {
		var id string
		var exp time.Time
		switch d := r.Event.Data.(type) {
		case *kernel.CredentialIssued:
			id, exp = d.CredentialID, d.ExpiresAt
		case *kernel.InviteRedeemed:
			id, exp = d.CredentialID, d.ExpiresAt
		}
		return CredentialView{CredentialID: id, ProjectID: proj, AgentID: "w", Status: status, IssuedAt: r.Event.At, ExpiresAt: exp, Via: via}
	}
	revoked := view(c1, CredentialRevoked, "issue")
	revoked.RevokedAt = ptr(rv.Event.At)
	now := c2.Event.At.Add(time.Minute) // cred2 expired exactly now
	want := []CredentialView{revoked, view(c2, CredentialExpired, "issue"), view(c3, CredentialActive, "issue"), view(j, CredentialActive, "join")}
	got, err := s.Credentials(proj, "w", now)
	if err != nil {
		t.Fatalf("Credentials(w) = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Credentials(w) mismatch (-want +got):\n%s", diff)
	}
	got, _ = s.Credentials(proj, "w", now.Add(-time.Nanosecond))
	if got[1].Status != CredentialActive {
		t.Errorf("Credentials(w, just before expiry)[1].Status = %q, want active", got[1].Status)
	}
	if _, err := s.Credentials(proj, "nobody", now); !errors.Is(err, ErrNotFound) {
		t.Errorf("Credentials(nobody) = %v, want ErrNotFound", err)
	}
	if got, _ := s.Credentials(proj, "v", now); len(got) != 1 {
		t.Errorf("Credentials(v) = %d credentials, want 1", len(got))
	}
}
