package authn_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
	"github.com/turnledger/turnledger/authn/boltstore"
	"github.com/turnledger/turnledger/authn/natsbus"
	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/internal/throttle"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	issuerTemplate = "https://login.example.test/{tenantid}/v2.0"
	audience       = "api://turnledger-runtime"
	rsaKid         = "rsa-1"
	edKid          = "ed-1"
	devSecret      = "a-long-dev-secret-for-tests-only"
	profileKey     = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes
)

// Tenants every environment is given.
const (
	tidActive    = "contoso"
	tidSuspended = "fabrikam"
	tidDeleted   = "northwind"
	tidOther     = "adatum"
)

// env is one runtime server with its real parts.
type env struct {
	t      testing.TB
	cfg    authn.Config
	clock  *authntest.Clock
	jwks   *authntest.JWKS
	store  *boltstore.Store
	srv    *authn.Server
	http   *httptest.Server
	rsa    *rsa.PrivateKey
	ed     ed25519.PrivateKey
	natURL string
	tenant map[string]authn.Tenant
}

type envOpt struct {
	mode    authn.Mode
	mutate  func(*authn.Config)
	store   *boltstore.Store // shared store (several servers)
	jwks    *authntest.JWKS
	natsURL string
	clock   *authntest.Clock
}

func newEnv(t testing.TB, o envOpt) *env {
	t.Helper()
	e := &env{t: t, clock: o.clock, jwks: o.jwks, store: o.store, natURL: o.natsURL, tenant: map[string]authn.Tenant{}}
	if e.clock == nil {
		e.clock = authntest.NewClock(t0)
	}
	if e.jwks == nil {
		e.jwks = authntest.NewJWKS(t)
	}
	e.rsa = authntest.RSAKey(t, 0)
	e.jwks.PutRSA(rsaKid, e.rsa)
	e.ed = authntest.Ed25519Key(t)
	e.jwks.PutEd25519(edKid, e.ed)
	if e.natURL == "" {
		e.natURL = authntest.StartNATS(t)
	}
	if e.store == nil {
		e.store = authntest.OpenStore(t)
	}
	ctx := context.Background()
	for _, x := range []struct{ tid, status string }{
		{tidActive, ""}, {tidSuspended, authn.StatusSuspended}, {tidDeleted, authn.StatusDeleted}, {tidOther, ""}, {"default", ""},
	} {
		tn, err := e.store.TenantByClaim(ctx, x.tid)
		if err != nil {
			tn, err = e.store.AddTenant(ctx, x.tid, "standard", t0)
			if err != nil {
				t.Fatalf("AddTenant(%s): %v", x.tid, err)
			}
			if x.status != "" {
				if tn, err = e.store.SetTenantStatus(ctx, tn.ID, x.status, t0); err != nil {
					t.Fatalf("SetTenantStatus(%s): %v", x.tid, err)
				}
			}
		}
		e.tenant[x.tid] = tn
	}

	cfg := authn.Defaults(authn.EnvLocal, o.mode)
	cfg.DevJWTSecret = devSecret
	cfg.IDPJWKSURL = e.jwks.URL() + "/discovery/v2.0/keys"
	cfg.IDPAudience = audience
	cfg.IDPIssuerTemplate = issuerTemplate
	cfg.HostedAuthURL = e.jwks.URL() + "/api/auth"
	cfg.HostedTenantClaim = tidActive
	cfg.SecretEncryptionKey = profileKey
	// The rejection tables send dozens of refused requests from one address
	// on a clock that stands still; the throttle of failed authentication
	// is tested on its own (throttle_test.go), with its own rate.
	cfg.AuthFailures = throttle.Rate{}
	if o.mutate != nil {
		o.mutate(&cfg)
	}
	e.cfg = cfg

	nc, err := nats.Connect(e.natURL)
	if err != nil {
		t.Fatalf("nats.Connect: %v", err)
	}
	t.Cleanup(nc.Close)
	srv, err := authn.NewServer(cfg, authn.Deps{
		Store: e.store, Bus: natsbus.New(nc), Now: e.clock.Now,
		HTTPClient: &http.Client{Timeout: 300 * time.Millisecond},
		Logf:       t.Logf,
	})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	e.srv = srv
	e.http = httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		e.http.Close()
	})
	return e
}

func (e *env) hostedOrigin() string { return e.jwks.URL() }

// idpClaims are valid claims of an idp token for tid.
func (e *env) idpClaims(tid string) jwt.MapClaims {
	now := e.clock.Now()
	return jwt.MapClaims{
		"iss": strings.ReplaceAll(issuerTemplate, "{tenantid}", tid),
		"aud": audience, "tid": tid, "oid": "oid-" + tid, "sub": "sub-1",
		"email": "ada@" + tid + ".example", "name": "Ada",
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

func (e *env) idpToken(tid string, edit func(jwt.MapClaims)) string {
	c := e.idpClaims(tid)
	if edit != nil {
		edit(c)
	}
	return authntest.Sign(e.t, jwt.SigningMethodRS256, e.rsa, rsaKid, c, nil)
}

func (e *env) hostedClaims(sub string) jwt.MapClaims {
	now := e.clock.Now()
	return jwt.MapClaims{
		"iss": e.hostedOrigin(), "aud": e.hostedOrigin(), "sub": sub, "email": sub + "@example.test",
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

func (e *env) hostedToken(sub string, edit func(jwt.MapClaims)) string {
	c := e.hostedClaims(sub)
	if edit != nil {
		edit(c)
	}
	return authntest.Sign(e.t, jwt.SigningMethodEdDSA, e.ed, edKid, c, nil)
}

func (e *env) devToken(tid, oid string) string {
	return authntest.Sign(e.t, jwt.SigningMethodHS256, []byte(devSecret), "", jwt.MapClaims{"tid": tid, "oid": oid, "email": oid + "@dev.test"}, nil)
}

// do sends a request and returns status, headers and body.
func (e *env) do(method, path string, header map[string]string, body string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatalf("NewRequest: %v", err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func bearerH(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

// me calls /api/v1/auth/me and decodes a 200 answer.
func (e *env) me(header map[string]string) (authn.Principal, int, jsonhttp.ErrorBody) {
	e.t.Helper()
	status, body := e.do("GET", "/api/v1/auth/me", header, "")
	var p authn.Principal
	var eb jsonhttp.ErrorBody
	if status == http.StatusOK {
		if err := json.Unmarshal(body, &p); err != nil {
			e.t.Fatalf("decode me %s: %v", body, err)
		}
	} else if err := json.Unmarshal(body, &eb); err != nil {
		e.t.Fatalf("decode error body %s: %v", body, err)
	}
	return p, status, eb
}

// ticket gets a websocket ticket with the bearer token.
func (e *env) ticket(tok string) authn.TicketResponse {
	e.t.Helper()
	status, body := e.do("POST", "/api/v1/auth/ws-ticket", bearerH(tok), "")
	if status != http.StatusOK {
		e.t.Fatalf("POST ws-ticket = %d %s, want 200", status, body)
	}
	var tr authn.TicketResponse
	if err := json.Unmarshal(body, &tr); err != nil {
		e.t.Fatalf("decode ticket: %v", err)
	}
	return tr
}

func (e *env) wsURL(query string) string {
	return "ws" + strings.TrimPrefix(e.http.URL, "http") + "/api/v1/ws/execution?" + query
}
