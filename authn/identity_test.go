package authn_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
)

var ignoreIDs = cmpopts.IgnoreFields(authn.Principal{}, "TenantID", "UserID")

func TestIdentityPerMode(t *testing.T) {
	dev := newEnv(t, envOpt{mode: authn.ModeDev})
	devOpen := newEnv(t, envOpt{mode: authn.ModeDev, mutate: func(c *authn.Config) { c.AuthRequired = false }})
	idp := newEnv(t, envOpt{mode: authn.ModeIDP})
	hosted := newEnv(t, envOpt{mode: authn.ModeHosted})

	cases := []struct {
		name string
		e    *env
		h    map[string]string
		want authn.Identity
	}{
		{"dev debug headers", dev, map[string]string{"X-Debug-Tenant-Id": "acme", "X-Debug-User-Id": "u-1", "X-Debug-Email": "u@acme.test", "X-Debug-Name": "U One"},
			authn.Identity{TenantClaim: "acme", UserClaim: "u-1", Email: "u@acme.test", Name: "U One"}},
		{"dev HS256", dev, bearerH(dev.devToken("acme", "oid-7")), authn.Identity{TenantClaim: "acme", UserClaim: "oid-7", Email: "oid-7@dev.test"}},
		{"dev anonymous fallback without credentials", devOpen, nil, authn.Identity{TenantClaim: "default", UserClaim: "anonymous"}},
		{"dev anonymous fallback with a bad token", devOpen, bearerH("garbage"), authn.Identity{TenantClaim: "default", UserClaim: "anonymous"}},
		{"idp oid", idp, bearerH(idp.idpToken(tidActive, nil)), authn.Identity{TenantClaim: tidActive, UserClaim: "oid-contoso", Email: "ada@contoso.example", Name: "Ada"}},
		{"idp sub when no oid, upn for email", idp, bearerH(idp.idpToken(tidActive, func(c jwt.MapClaims) {
			delete(c, "oid")
			delete(c, "email")
			c["upn"] = "ada@upn.example"
		})), authn.Identity{TenantClaim: tidActive, UserClaim: "sub-1", Email: "ada@upn.example", Name: "Ada"}},
		{"hosted sub, tenant from HOSTED_TENANT_CLAIM not from tid", hosted, bearerH(hosted.hostedToken("user-9", func(c jwt.MapClaims) {
			c["tid"] = tidOther
			c["org_id"] = tidOther
		})), authn.Identity{TenantClaim: tidActive, UserClaim: "user-9", Email: "user-9@example.test"}},
		{"hosted id when no sub", hosted, bearerH(hosted.hostedToken("", func(c jwt.MapClaims) {
			delete(c, "sub")
			c["id"] = "id-5"
			c["preferred_username"] = "five"
			delete(c, "email")
		})), authn.Identity{TenantClaim: tidActive, UserClaim: "id-5", Email: "five"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, status, eb := tc.e.me(tc.h)
			if status != http.StatusOK {
				t.Fatalf("GET /me = %d %+v, want 200", status, eb)
			}
			if diff := cmp.Diff(authn.Principal{Identity: tc.want}, p, ignoreIDs); diff != "" {
				t.Errorf("GET /me identity (-want +got):\n%s", diff)
			}
			if !authn.IsUUID(p.TenantID) || !authn.IsUUID(p.UserID) {
				t.Errorf("GET /me ids = %q, %q, want UUIDs", p.TenantID, p.UserID)
			}
		})
	}
}

