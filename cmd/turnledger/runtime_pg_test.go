package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/turnledger/turnledger/authn/authntest"
	"github.com/turnledger/turnledger/authn/pgstore/pgstoretest"
	"github.com/turnledger/turnledger/authn/service"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// rtProcess runs `turnledger runtime args...` as a separate process with env
// added to the environment, stopped with SIGTERM when the test ends, and
// returns its base URL and its stderr.
func rtProcess(t *testing.T, args []string, env map[string]string) (string, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"runtime"}, args...)...)
	cmd.Env = append(os.Environ(), envChildMain+"=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("runtime process: %v; stderr %s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("runtime process did not stop on SIGTERM")
		}
	})
	var base string
	checkfor.Until(t, 20*time.Second, "the runtime process to listen", func() bool {
		select {
		case err := <-done:
			t.Fatalf("runtime process stopped: %v; stderr %s", err, stderr.String())
		default:
		}
		if m := listenLine.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	return base, &stderr
}

// tenantsRun runs `turnledger tenants` and returns its exit status and output.
func tenantsRun(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := tenantsMain(context.Background(), args, rtEnv(env), time.Now, &out, &errb)
	if err == nil {
		return 0, out.String()
	}
	var ec exitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode(), out.String() + errb.String() + err.Error()
	}
	return 1, err.Error()
}

