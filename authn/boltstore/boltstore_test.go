package boltstore_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/boltstore"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func open(t *testing.T, rnd *bytes.Reader) *boltstore.Store {
	t.Helper()
	o := boltstore.Options{}
	if rnd != nil {
		o.Rand = rnd
	}
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "sub", "rt.db"), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestIDsFromInjectedRandomness: ids are v4 UUIDs drawn from the given source.
func TestIDsFromInjectedRandomness(t *testing.T) {
	s := open(t, bytes.NewReader(bytes.Repeat([]byte{0xab}, 32)))
	ctx := context.Background()
	tn, err := s.AddTenant(ctx, "acme", "team", t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := "abababab-abab-4bab-abab-abababababab"; tn.ID != want {
		t.Errorf("AddTenant id = %s, want %s", tn.ID, want)
	}
	uid, err := s.UpsertUser(ctx, tn.ID, authn.Identity{TenantClaim: "acme", UserClaim: "u1"}, t0)
	if err != nil || uid != "abababab-abab-4bab-abab-abababababab" {
		t.Errorf("UpsertUser = %s, %v", uid, err)
	}
	// The source is exhausted: a new user cannot be created, and nothing is written.
	if _, err := s.UpsertUser(ctx, tn.ID, authn.Identity{UserClaim: "u2"}, t0); err == nil {
		t.Errorf("UpsertUser with no randomness left succeeded")
	}
	// An existing user needs no randomness.
	if again, err := s.UpsertUser(ctx, tn.ID, authn.Identity{UserClaim: "u1", Name: "New"}, t0); err != nil || again != uid {
		t.Errorf("UpsertUser(existing) = %s, %v, want %s", again, err, uid)
	}
}

func TestTenantTransitions(t *testing.T) {
	s := open(t, nil)
	ctx := context.Background()
	tn, _ := s.AddTenant(ctx, "acme", "standard", t0)
	if _, err := s.AddTenant(ctx, "acme", "standard", t0); !errors.Is(err, authn.ErrExists) {
		t.Errorf("AddTenant(duplicate) error = %v, want ErrExists", err)
	}
	steps := []struct {
		status string
		ok     bool
	}{
		{authn.StatusSuspended, true}, {authn.StatusSuspended, true}, {authn.StatusActive, true},
		{"archived", false}, {authn.StatusDeleted, true}, {authn.StatusActive, false}, {authn.StatusSuspended, false},
	}
	for _, st := range steps {
		_, err := s.SetTenantStatus(ctx, tn.ID, st.status, t0)
		if (err == nil) != st.ok {
			t.Errorf("SetTenantStatus(%s) error = %v, want ok=%v", st.status, err, st.ok)
		}
	}
	got, _ := s.TenantByClaim(ctx, "acme")
	if got.Status != authn.StatusDeleted {
		t.Errorf("final status = %s, want deleted", got.Status)
	}
	if _, err := s.SetTenantStatus(ctx, "nobody", authn.StatusSuspended, t0); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("SetTenantStatus(unknown) error = %v, want ErrNotFound", err)
	}
}

// TestTicketTakenOnce: of many concurrent takers of one ticket, one wins.
func TestTicketTakenOnce(t *testing.T) {
	s := open(t, nil)
	ctx := context.Background()
	h := [32]byte{1}
	want := authn.Ticket{Principal: authn.Principal{TenantID: "t", UserID: "u"}, ExpiresAt: t0.Add(time.Minute)}
	if err := s.PutTicket(ctx, h, want, t0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.TakeTicket(ctx, h)
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("TakeTicket (-want +got):\n%s", diff)
				}
			} else if !errors.Is(err, authn.ErrNotFound) {
				t.Errorf("TakeTicket error = %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("ticket taken %d times, want 1", wins)
	}
	// Expired tickets are swept when a new one is stored.
	old := [32]byte{2}
	s.PutTicket(ctx, old, authn.Ticket{ExpiresAt: t0}, t0.Add(-time.Second))
	s.PutTicket(ctx, [32]byte{3}, authn.Ticket{ExpiresAt: t0.Add(time.Hour)}, t0)
	if _, err := s.TakeTicket(ctx, old); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("TakeTicket(expired, swept) error = %v, want ErrNotFound", err)
	}
}

func TestProfilesScopedToTenantAndUser(t *testing.T) {
	s := open(t, nil)
	ctx := context.Background()
	s.PutProfile(ctx, "t1", "u1", authn.Profile{Provider: "a", Model: "m"})
	s.PutProfile(ctx, "t1", "u1x", authn.Profile{Provider: "b"}) // prefix of u1x is u1: must not leak
	s.PutProfile(ctx, "t2", "u1", authn.Profile{Provider: "c"})
	got, err := s.Profiles(ctx, "t1", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]authn.Profile{{Provider: "a", Model: "m"}}, got); diff != "" {
		t.Errorf("Profiles(t1, u1) (-want +got):\n%s", diff)
	}
	if _, err := s.Profile(ctx, "t2", "u1", "a"); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("Profile(t2, u1, a) error = %v, want ErrNotFound", err)
	}
	if err := s.DeleteProfile(ctx, "t2", "u1", "a"); !errors.Is(err, authn.ErrNotFound) {
		t.Errorf("DeleteProfile(other tenant) error = %v, want ErrNotFound", err)
	}
}
