package faceauth

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/throttle"
	"github.com/turnledger/turnledger/kernel"
)

func TestBearer(t *testing.T) {
	for _, tc := range []struct {
		headers []string
		token   string
		ok      bool
	}{
		{[]string{"Bearer abc"}, "abc", true},
		{[]string{"bearer  abc "}, "abc", true},
		{[]string{"Basic abc"}, "", false},
		{[]string{"Bearer "}, "", false},
		{[]string{"Bearer a", "Bearer b"}, "", false},
		{nil, "", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		for _, h := range tc.headers {
			r.Header.Add("Authorization", h)
		}
		if token, ok := Bearer(r); token != tc.token || ok != tc.ok {
			t.Errorf("Bearer(%q) = %q, %v; want %q, %v", tc.headers, token, ok, tc.token, tc.ok)
		}
	}
}

// TestGuard: past the burst of failures of an address, a request is
// throttled unless its token is known; an address that never failed is
// not.
func TestGuard(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	g := NewGuard(throttle.Rate{Burst: 2, Every: time.Minute}, func() time.Time { return now })
	r := httptest.NewRequest("GET", "/", nil)
	known, unknown := func() bool { return true }, func() bool { return false }
	for range 2 {
		if err := g.Admit(r, "p", "a", unknown); err != nil {
			t.Fatalf("Admit before the burst is spent = %v", err)
		}
		g.Fail(r, "p", "a")
	}
	var te *Throttled
	if err := g.Admit(r, "p", "a", unknown); !errors.As(err, &te) || te.Wait <= 0 || te.Why != "from this address" {
		t.Errorf("Admit past the burst = %v, want Throttled from this address with a wait", err)
	}
	if err := g.Admit(r, "p", "a", known); err != nil {
		t.Errorf("Admit of a known credential past the burst = %v, want nil", err)
	}
	other := httptest.NewRequest("GET", "/", nil)
	other.RemoteAddr = "192.0.2.9:1234"
	if err := g.Admit(other, "p", "a", unknown); err != nil {
		t.Errorf("Admit from a fresh address = %v, want nil", err)
	}
	// Once it failed itself, the fresh address is refused for the agent
	// whose burst is spent, but not for another agent, nor without one
	// (a request that names no agent spends no agent's tokens).
	g.Fail(other, "p", "")
	if err := g.Admit(other, "p", "a", unknown); !errors.As(err, &te) || te.Why != "for this agent" {
		t.Errorf("Admit for the spent agent from an address that failed = %v, want Throttled for this agent", err)
	}
	for _, agent := range []string{"b", ""} {
		if err := g.Admit(other, "p", agent, unknown); err != nil {
			t.Errorf("Admit for agent %q from an address that failed once = %v, want nil", agent, err)
		}
	}
}

func TestCheckHeaders(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set(HeaderProject, "other")
	if err := CheckHeaders(r, "p"); kernel.ErrorKind(err) != kernel.Forbidden {
		t.Errorf("CheckHeaders(another project) = %v, want %s", err, kernel.Forbidden)
	}
	r = httptest.NewRequest("GET", "/", nil)
	r.Header.Add(HeaderAgent, "a")
	r.Header.Add(HeaderAgent, "b")
	if err := CheckHeaders(r, "p"); kernel.ErrorKind(err) != kernel.Unauthorized {
		t.Errorf("CheckHeaders(two agent headers) = %v, want %s", err, kernel.Unauthorized)
	}
	if err := CheckHeaders(httptest.NewRequest("GET", "/", nil), "p"); err != nil {
		t.Errorf("CheckHeaders(none) = %v", err)
	}
}
