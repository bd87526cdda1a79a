package authn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/turnledger/turnledger/authn"
)

func containsBytes(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }

// dbBytes reads the store's file (bbolt allows reading it while open).
func dbBytes(t *testing.T, e *env) []byte {
	t.Helper()
	var path string
	e.store.View(func(p string) { path = p })
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		t.Fatalf("read db: %v", err)
	}
	return b
}

func TestProviderProfiles(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeHosted})
	ada, bob := bearerH(e.hostedToken("ada", nil)), bearerH(e.hostedToken("bob", nil))
	const secret = "sk-live-0123456789abcdefWXYZ"

	status, body := e.do("PUT", "/api/v1/provider-profiles/openai", ada, `{"base_url":"https://api.example.test/v1","model":"m-1","api_key":"`+secret+`"}`)
	if status != 200 {
		t.Fatalf("PUT profile = %d %s, want 200", status, body)
	}
	if containsBytes(body, secret) || containsBytes(body, "ciphertext") {
		t.Errorf("PUT response %s shows the key or its ciphertext", body)
	}
	var v authn.ProfileView
	json.Unmarshal(body, &v)
	want := authn.ProfileView{Provider: "openai", BaseURL: "https://api.example.test/v1", Model: "m-1", HasAPIKey: true, APIKeyHint: "…WXYZ"}
	if diff := cmp.Diff(want, v, cmpopts.IgnoreFields(authn.ProfileView{}, "UpdatedAt")); diff != "" {
		t.Errorf("PUT profile view (-want +got):\n%s", diff)
	}

	// Ada sees it; Bob (same tenant, other user) does not.
	if status, body := e.do("GET", "/api/v1/provider-profiles/openai", ada, ""); status != 200 || containsBytes(body, secret) {
		t.Errorf("GET own profile = %d %s, want 200 without the key", status, body)
	}
	if status, _ := e.do("GET", "/api/v1/provider-profiles/openai", bob, ""); status != 404 {
		t.Errorf("GET another user's profile = %d, want 404", status)
	}
	status, body = e.do("GET", "/api/v1/provider-profiles", bob, "")
	if status != 200 || !containsBytes(body, `"profiles":[]`) {
		t.Errorf("GET profiles as bob = %d %s, want an empty list", status, body)
	}
	if status, _ := e.do("DELETE", "/api/v1/provider-profiles/openai", bob, ""); status != 404 {
		t.Errorf("DELETE another user's profile = %d, want 404", status)
	}

	// The file holds ciphertext only.
	if containsBytes(dbBytes(t, e), secret) {
		t.Errorf("database file contains the plaintext key")
	}

	// Updating without api_key keeps the key.
	if status, body := e.do("PUT", "/api/v1/provider-profiles/openai", ada, `{"model":"m-2"}`); status != 200 || !containsBytes(body, `"has_api_key":true`) {
		t.Errorf("PUT without api_key = %d %s, want the key kept", status, body)
	}

	// Bad input changes nothing.
	for _, bad := range []struct{ path, body string }{
		{"/api/v1/provider-profiles/openai", `{"api_key": 5}`},
		{"/api/v1/provider-profiles/openai", `{"unknown": 1}`},
		{"/api/v1/provider-profiles/openai", `{"base_url":"ftp://x"}`},
		{"/api/v1/provider-profiles/Open.AI", `{}`},
		{"/api/v1/provider-profiles/openai", `{} {}`},
	} {
		if status, body := e.do("PUT", bad.path, ada, bad.body); status != 400 {
			t.Errorf("PUT %s %s = %d %s, want 400", bad.path, bad.body, status, body)
		}
	}
	if status, body := e.do("GET", "/api/v1/provider-profiles/openai", ada, ""); status != 200 || !containsBytes(body, `"model":"m-2"`) {
		t.Errorf("GET after bad input = %d %s, want model m-2 unchanged", status, body)
	}

	// Unauthenticated: 401.
	if status, _ := e.do("GET", "/api/v1/provider-profiles", nil, ""); status != 401 {
		t.Errorf("GET profiles without a token = %d, want 401", status)
	}
	if status, _ := e.do("DELETE", "/api/v1/provider-profiles/openai", ada, ""); status != 204 {
		t.Errorf("DELETE own profile = %d, want 204", status)
	}
	if status, _ := e.do("GET", "/api/v1/provider-profiles/openai", ada, ""); status != 404 {
		t.Errorf("GET deleted profile = %d, want 404", status)
	}
}

// TestProfileKeyRoundTrip: the stored key decrypts for its own tenant and
// user (and only them: the ciphertext is bound to the row).
func TestProfileKeyRoundTrip(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeHosted})
	ada := bearerH(e.hostedToken("ada", nil))
	if status, body := e.do("PUT", "/api/v1/provider-profiles/p1", ada, `{"api_key":"short"}`); status != 200 || containsBytes(body, "hint") {
		t.Fatalf("PUT = %d %s, want 200 with no hint for a short key", status, body)
	}
	p, _, _ := e.me(ada)
	ctx := authn.WithPrincipal(context.Background(), p)
	if got, err := e.srv.ProfileAPIKey(ctx, "p1"); err != nil || got != "short" {
		t.Errorf("ProfileAPIKey(p1) = %q, %v, want short", got, err)
	}
	// Copy the row to another user: it does not decrypt there.
	prof, err := e.store.Profile(ctx, p.TenantID, p.UserID, "p1")
	if err != nil {
		t.Fatal(err)
	}
	bob := p
	bob.UserID = "00000000-0000-4000-8000-000000000000"
	if err := e.store.PutProfile(ctx, bob.TenantID, bob.UserID, prof); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.ProfileAPIKey(authn.WithPrincipal(context.Background(), bob), "p1"); err == nil {
		t.Errorf("ProfileAPIKey of a row copied to another user succeeded, want an error")
	}
}

func TestProfilesNeedKeyAndHostedMode(t *testing.T) {
	noKey := newEnv(t, envOpt{mode: authn.ModeHosted, mutate: func(c *authn.Config) { c.SecretEncryptionKey = "" }})
	if status, body := noKey.do("GET", "/api/v1/provider-profiles", bearerH(noKey.hostedToken("ada", nil)), ""); status != http.StatusServiceUnavailable {
		t.Errorf("GET profiles without SECRET_ENCRYPTION_KEY = %d %s, want 503", status, body)
	}
	idp := newEnv(t, envOpt{mode: authn.ModeIDP})
	if status, _ := idp.do("GET", "/api/v1/provider-profiles", bearerH(idp.idpToken(tidActive, nil)), ""); status != http.StatusNotFound {
		t.Errorf("GET profiles in idp mode = %d, want 404", status)
	}
}
