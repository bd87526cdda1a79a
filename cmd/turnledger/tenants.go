package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/turnledger/turnledger/authn"
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
		return &runtimeExit{code: 2}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, tenantsUsage)
		return nil
	}
	sub := args[0]
	fs := flag.NewFlagSet("tenants "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", "", "postgres:// URL of the schema owner, or a bbolt database file (default: DATABASE_ADMIN_URL, else DATABASE_URL, else "+defaultRuntimeDB+")")
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
		return &runtimeExit{code: 2}
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: turnledger tenants %s [flags]%s\n\nFlags:\n", sub, map[int]string{0: "", 1: " ID"}[nargs])
		fs.PrintDefaults()
	}
	// Flags may come before or after the positional argument.
	var positional []string
	rest := args[1:]
	for {
		if help, err := parseFlags(fs, rest, stdout); help || err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(positional) != nargs {
		fs.Usage()
		if nargs == 1 {
			return &runtimeExit{code: 2, msg: fmt.Sprintf("turnledger tenants %s: give exactly one tenant id or idp tenant id", sub)}
		}
		return &runtimeExit{code: 2, msg: fmt.Sprintf("turnledger tenants %s: unexpected argument %q", sub, positional[0])}
	}
	if sub == "add" && *idpTenantID == "" {
		return &runtimeExit{code: 2, msg: "turnledger tenants add: --idp-tenant-id is required"}
	}

	dbURL, name := getenv("DATABASE_ADMIN_URL"), "DATABASE_ADMIN_URL"
	if dbURL == "" {
		dbURL, name = getenv("DATABASE_URL"), "DATABASE_URL"
	}
	target, err := resolveDB(*db, dbURL, name)
	if err != nil {
		return &runtimeExit{code: 1, msg: "turnledger tenants: " + err.Error()}
	}
	// Only add writes a new tenant: every other subcommand reads or changes
	// tenants that must already be there, and never creates a store.
	if sub != "add" && target.url == "" {
		if _, err := os.Stat(target.path); errors.Is(err, os.ErrNotExist) {
			return &runtimeExit{code: 1, msg: fmt.Sprintf("turnledger tenants %s: no runtime database at %s (it is made by `turnledger runtime` or `turnledger tenants add`; choose another with --db, DATABASE_ADMIN_URL or DATABASE_URL)", sub, target.path)}
		}
	}
	store, err := openTenantAdmin(ctx, target)
	if err != nil {
		return &runtimeExit{code: 1, msg: "turnledger tenants: " + err.Error()}
	}
	defer store.Close()

	fail := func(err error) error {
		return &runtimeExit{code: 1, msg: fmt.Sprintf("turnledger tenants %s: %v", sub, err)}
	}
	switch sub {
	case "add":
		t, err := store.AddTenant(ctx, *idpTenantID, *plan, now())
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "added tenant %s (idp_tenant_id %s, plan %s, status %s)\n", t.ID, t.IDPTenantID, t.Plan, t.Status)
	case "suspend", "activate", "delete":
		status := map[string]string{"suspend": authn.StatusSuspended, "activate": authn.StatusActive, "delete": authn.StatusDeleted}[sub]
		t, err := store.SetTenantStatus(ctx, positional[0], status, now())
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "tenant %s (idp_tenant_id %s) is %s\n", t.ID, t.IDPTenantID, t.Status)
	case "list":
		ts, err := store.Tenants(ctx)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			if ts == nil {
				ts = []authn.Tenant{}
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(ts)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tIDP_TENANT_ID\tSTATUS\tPLAN\tCREATED_AT")
		for _, t := range ts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.IDPTenantID, t.Status, t.Plan, t.CreatedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	}
	return nil
}
