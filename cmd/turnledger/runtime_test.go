package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/authn/authntest"
	"github.com/turnledger/turnledger/internal/checkfor"
)

func rtEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// rtExitStatus runs the runtime with env and returns its exit status and stderr.
func rtExitStatus(t *testing.T, args []string, env map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stdout, stderr syncBuffer
	err := runtimeMain(ctx, args, rtEnv(env), &stdout, &stderr)
	if err == nil {
		return 0, stderr.String()
	}
	ec, ok := err.(exitCoder)
	if !ok {
		return 1, err.Error()
	}
	return ec.ExitCode(), err.Error()
}

func TestRuntimeGuardrails(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runtime.db")
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"production defaults without a secret", map[string]string{"APP_ENV": "production"}, []string{
			"turnledger runtime: DEV_JWT_SECRET must be set to a value other than its default when APP_ENV is production",
		}},
		{"staging with loose flags", map[string]string{
			"APP_ENV": "staging", "AUTH_REQUIRED": "false", "ALLOW_DEBUG_AUTH": "true", "ALLOW_QUERY_AUTH_TOKENS": "true",
			"CORS_ALLOWED_ORIGINS": "https://app.example.test, *", "DEV_JWT_SECRET": "s3cret",
		}, []string{
			"turnledger runtime: AUTH_REQUIRED must be true when APP_ENV is staging",
			"turnledger runtime: ALLOW_DEBUG_AUTH must be false when APP_ENV is staging",
			"turnledger runtime: ALLOW_QUERY_AUTH_TOKENS must be false when APP_ENV is staging (only AUTH_MODE=idp may keep query tokens)",
			"turnledger runtime: CORS_ALLOWED_ORIGINS must not contain * when APP_ENV is staging",
		}},
		{"idp without its settings", map[string]string{"AUTH_MODE": "idp", "AUTH_REQUIRED": "false", "DATABASE_REQUIRED": "false", "IDP_ISSUER_TEMPLATE": "https://x/common"}, []string{
			"turnledger runtime: AUTH_REQUIRED must be true when AUTH_MODE is idp",
			"turnledger runtime: DATABASE_REQUIRED must be true when AUTH_MODE is idp",
			"turnledger runtime: IDP_JWKS_URL must be set when AUTH_MODE is idp",
			"turnledger runtime: IDP_AUDIENCE must be set when AUTH_MODE is idp",
			"turnledger runtime: IDP_ISSUER_TEMPLATE must contain {tenantid}",
		}},
		{"hosted without its URL", map[string]string{"AUTH_MODE": "hosted", "DATABASE_REQUIRED": "no"}, []string{
			"turnledger runtime: DATABASE_REQUIRED must be true or false, not \"no\"",
			"turnledger runtime: HOSTED_AUTH_URL must be set when AUTH_MODE is hosted",
		}},
		{"hosted tenant not admitted", map[string]string{"AUTH_MODE": "hosted", "HOSTED_AUTH_URL": "https://auth.example.test", "HOSTED_TENANT_CLAIM": "acme", "DATABASE_URL": "bolt:" + db}, []string{
			"turnledger runtime: HOSTED_TENANT_CLAIM \"acme\" must match an admitted tenant record; add it with `turnledger tenants add --idp-tenant-id acme`",
		}},
		{"unknown mode", map[string]string{"AUTH_MODE": "saml", "APP_ENV": "dev"}, []string{
			"turnledger runtime: APP_ENV must be local, staging or production, not \"dev\"",
			"turnledger runtime: AUTH_MODE must be dev, idp or hosted, not \"saml\"",
		}},
		{"unknown database scheme", map[string]string{"DATABASE_URL": "mysql://u@localhost/db"}, []string{
			"turnledger runtime: DATABASE_URL scheme \"mysql\" is not supported; use postgres://…, bolt:<path> or a file path (a file whose name starts with a word and a colon: bolt:<name> or ./<name>)",
		}},
		{"postgres URL with one slash", map[string]string{"DATABASE_URL": "postgres:/u@localhost/db"}, []string{
			"turnledger runtime: DATABASE_URL is a PostgreSQL address this runtime cannot read: write postgres://[user[:password]@]host[:port]/dbname, the scheme in lower case followed by //, without white space around it",
		}},
		{"keyword/value connection string", map[string]string{"DATABASE_URL": "host=localhost dbname=turnledger password=secret"}, []string{
			"turnledger runtime: DATABASE_URL looks like a keyword/value connection string (host=… dbname=…); write it as a URL, postgres://user@host:port/dbname?sslmode=…, or name a bbolt file with bolt:<path>",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := rtExitStatus(t, []string{"--addr", "127.0.0.1:0"}, tc.env)
			if code != 1 {
				t.Errorf("runtime with %v: exit status %d, want 1 (output %q)", tc.env, code, out)
			}
			if diff := cmp.Diff(tc.want, strings.Split(out, "\n")); diff != "" {
				t.Errorf("runtime with %v: output lines (-want +got):\n%s", tc.env, diff)
			}
		})
	}
}

