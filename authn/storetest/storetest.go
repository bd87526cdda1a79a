// Package storetest is the contract every authn.Store implementation passes:
// the embedded bbolt store and the PostgreSQL store run the same suite, so
// the runtime behaves the same on either.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/authn"
)

// Store is an authn.Store with the administrative operations of `turnledger
// tenants`.
type Store interface {
	authn.Store
	AddTenant(ctx context.Context, idpTenantID, plan string, now time.Time) (authn.Tenant, error)
	SetTenantStatus(ctx context.Context, ref, status string, now time.Time) (authn.Tenant, error)
	Tenants(ctx context.Context) ([]authn.Tenant, error)
	// PeekTicket reads a ticket without taking it: the websocket route
	// checks a dial fully before it spends the ticket.
	PeekTicket(ctx context.Context, hash [32]byte) (authn.Ticket, error)
}

// t0 is a time both stores keep exactly (PostgreSQL keeps microseconds).
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)

// Run runs the contract against fresh, empty stores made by open.
func Run(t *testing.T, open func(t *testing.T) Store) {
	t.Run("Tenants", func(t *testing.T) { testTenants(t, open(t)) })
	t.Run("Transitions", func(t *testing.T) { testTransitions(t, open(t)) })
	t.Run("Users", func(t *testing.T) { testUsers(t, open(t)) })
	t.Run("TicketTakenOnce", func(t *testing.T) { testTickets(t, open(t)) })
	t.Run("ProfilesScoped", func(t *testing.T) { testProfiles(t, open(t)) })
}

func testTenants(t *testing.T, s Store) {
	ctx := context.Background()
	b, err := s.AddTenant(ctx, "beta", "team", t0)
	if err != nil {
		t.Fatalf("AddTenant(beta) error = %v", err)
	}
	a, err := s.AddTenant(ctx, "alpha", "standard", t0.Add(time.Second))
	if err != nil {
		t.Fatalf("AddTenant(alpha) error = %v", err)
	}
	want := authn.Tenant{ID: a.ID, IDPTenantID: "alpha", Status: authn.StatusActive, Plan: "standard", CreatedAt: t0.Add(time.Second), UpdatedAt: t0.Add(time.Second)}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("AddTenant(alpha) (-want +got):\n%s", diff)
	}
	if _, err := s.AddTenant(ctx, "alpha", "standard", t0); !errors.Is(err, authn.ErrExists) {
		t.Errorf("AddTenant(duplicate) error = %v, want ErrExists", err)
	}
	for _, bad := range [][2]string{{"", "standard"}, {"a/b", "standard"}, {"ok", "Bad Plan"}} {
		if _, err := s.AddTenant(ctx, bad[0], bad[1], t0); err == nil {
			t.Errorf("AddTenant(%q, %q) succeeded, want an error", bad[0], bad[1])
		}
	}
	if got, err := s.TenantByClaim(ctx, "alpha"); err != nil || !cmp.Equal(got, want) {
		t.Errorf("TenantByClaim(alpha) = %+v, %v, want %+v", got, err, want)
	}
	if got, err := s.TenantByID(ctx, a.ID); err != nil || !cmp.Equal(got, want) {
		t.Errorf("TenantByID = %+v, %v, want %+v", got, err, want)
	}
	if _, err := s.TenantByClaim(ctx, "gamma"); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("TenantByClaim(unknown) error = %v, want ErrNotFound", err)
	}
	if _, err := s.TenantByID(ctx, "00000000-0000-4000-8000-000000000000"); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("TenantByID(unknown) error = %v, want ErrNotFound", err)
	}
	if _, err := s.TenantByID(ctx, "not-a-uuid"); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("TenantByID(not a uuid) error = %v, want ErrNotFound", err)
	}
	list, err := s.Tenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]authn.Tenant{want, b}, list); diff != "" {
		t.Errorf("Tenants() (-want +got):\n%s", diff)
	}
}