// TestTenantsPostgresFreshDatabase: `tenants` on a fresh PostgreSQL database
// migrates it and works; the URL never becomes a file.
func TestTenantsPostgresFreshDatabase(t *testing.T) {
	db := pgstoretest.NewUnmigrated(t)
	dir := t.TempDir()
	t.Chdir(dir)
	if code, out := tenantsRun(t, nil, "add", "--idp-tenant-id", "acme", "--db", db.AdminURL); code != 0 || !strings.Contains(out, "idp_tenant_id acme") {
		t.Fatalf("tenants add --db postgres://… = %d %q", code, out)
	}
	if code, out := tenantsRun(t, map[string]string{"DATABASE_ADMIN_URL": db.AdminURL}, "list"); code != 0 || !strings.Contains(out, "acme") {
		t.Errorf("tenants list (DATABASE_ADMIN_URL) = %d %q", code, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("tenants with a postgres:// URL wrote %v into the working directory", entries)
	}
	if code, out := tenantsRun(t, nil, "list", "--db", "mysql://x/y"); code != 1 || !strings.Contains(out, `scheme "mysql" is not supported`) {
		t.Errorf("tenants list --db mysql://… = %d %q, want 1 and the scheme named", code, out)
	}
	// The runtime role may not administer tenants.
	if code, out := tenantsRun(t, nil, "add", "--idp-tenant-id", "x", "--db", db.RuntimeURL); code != 1 {
		t.Errorf("tenants add as the runtime role = %d %q, want 1", code, out)
	}
}

// TestRuntimeMigrateCommand: migrate applies once and grants; a runtime on an
// unmigrated database, or as a superuser, refuses to start and says why.
func TestRuntimeMigrateCommand(t *testing.T) {
	db := pgstoretest.NewUnmigrated(t)
	env := map[string]string{"DATABASE_URL": db.RuntimeURL}
	code, msg := rtExitStatus(t, []string{"--addr", "127.0.0.1:0"}, env)
	if code != 1 || !strings.Contains(msg, "run `turnledger runtime migrate`") {
		t.Errorf("runtime on an unmigrated database: %d %q, want 1 naming the migrate command", code, msg)
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		err := runtimeMain(context.Background(), append([]string{"migrate"}, args...), rtEnv(map[string]string{"DATABASE_ADMIN_URL": db.AdminURL}), &out, &errb)
		if err != nil {
			return 1, err.Error()
		}
		return 0, out.String()
	}
	if code, out := run("--grant-to", db.Role); code != 0 || !strings.Contains(out, "applied [1]") || !strings.Contains(out, "granted") {
		t.Errorf("runtime migrate = %d %q", code, out)
	}
	if code, out := run(); code != 0 || !strings.Contains(out, "nothing to apply") {
		t.Errorf("runtime migrate (again) = %d %q", code, out)
	}
	if code, out := run("--grant-to", "bad name"); code != 1 {
		t.Errorf("runtime migrate --grant-to 'bad name' = %d %q, want 1", code, out)
	}
	code, msg = rtExitStatus(t, []string{"--addr", "127.0.0.1:0"}, map[string]string{"DATABASE_URL": db.AdminURL, "AUTH_MODE": "hosted", "HOSTED_AUTH_URL": "http://127.0.0.1:1"})
	if code != 1 || !strings.Contains(msg, "BYPASSRLS") {
		t.Errorf("runtime as a superuser: %d %q, want 1 naming BYPASSRLS", code, msg)
	}
}

// TestRuntimesOnPostgres: two runtime processes share one PostgreSQL
// database (the first migrates through DATABASE_ADMIN_URL); `tenants`
// administers it while they run; and of dials racing with one ticket on both
// processes, exactly one connects and the others get 401, as with the bbolt
// store.
func TestRuntimesOnPostgres(t *testing.T) {
	db := pgstoretest.NewUnmigrated(t)
	jwks := authntest.NewJWKS(t)
	key := authntest.Ed25519Key(t)
	jwks.PutEd25519("k1", key)
	env := map[string]string{"AUTH_MODE": "hosted", "HOSTED_AUTH_URL": jwks.URL(), "HOSTED_TENANT_CLAIM": "acme", "DATABASE_URL": db.RuntimeURL}

	// A fresh database: tenants migrates it; then grant the runtime role.
	if code, out := tenantsRun(t, nil, "add", "--idp-tenant-id", "acme", "--db", db.AdminURL); code != 0 {
		t.Fatalf("tenants add = %d %q", code, out)
	}
	var out, errb bytes.Buffer
	if err := runtimeMain(context.Background(), []string{"migrate", "--grant-to", db.Role}, rtEnv(map[string]string{"DATABASE_ADMIN_URL": db.AdminURL}), &out, &errb); err != nil {
		t.Fatalf("runtime migrate: %v", err)
	}
	envA := map[string]string{"DATABASE_ADMIN_URL": db.AdminURL}
	for k, v := range env {
		envA[k] = v
	}
	// Ten rounds of dials below spend 30 failed authentications on each
	// runtime within a second or two, past the throttle's default burst of
	// 20 from one address: the 429s would hide the 401s the test counts.
	throttle := []string{"--auth-failure-burst", "64"}
	baseA, logsA := rtProcess(t, append([]string{"--addr", "127.0.0.1:0"}, throttle...), envA)
	// The child's stdout and stderr are two pipes copied on their own, so
	// the listening line (stdout) can arrive before the NATS line (stderr)
	// printed ahead of it.
	var m []string
	checkfor.NoError(t, 10*time.Second, func() error {
		if m = embeddedLine.FindStringSubmatch(logsA.String()); m == nil {
			return fmt.Errorf("runtime A did not print its embedded NATS URL: %q", logsA.String())
		}
		return nil
	})
	baseB, _ := rtProcess(t, append([]string{"--addr", "127.0.0.1:0", "--nats-url", m[1]}, throttle...), env)

	now := time.Now()
	tok := authntest.Sign(t, jwt.SigningMethodEdDSA, key, "k1", jwt.MapClaims{
		"iss": jwks.URL(), "aud": jwks.URL(), "sub": "user-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}, nil)
	bearer := map[string]string{"Authorization": "Bearer " + tok}
	for _, base := range []string{baseA, baseB} {
		if status, body := rtGet(t, base+"/api/v1/auth/me", bearer); status != 200 || !strings.Contains(body, `"tenant_claim":"acme"`) {
			t.Fatalf("GET %s/me = %d %s", base, status, body)
		}
	}

	ticket := func() string {
		t.Helper()
		req, _ := http.NewRequest("POST", baseA+"/api/v1/auth/ws-ticket", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var tr struct{ Ticket string }
		if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST ws-ticket = %d, %v", resp.StatusCode, err)
		}
		return tr.Ticket
	}
	for round := range 10 {
		tk := ticket()
		var wg sync.WaitGroup
		bases := []string{baseA, baseB, baseA, baseB, baseA, baseB}
		statuses := make([]int, len(bases))
		start := make(chan struct{})
		for i, base := range bases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				<-start
				c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/v1/ws/execution?session_id=s1&ticket="+tk, nil)
				if err == nil {
					statuses[i] = http.StatusSwitchingProtocols
					c.Close(websocket.StatusNormalClosure, "")
				} else if resp != nil {
					statuses[i] = resp.StatusCode
				}
			}()
		}
		close(start)
		wg.Wait()
		won, lost := 0, 0
		for _, st := range statuses {
			switch st {
			case http.StatusSwitchingProtocols:
				won++
			case http.StatusUnauthorized:
				lost++
			}
		}
		if won != 1 || lost != len(bases)-1 {
			t.Errorf("round %d: dials on runtimes A, B, A, B, A, B with one ticket = %v, want one 101 and the rest 401", round, statuses)
		}
	}

	// Suspending the tenant while both run takes effect at once.
	if code, out := tenantsRun(t, map[string]string{"DATABASE_ADMIN_URL": db.AdminURL}, "suspend", "acme"); code != 0 {
		t.Fatalf("tenants suspend while runtimes run = %d %q", code, out)
	}
	if status, body := rtGet(t, baseB+"/api/v1/auth/me", bearer); status != 403 || !strings.Contains(body, "suspended") {
		t.Errorf("GET /me after suspend = %d %s, want 403 suspended", status, body)
	}
}

// TestRuntimeMigratesFreshDatabaseAsDocumented: on a database set up as
// docs/runtime.md says (an owner role that is not a superuser, a runtime
// role without superuser or BYPASSRLS, nothing else), a runtime started
// with DATABASE_ADMIN_URL migrates the schema by itself and serves: the
// tenant allowlist, admission, tickets and the websocket, as the runtime
// role.
func TestRuntimeMigratesFreshDatabaseAsDocumented(t *testing.T) {
	db := pgstoretest.NewAsDocumented(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, u := range []string{db.AdminURL, db.RuntimeURL} {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatalf("connect as %s: %v", service.DB{URL: u}.String(), err)
		}
		var super, bypass bool
		err = c.QueryRow(ctx, "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user").Scan(&super, &bypass)
		c.Close(context.Background())
		if err != nil || super || bypass {
			t.Fatalf("role of %s: superuser %v, BYPASSRLS %v, %v; want neither", service.DB{URL: u}.String(), super, bypass, err)
		}
	}

	jwks := authntest.NewJWKS(t)
	key := authntest.RSAKey(t, 0)
	jwks.PutRSA("k1", key)
	const tid = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	base, logs := rtStartLogs(t, []string{"--addr", "127.0.0.1:0"}, map[string]string{
		"AUTH_MODE": "idp", "IDP_JWKS_URL": jwks.URL() + "/keys", "IDP_AUDIENCE": "api://turnledger",
		"IDP_ISSUER_TEMPLATE": "https://login.example.test/{tenantid}/v2.0",
		"DATABASE_URL":        db.RuntimeURL, "DATABASE_ADMIN_URL": db.AdminURL,
	})
	if !strings.Contains(logs.String(), "applied schema migrations [1]") {
		t.Errorf("runtime log %q does not say it migrated", logs.String())
	}
	if status, body := rtGet(t, base+"/ready", nil); status != 200 || !strings.Contains(body, `"database":"ok"`) {
		t.Errorf("GET /ready = %d %s, want 200 with the database ok", status, body)
	}

	now := time.Now()
	tok := authntest.Sign(t, jwt.SigningMethodRS256, key, "k1", jwt.MapClaims{
		"iss": "https://login.example.test/" + tid + "/v2.0", "aud": "api://turnledger",
		"tid": tid, "oid": "user-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}, nil)
	bearer := map[string]string{"Authorization": "Bearer " + tok}
	if status, body := rtGet(t, base+"/api/v1/auth/me", bearer); status != 403 {
		t.Errorf("GET /me before the tenant is admitted = %d %s, want 403", status, body)
	}
	// The owner admits the tenant while the runtime runs.
	if code, out := tenantsRun(t, map[string]string{"DATABASE_ADMIN_URL": db.AdminURL}, "add", "--idp-tenant-id", tid); code != 0 {
		t.Fatalf("tenants add = %d %q", code, out)
	}
	if status, body := rtGet(t, base+"/api/v1/auth/me", bearer); status != 200 || !strings.Contains(body, `"user_claim":"user-1"`) {
		t.Fatalf("GET /me = %d %s, want 200", status, body)
	}
	req, _ := http.NewRequest("POST", base+"/api/v1/auth/ws-ticket", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct{ Ticket string }
	err = json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("POST ws-ticket = %d, %v", resp.StatusCode, err)
	}
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/v1/ws/execution?ticket="+tr.Ticket, nil)
	if err != nil {
		t.Fatalf("dial with the ticket: %v", err)
	}
	c.Close(websocket.StatusNormalClosure, "")

	// A second runtime on the same database applies nothing and serves.
	base2, logs2 := rtStartLogs(t, []string{"--addr", "127.0.0.1:0"}, map[string]string{
		"AUTH_MODE": "idp", "IDP_JWKS_URL": jwks.URL() + "/keys", "IDP_AUDIENCE": "api://turnledger",
		"IDP_ISSUER_TEMPLATE": "https://login.example.test/{tenantid}/v2.0",
		"DATABASE_URL":        db.RuntimeURL, "DATABASE_ADMIN_URL": db.AdminURL,
	})
	if strings.Contains(logs2.String(), "applied schema migrations") {
		t.Errorf("second runtime log %q says it migrated again", logs2.String())
	}
	if status, body := rtGet(t, base2+"/api/v1/auth/me", bearer); status != 200 {
		t.Errorf("GET /me on the second runtime = %d %s, want 200", status, body)
	}
}