func TestAdmissionResolvesInternalIDs(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeIDP})
	first, status, eb := e.me(bearerH(e.idpToken(tidActive, nil)))
	if status != 200 {
		t.Fatalf("GET /me = %d %+v", status, eb)
	}
	if first.TenantID != e.tenant[tidActive].ID {
		t.Errorf("tenant_id = %s, want the allowlisted tenant's %s", first.TenantID, e.tenant[tidActive].ID)
	}
	// A second login (new name) is the same user: upserted, not duplicated.
	again, _, _ := e.me(bearerH(e.idpToken(tidActive, func(c jwt.MapClaims) { c["name"] = "Ada L." })))
	if again.UserID != first.UserID || again.Name != "Ada L." {
		t.Errorf("second login = %+v, want user %s with name Ada L.", again, first.UserID)
	}
	// Another tenant's user with the same oid is another user.
	other, _, _ := e.me(bearerH(e.idpToken(tidOther, func(c jwt.MapClaims) { c["oid"] = "oid-contoso" })))
	if other.UserID == first.UserID || other.TenantID == first.TenantID {
		t.Errorf("same oid in tenant %s = %+v, want other ids than %+v", tidOther, other, first)
	}

	// Suspending takes effect at the next request; reactivating too.
	ctx := context.Background()
	if _, err := e.store.SetTenantStatus(ctx, tidActive, authn.StatusSuspended, t0); err != nil {
		t.Fatal(err)
	}
	if _, status, eb := e.me(bearerH(e.idpToken(tidActive, nil))); status != 403 || eb.Message != authn.MsgSuspended {
		t.Errorf("GET /me of a suspended tenant = %d %q, want 403 %q", status, eb.Message, authn.MsgSuspended)
	}
	if _, err := e.store.SetTenantStatus(ctx, tidActive, authn.StatusActive, t0); err != nil {
		t.Fatal(err)
	}
	if p, status, _ := e.me(bearerH(e.idpToken(tidActive, nil))); status != 200 || p.UserID != first.UserID {
		t.Errorf("GET /me after reactivation = %d %+v, want 200 with user %s", status, p, first.UserID)
	}
}

func TestDevIDsAreStable(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeDev})
	h := map[string]string{"X-Debug-Tenant-Id": "acme", "X-Debug-User-Id": "u-1"}
	a, _, _ := e.me(h)
	b, _, _ := e.me(bearerH(e.devToken("acme", "u-1")))
	c, _, _ := e.me(bearerH(e.devToken("acme", "u-2")))
	if a.TenantID != b.TenantID || a.UserID != b.UserID {
		t.Errorf("dev ids differ by credential: %+v vs %+v", a, b)
	}
	if c.UserID == a.UserID || c.TenantID != a.TenantID {
		t.Errorf("dev ids of u-2 = %+v, want same tenant, other user than %+v", c, a)
	}
}

func TestHealthAndReady(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeIDP})
	for _, path := range []string{"/health", "/ready"} {
		if status, body := e.do("GET", path, nil, ""); status != 200 {
			t.Errorf("GET %s = %d %s, want 200 without credentials", path, status, body)
		}
	}
	if status, body := e.do("GET", "/api/v1/nope", nil, ""); status != 404 {
		t.Errorf("GET /api/v1/nope = %d %s, want 404", status, body)
	}
	if status, body := e.do("DELETE", "/api/v1/auth/me", nil, ""); status != 405 {
		t.Errorf("DELETE /api/v1/auth/me = %d %s, want 405", status, body)
	}
}

// TestKeySetUnavailable: a key set that is not configured, down, slow or
// garbage gives 503; once it recovers, tokens pass.
func TestKeySetUnavailable(t *testing.T) {
	cases := []struct {
		name string
		b    authntest.Behaviour
		url  string
	}{
		{"not configured", authntest.Serve, "none"},
		{"down", authntest.Down, ""},
		{"garbage", authntest.Garbage, ""},
		{"slow", authntest.Slow, ""},
		{"no usable key", authntest.Empty, ""},
		{"unreachable port", authntest.Serve, "closed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpt{mode: authn.ModeIDP, mutate: func(c *authn.Config) {
				switch tc.url {
				case "none":
					c.IDPJWKSURL = ""
				case "closed":
					c.IDPJWKSURL = "http://127.0.0.1:1/keys"
				}
			}})
			e.jwks.Set(tc.b)
			start := time.Now()
			_, status, eb := e.me(bearerH(e.idpToken(tidActive, nil)))
			if status != 503 || eb.Error != "ServiceUnavailableError" {
				t.Fatalf("GET /me with key set %s = %d %+v, want 503 ServiceUnavailableError", tc.name, status, eb)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("GET /me with key set %s took %v, want the client timeout to end it", tc.name, d)
			}
			if tc.url != "" {
				return
			}
			// Recovery: after the refetch interval the next request fetches again.
			e.jwks.Set(authntest.Serve)
			e.clock.Advance(e.cfg.KeyRefetchEvery)
			if _, status, eb := e.me(bearerH(e.idpToken(tidActive, nil))); status != 200 {
				t.Errorf("GET /me after the key set recovered = %d %+v, want 200", status, eb)
			}
		})
	}
}