func testTransitions(t *testing.T, s Store) {
	ctx := context.Background()
	tn, err := s.AddTenant(ctx, "acme", "standard", t0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		ref, status string
		ok          bool
	}{
		{tn.ID, authn.StatusSuspended, true}, {"acme", authn.StatusSuspended, true}, {"acme", authn.StatusActive, true},
		{tn.ID, "archived", false}, {tn.ID, authn.StatusDeleted, true}, {tn.ID, authn.StatusActive, false}, {"acme", authn.StatusSuspended, false},
	}
	for i, st := range steps {
		at := t0.Add(time.Duration(i+1) * time.Second)
		got, err := s.SetTenantStatus(ctx, st.ref, st.status, at)
		if st.ok != (err == nil) {
			t.Errorf("step %d: SetTenantStatus(%s, %s) error = %v, want ok=%v", i, st.ref, st.status, err, st.ok)
		}
		if !st.ok && !errors.Is(err, authn.ErrTransition) {
			t.Errorf("step %d: SetTenantStatus(%s, %s) error = %v, want ErrTransition", i, st.ref, st.status, err)
		}
		if st.ok && got.Status != st.status {
			t.Errorf("step %d: SetTenantStatus(%s, %s).Status = %s", i, st.ref, st.status, got.Status)
		}
	}
	got, _ := s.TenantByClaim(ctx, "acme")
	if got.Status != authn.StatusDeleted || !got.UpdatedAt.Equal(t0.Add(5*time.Second)) || !got.CreatedAt.Equal(t0) {
		t.Errorf("final tenant = %+v, want deleted, created %v, updated %v", got, t0, t0.Add(5*time.Second))
	}
	if _, err := s.SetTenantStatus(ctx, "nobody", authn.StatusSuspended, t0); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("SetTenantStatus(unknown) error = %v, want ErrNotFound", err)
	}
}

func testUsers(t *testing.T, s Store) {
	ctx := context.Background()
	a, _ := s.AddTenant(ctx, "alpha", "standard", t0)
	b, _ := s.AddTenant(ctx, "beta", "standard", t0)
	u1, err := s.UpsertUser(ctx, a.ID, authn.Identity{TenantClaim: "alpha", UserClaim: "u1", Email: "u1@example.com"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.UpsertUser(ctx, a.ID, authn.Identity{TenantClaim: "alpha", UserClaim: "u1", Email: "new@example.com", Name: "U"}, t0.Add(time.Second))
	if err != nil || again != u1 {
		t.Errorf("UpsertUser(same claim, new email) = %s, %v, want %s", again, err, u1)
	}
	other, err := s.UpsertUser(ctx, b.ID, authn.Identity{TenantClaim: "beta", UserClaim: "u1"}, t0)
	if err != nil || other == u1 {
		t.Errorf("UpsertUser(other tenant, same claim) = %s, %v, want a new id", other, err)
	}
	// Concurrent first logins of one user agree on one id.
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := s.UpsertUser(ctx, a.ID, authn.Identity{TenantClaim: "alpha", UserClaim: "racer"}, t0)
			if err != nil {
				t.Errorf("UpsertUser(racer) error = %v", err)
			}
			ids[i] = id
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id == "" {
			t.Fatalf("concurrent UpsertUser ids = %v, want one id", ids)
		}
	}
}

func testTickets(t *testing.T, s Store) {
	ctx := context.Background()
	h := [32]byte{1}
	want := authn.Ticket{Principal: authn.Principal{Identity: authn.Identity{TenantClaim: "alpha", UserClaim: "u", Email: "u@example.com"}, TenantID: "t", UserID: "u"}, ExpiresAt: t0.Add(time.Minute)}
	if err := s.PutTicket(ctx, h, want, t0); err != nil {
		t.Fatal(err)
	}
	for range 2 { // peeking leaves the ticket where it is
		got, err := s.PeekTicket(ctx, h)
		if err != nil {
			t.Fatalf("PeekTicket = %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("PeekTicket mismatch (-want +got):\n%s", diff)
		}
	}
	if _, err := s.PeekTicket(ctx, [32]byte{9}); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("PeekTicket(unknown) error = %v, want ErrNotFound", err)
	}
	takers := make([]func() (authn.Ticket, error), 20)
	for i := range takers {
		takers[i] = func() (authn.Ticket, error) { return s.TakeTicket(ctx, h) }
	}
	if wins := Race(t, want, takers...); wins != 1 {
		t.Errorf("ticket taken %d times, want 1", wins)
	}
	if _, err := s.PeekTicket(ctx, h); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("PeekTicket(taken) error = %v, want ErrNotFound", err)
	}
	// Expired tickets are swept when a new one is stored.
	old := [32]byte{2}
	if err := s.PutTicket(ctx, old, authn.Ticket{ExpiresAt: t0}, t0.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTicket(ctx, [32]byte{3}, authn.Ticket{ExpiresAt: t0.Add(time.Hour)}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeTicket(ctx, old); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("TakeTicket(expired, swept) error = %v, want ErrNotFound", err)
	}
	if got, err := s.TakeTicket(ctx, [32]byte{3}); err != nil || !got.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("TakeTicket(live) = %+v, %v", got, err)
	}
}

