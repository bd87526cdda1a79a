package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/turnledger/turnledger/authn"
)

func TestTenantsCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "admin.db")
	env := rtEnv(map[string]string{"DATABASE_ADMIN_URL": "bolt:" + db, "DATABASE_URL": "postgres://not/used"})
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		err := tenantsMain(context.Background(), args, env, now, &out, &errb)
		code := 0
		if err != nil {
			code = 1
			if ec, ok := err.(exitCoder); ok {
				code = ec.ExitCode()
			}
			errb.WriteString(err.Error())
		}
		return code, out.String(), errb.String()
	}

	if code, out, errs := run("add", "--idp-tenant-id", "acme", "--plan", "team"); code != 0 || !strings.Contains(out, "idp_tenant_id acme, plan team, status active") {
		t.Fatalf("tenants add = %d %q %q", code, out, errs)
	}
	run("add", "--idp-tenant-id", "globex")
	steps := []struct {
		args []string
		code int
		out  string // substring
	}{
		{[]string{"add", "--idp-tenant-id", "acme"}, 1, ""}, // duplicate
		{[]string{"add", "--idp-tenant-id", "a/b"}, 1, ""},  // breaks the issuer template
		{[]string{"add", "--idp-tenant-id", "x", "--plan", "Gold Plan"}, 1, ""},
		{[]string{"add"}, 2, ""},
		{[]string{"suspend"}, 2, ""},
		{[]string{"frobnicate"}, 2, ""},
		{[]string{"suspend", "nobody"}, 1, ""},
		{[]string{"suspend", "acme"}, 0, "is suspended"},
		{[]string{"activate", "acme"}, 0, "is active"},
		{[]string{"delete", "globex"}, 0, "is deleted"},
		{[]string{"activate", "globex"}, 1, ""}, // deleted is final
	}
	for _, s := range steps {
		code, out, errs := run(s.args...)
		if code != s.code || !strings.Contains(out, s.out) {
			t.Errorf("tenants %v = %d %q %q, want %d and %q", s.args, code, out, errs, s.code, s.out)
		}
	}
	code, out, _ := run("list", "--json")
	var got []authn.Tenant
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("tenants list --json = %d %q (%v)", code, out, err)
	}
	want := []authn.Tenant{
		{IDPTenantID: "acme", Status: "active", Plan: "team", CreatedAt: now(), UpdatedAt: now()},
		{IDPTenantID: "globex", Status: "deleted", Plan: "standard", CreatedAt: now(), UpdatedAt: now()},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(authn.Tenant{}, "ID")); diff != "" {
		t.Errorf("tenants list (-want +got):\n%s", diff)
	}
	for _, tn := range got {
		if !authn.IsUUID(tn.ID) {
			t.Errorf("tenant id %q is not a UUID", tn.ID)
		}
	}
	// Suspend by internal id works too.
	if code, out, _ := run("suspend", got[0].ID); code != 0 || !strings.Contains(out, "is suspended") {
		t.Errorf("tenants suspend <uuid> = %d %q", code, out)
	}
	if code, out, _ := run("list"); code != 0 || !strings.Contains(out, "IDP_TENANT_ID") || !strings.Contains(out, "suspended") {
		t.Errorf("tenants list = %d %q", code, out)
	}
}

// TestTenantsNeverWritesAnAddress: `tenants add` with a database address
// that is not a postgres:// URL fails and writes nothing where a bbolt
// path would have gone.
func TestTenantsNeverWritesAnAddress(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, addr := range []string{"postgres:/rt@db/x", "postgresql:x", "mysql://db/x", "host=db dbname=x", "dbname=x"} {
		for _, env := range []map[string]string{nil, {"DATABASE_ADMIN_URL": addr}, {"DATABASE_URL": addr}} {
			args := []string{"add", "--idp-tenant-id", "acme"}
			if env == nil {
				args = append(args, "--db", addr)
			}
			var out, errb bytes.Buffer
			err := tenantsMain(context.Background(), args, rtEnv(env), time.Now, &out, &errb)
			var ec exitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 1 {
				t.Errorf("tenants %v with %v = %v, want exit status 1", args, env, err)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("tenants wrote %v into the working directory", entries)
	}
}
