package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/turnledger/turnledger/authn/service"
	"github.com/turnledger/turnledger/internal/cliflag"
)

const tenantsUsage = `Usage: turnledger tenants <add|suspend|activate|delete|list> [flags]

Administer the runtime's tenant allowlist, in the database the runtime
uses. On PostgreSQL it works while runtimes run, and brings a fresh
database's schema up to date first (so --db must be the schema owner's URL).
A bbolt file allows one process at a time: stop the runtime first.

  tenants add --idp-tenant-id ID [--plan PLAN]   allowlist a tenant (status active)
  tenants suspend ID                             active → suspended (403 "tenant access is suspended")
  tenants activate ID                            suspended → active
  tenants delete ID                              → deleted (403 "tenant access has been removed"); final
  tenants list [--json]                          every tenant

ID is the tenant's internal id or its idp_tenant_id. Every subcommand takes
--db: a postgres:// URL or a bbolt file (default: DATABASE_ADMIN_URL, else
DATABASE_URL, else ./data/runtime.db).
`

func runTenants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return tenantsMain(ctx, args, os.Getenv, time.Now, stdout, stderr)
}

func tenantsMain(ctx context.Context, args []string, getenv func(string) string, now func() time.Time, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tenantsUsage)
		return &exitCodeError{code: 2}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, tenantsUsage)
		return nil
	}
	sub := args[0]
	fs := flag.NewFlagSet("tenants "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", "", "postgres:// URL of the schema owner, or a bbolt database file (default: DATABASE_ADMIN_URL, else DATABASE_URL, else "+service.DefaultDBPath+")")
	var idpTenantID, plan *string
	var asJSON *bool
	nargs := 1
	switch sub {
	case "add":
		idpTenantID = fs.String("idp-tenant-id", "", "the tenant claim to allowlist: the tid in idp mode, HOSTED_TENANT_CLAIM in hosted mode (required)")
		plan = fs.String("plan", "standard", "plan name: 1 to 32 lower-case letters, digits, '-' or '_'")
		nargs = 0
	case "list":
		asJSON = fs.Bool("json", false, "print a JSON array instead of a table")
		nargs = 0
	case "suspend", "activate", "delete":
	default:
		fmt.Fprintf(stderr, "turnledger tenants: unknown subcommand %q\n\n%s", sub, tenantsUsage)
		return &exitCodeError{code: 2}
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: turnledger tenants %s [flags]%s\n\nFlags:\n", sub, map[int]string{0: "", 1: " ID"}[nargs])
		fs.PrintDefaults()
	}
	// Flags may come before or after the positional argument.
	positional, help, err := cliflag.ParseInterspersed(fs, args[1:], stdout)
	if help || err != nil {
		return err
	}
	if len(positional) != nargs {
		fs.Usage()
		if nargs == 1 {
			return &exitCodeError{code: 2, msg: fmt.Sprintf("turnledger tenants %s: give exactly one tenant id or idp tenant id", sub)}
		}
		return &exitCodeError{code: 2, msg: fmt.Sprintf("turnledger tenants %s: unexpected argument %q", sub, positional[0])}
	}
	if sub == "add" && *idpTenantID == "" {
		return &exitCodeError{code: 2, msg: "turnledger tenants add: --idp-tenant-id is required"}
	}

	dbURL, name := getenv("DATABASE_ADMIN_URL"), "DATABASE_ADMIN_URL"
	if dbURL == "" {
		dbURL, name = getenv("DATABASE_URL"), "DATABASE_URL"
	}
	target, err := service.ResolveDB(*db, dbURL, name)
	if err != nil {
		return &exitCodeError{code: 1, msg: "turnledger tenants: " + err.Error()}
	}
	// Only add writes a new tenant: every other subcommand reads or changes
	// tenants that must already be there, and never creates a store.
	if sub != "add" && target.URL == "" {
		if _, err := os.Stat(target.Path); errors.Is(err, os.ErrNotExist) {
			return &exitCodeError{code: 1, msg: fmt.Sprintf("turnledger tenants %s: no runtime database at %s (it is made by `turnledger runtime` or `turnledger tenants add`; choose another with --db, DATABASE_ADMIN_URL or DATABASE_URL)", sub, target.Path)}
		}
	}
	store, err := service.OpenTenantAdmin(ctx, target)
	if err != nil {
		return &exitCodeError{code: 1, msg: "turnledger tenants: " + err.Error()}
	}
	defer store.Close()

	op := service.TenantOp{Command: sub}
	switch sub {
	case "add":
		op.IDPTenantID, op.Plan = *idpTenantID, *plan
	case "list":
		op.JSON = *asJSON
	default:
		op.Ref = positional[0]
	}
	if err := service.AdministerTenants(ctx, store, op, now(), stdout); err != nil {
		return &exitCodeError{code: 1, msg: fmt.Sprintf("turnledger tenants %s: %v", sub, err)}
	}
	return nil
}
