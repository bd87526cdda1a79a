package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

func TestDevIssuerRefusesOutsideLocal(t *testing.T) {
	for _, env := range []map[string]string{{}, {"APP_ENV": "staging"}, {"APP_ENV": "production"}, {"APP_ENV": "Local"}} {
		code, msg := rtExitStatus(t, []string{"dev-issuer", "--addr", "127.0.0.1:0"}, env)
		if code != 1 || !strings.Contains(msg, "runs only with APP_ENV=local") {
			t.Errorf("dev-issuer with %v: %d %q, want 1 and the reason", env, code, msg)
		}
	}
	code, msg := rtExitStatus(t, []string{"dev-issuer", "--addr", "0.0.0.0:0"}, map[string]string{"APP_ENV": "local"})
	if code != 2 || !strings.Contains(msg, "must be a loopback") {
		t.Errorf("dev-issuer on 0.0.0.0: %d %q, want 2", code, msg)
	}
}

// startDevIssuer runs `turnledger runtime dev-issuer` until the test ends
// (its "listening on" line is the runtime's).
func startDevIssuer(t *testing.T, args ...string) string {
	t.Helper()
	return rtStart(t, append([]string{"dev-issuer", "--addr", "127.0.0.1:0"}, args...), map[string]string{"APP_ENV": "local"})
}

// TestDevIssuerWithRuntime: hosted mode end to end on loopback. The runtime
// accepts the dev-issuer's tokens and admits the user into the tenant.
func TestDevIssuerWithRuntime(t *testing.T) {
	issuer := startDevIssuer(t, "--redirect-origin", "http://app.localhost:1")
	db := filepath.Join(t.TempDir(), "rt.db")
	if code, out := tenantsRun(t, nil, "add", "--idp-tenant-id", "default", "--db", db); code != 0 {
		t.Fatalf("tenants add = %d %q", code, out)
	}
	base := rtStart(t, []string{"--addr", "127.0.0.1:0", "--db", db}, map[string]string{"AUTH_MODE": "hosted", "HOSTED_AUTH_URL": issuer, "APP_ENV": "local"})

	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(issuer+"/sign-up", url.Values{"email": {"ada@example.com"}, "name": {"Ada"}, "redirect_uri": {"http://app.localhost:1/app/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil {
		t.Fatalf("sign-up = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	frag, _ := url.ParseQuery(loc.Fragment)
	status, body := rtGet(t, base+"/api/v1/auth/me", map[string]string{"Authorization": "Bearer " + frag.Get("access_token")})
	var me map[string]string
	json.Unmarshal([]byte(body), &me)
	if status != 200 || me["tenant_claim"] != "default" || me["email"] != "ada@example.com" || me["name"] != "Ada" || me["user_id"] == "" {
		t.Errorf("GET /me with a dev-issuer token = %d %s", status, body)
	}
}