// Race calls every taker at once, each in its own goroutine, and returns
// how many won; every winner must get want and every loser authn.ErrNotFound.
func Race(t testing.TB, want authn.Ticket, takers ...func() (authn.Ticket, error)) int {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  int
		start = make(chan struct{})
	)
	for _, take := range takers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got, err := take()
			switch {
			case err == nil:
				mu.Lock()
				wins++
				mu.Unlock()
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("TakeTicket (-want +got):\n%s", diff)
				}
			case !errors.Is(err, authn.ErrNotFound):
				t.Errorf("TakeTicket error = %v, want nil or ErrNotFound", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	return wins
}

func testProfiles(t *testing.T, s Store) {
	ctx := context.Background()
	a, _ := s.AddTenant(ctx, "alpha", "standard", t0)
	b, _ := s.AddTenant(ctx, "beta", "standard", t0)
	user := func(tenant authn.Tenant, claim string) string {
		id, err := s.UpsertUser(ctx, tenant.ID, authn.Identity{TenantClaim: tenant.IDPTenantID, UserClaim: claim}, t0)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	u1, u2, v1 := user(a, "u1"), user(a, "u2"), user(b, "u1")
	put := func(tenant, u string, p authn.Profile) {
		t.Helper()
		if err := s.PutProfile(ctx, tenant, u, p); err != nil {
			t.Fatalf("PutProfile(%s): %v", p.Provider, err)
		}
	}
	pb := authn.Profile{Provider: "openai", Model: "m", BaseURL: "https://api.example.com", APIKeyCiphertext: []byte{1, 2, 3}, APIKeyHint: "abcd", UpdatedAt: t0}
	pa := authn.Profile{Provider: "anthropic", UpdatedAt: t0}
	put(a.ID, u1, pb)
	put(a.ID, u1, pa)
	put(a.ID, u2, authn.Profile{Provider: "other", UpdatedAt: t0})
	put(b.ID, v1, authn.Profile{Provider: "openai", Model: "beta's", UpdatedAt: t0})

	got, err := s.Profiles(ctx, a.ID, u1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]authn.Profile{pa, pb}, got); diff != "" {
		t.Errorf("Profiles(alpha, u1) (-want +got):\n%s", diff)
	}
	if got, err := s.Profile(ctx, a.ID, u1, "openai"); err != nil || !cmp.Equal(got, pb) {
		t.Errorf("Profile(alpha, u1, openai) = %+v, %v, want %+v", got, err, pb)
	}
	// Another user's provider, or the same user id under another tenant, is not there.
	for _, c := range []struct{ tenant, user, provider string }{{a.ID, u2, "openai"}, {b.ID, u1, "openai"}, {a.ID, v1, "openai"}, {a.ID, u1, "other"}} {
		if _, err := s.Profile(ctx, c.tenant, c.user, c.provider); !errors.Is(err, authn.ErrNotFound) {
			t.Errorf("Profile(%s) error = %v, want ErrNotFound", fmt.Sprint(c), err)
		}
		if err := s.DeleteProfile(ctx, c.tenant, c.user, c.provider); !errors.Is(err, authn.ErrNotFound) {
			t.Errorf("DeleteProfile(%s) error = %v, want ErrNotFound", fmt.Sprint(c), err)
		}
	}
	// Ids that no admission could produce hold nothing.
	if _, err := s.Profile(ctx, "t1", "u1", "openai"); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("Profile(not uuids) error = %v, want ErrNotFound", err)
	}
	if got, err := s.Profiles(ctx, "t1", "u1"); err != nil || len(got) != 0 {
		t.Errorf("Profiles(not uuids) = %v, %v, want none", got, err)
	}
	// An update replaces the record, a removed key included.
	pb2 := pb
	pb2.APIKeyCiphertext, pb2.APIKeyHint, pb2.UpdatedAt = nil, "", t0.Add(time.Minute)
	put(a.ID, u1, pb2)
	if got, err := s.Profile(ctx, a.ID, u1, "openai"); err != nil || !cmp.Equal(got, pb2) {
		t.Errorf("Profile after update = %+v, %v, want %+v", got, err, pb2)
	}
	if err := s.DeleteProfile(ctx, a.ID, u1, "openai"); err != nil {
		t.Errorf("DeleteProfile(own) error = %v", err)
	}
	if got, err := s.Profiles(ctx, a.ID, u1); err != nil || !cmp.Equal(got, []authn.Profile{pa}) {
		t.Errorf("Profiles after delete = %+v, %v", got, err)
	}
	if got, err := s.Profiles(ctx, b.ID, v1); err != nil || len(got) != 1 || got[0].Model != "beta's" {
		t.Errorf("Profiles(beta, v1) = %+v, %v; another tenant's writes changed it", got, err)
	}
}