// TestRuntimeExitStatusThroughMain: Main prints the lines and returns 1.
func TestRuntimeExitStatusThroughMain(t *testing.T) {
	t.Setenv("APP_ENV", "production")
	t.Setenv("AUTH_MODE", "dev")
	t.Setenv("CORS_ALLOWED_ORIGINS", "*")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"runtime", "--addr", "127.0.0.1:0"}, &stdout, &stderr)
	want := "turnledger runtime: CORS_ALLOWED_ORIGINS must not contain * when APP_ENV is production\n" +
		"turnledger runtime: DEV_JWT_SECRET must be set to a value other than its default when APP_ENV is production\n"
	if code != 1 || stderr.String() != want {
		t.Errorf("Main(runtime) = %d, stderr %q; want 1, %q", code, stderr.String(), want)
	}
}

var listenLine = regexp.MustCompile(`listening on (http://\S+)`)

// rtStart runs the runtime until the test ends and returns its base URL.
func rtStart(t *testing.T, args []string, env map[string]string) string {
	t.Helper()
	base, _ := rtStartLogs(t, args, env)
	return base
}

// rtStartLogs is rtStart that also returns the runtime's stderr.
func rtStartLogs(t *testing.T, args []string, env map[string]string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout syncBuffer
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- runtimeMain(ctx, args, rtEnv(env), &stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("runtime returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("runtime did not stop")
		}
	})
	var base string
	checkfor.Until(t, 10*time.Second, "the runtime to listen", func() bool {
		select {
		case err := <-done:
			t.Fatalf("runtime stopped: %v; stderr %s", err, stderr.String())
		default:
		}
		if m := listenLine.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	return base, stderr
}

func rtGet(t *testing.T, url string, header map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRuntimeServesDevMode(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rt.db")
	base := rtStart(t, []string{"--addr", "127.0.0.1:0", "--db", db}, map[string]string{})
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("listen address = %s, want loopback", base)
	}
	if status, body := rtGet(t, base+"/health", nil); status != 200 {
		t.Errorf("GET /health = %d %s", status, body)
	}
	if status, body := rtGet(t, base+"/ready", nil); status != 200 {
		t.Errorf("GET /ready = %d %s", status, body)
	}
	status, body := rtGet(t, base+"/api/v1/auth/me", map[string]string{"X-Debug-Tenant-Id": "acme", "X-Debug-User-Id": "u1"})
	var me map[string]string
	json.Unmarshal([]byte(body), &me)
	if status != 200 || me["tenant_claim"] != "acme" || me["user_claim"] != "u1" {
		t.Errorf("GET /me = %d %s, want acme/u1", status, body)
	}
}

// TestRuntimeHostedEndToEnd: tenants add, then the runtime admits hosted
// tokens for that tenant; suspending it (with the runtime stopped, as bbolt
// requires) makes the runtime refuse to start.
func TestRuntimeHostedEndToEnd(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rt.db")
	var out, errb bytes.Buffer
	if err := tenantsMain(context.Background(), []string{"add", "--idp-tenant-id", "acme", "--plan", "team", "--db", db}, rtEnv(nil), time.Now, &out, &errb); err != nil {
		t.Fatalf("tenants add: %v %s", err, errb.String())
	}
	jwks := authntest.NewJWKS(t)
	key := authntest.Ed25519Key(t)
	jwks.PutEd25519("k1", key)
	env := map[string]string{"AUTH_MODE": "hosted", "HOSTED_AUTH_URL": jwks.URL() + "/auth", "HOSTED_TENANT_CLAIM": "acme"}

	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runtimeMain(ctx, []string{"--addr", "127.0.0.1:0", "--db", db}, rtEnv(env), &stdout, &stderr)
	}()
	var base string
	checkfor.Until(t, 10*time.Second, "the runtime to listen", func() bool {
		if m := listenLine.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	now := time.Now()
	tok := authntest.Sign(t, jwt.SigningMethodEdDSA, key, "k1", jwt.MapClaims{
		"iss": jwks.URL(), "aud": jwks.URL(), "sub": "user-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}, nil)
	status, body := rtGet(t, base+"/api/v1/auth/me", map[string]string{"Authorization": "Bearer " + tok})
	if status != 200 || !strings.Contains(body, `"tenant_claim":"acme"`) {
		t.Errorf("GET /me = %d %s, want 200 for tenant acme", status, body)
	}
	// While the runtime runs, the admin command cannot open the file.
	err := tenantsMain(context.Background(), []string{"suspend", "acme", "--db", db}, rtEnv(nil), time.Now, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("tenants suspend while the runtime runs = %v, want a lock error", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runtime: %v", err)
	}

	if err := tenantsMain(context.Background(), []string{"suspend", "--db", db, "acme"}, rtEnv(nil), time.Now, &out, &errb); err != nil {
		t.Fatalf("tenants suspend: %v", err)
	}
	code, msg := rtExitStatus(t, []string{"--addr", "127.0.0.1:0", "--db", db}, env)
	if code != 1 || !strings.Contains(msg, "must match an admitted tenant record, but tenant") {
		t.Errorf("runtime with a suspended HOSTED_TENANT_CLAIM: %d %q, want exit 1 naming the rule", code, msg)
	}
}

func TestRuntimeHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := runtimeMain(context.Background(), []string{"--help"}, rtEnv(nil), &stdout, &stderr); err != nil {
		t.Fatalf("runtime --help: %v", err)
	}
	for _, want := range []string{"-addr", "-db", "-nats-url", "127.0.0.1:8090", "AUTH_MODE", "DATABASE_URL"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("runtime --help lacks %q:\n%s", want, stdout.String())
		}
	}
}

var embeddedLine = regexp.MustCompile(`embedded NATS at (nats://\S+)`)

// TestTwoRuntimesShareSessions: a second runtime joins the first one's
// embedded NATS server with --nats-url; a message sent on a session through
// one reaches the same tenant and session on the other, and not another
// tenant's socket with the same session id.
func TestTwoRuntimesShareSessions(t *testing.T) {
	dir := t.TempDir()
	baseA, logsA := rtStartLogs(t, []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "a.db")}, nil)
	m := embeddedLine.FindStringSubmatch(logsA.String())
	if m == nil {
		t.Fatalf("runtime A did not print its embedded NATS URL: %q", logsA.String())
	}
	baseB := rtStart(t, []string{"--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "b.db"), "--nats-url", m[1]}, nil)

	dialWS := func(base, tenant string) *websocket.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		u := "ws" + strings.TrimPrefix(base, "http") + "/api/v1/ws/execution?session_id=s1"
		c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"X-Debug-Tenant-Id": {tenant}, "X-Debug-User-Id": {"u"}}})
		if err != nil {
			t.Fatalf("dial %s: %v", u, err)
		}
		t.Cleanup(func() { c.Close(websocket.StatusNormalClosure, "") })
		return c
	}
	read := func(c *websocket.Conn) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		return string(b)
	}
	write := func(c *websocket.Conn, s string) {
		t.Helper()
		if err := c.Write(context.Background(), websocket.MessageText, []byte(s)); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	onA := dialWS(baseA, "acme")
	onB := dialWS(baseB, "acme")
	otherOnB := dialWS(baseB, "globex")
	write(onA, `{"n":1}`)
	if got := read(onB); got != `{"n":1}` {
		t.Errorf("runtime B socket received %q, want {\"n\":1}", got)
	}
	write(otherOnB, `{"mine":true}`)
	if got := read(otherOnB); got != `{"mine":true}` {
		t.Errorf("other tenant's socket received %q first, want only its own message", got)
	}
}
