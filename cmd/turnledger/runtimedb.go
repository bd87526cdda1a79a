package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/turnledger/turnledger/authn/service"
)

const migrateUsage = `Usage: turnledger runtime migrate [--admin-url URL] [--grant-to ROLE]

Bring the runtime's PostgreSQL schema to this build's version, as the
schema's owner (--admin-url, default DATABASE_ADMIN_URL). Versions already
applied are skipped, so running it again is harmless. --grant-to gives the
runtime role (the one DATABASE_URL logs in as) the privileges it needs.
`

// runtimeMigrate is `turnledger runtime migrate`.
func runtimeMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("runtime migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin-url", getenv("DATABASE_ADMIN_URL"), "postgres:// URL of the schema owner (default DATABASE_ADMIN_URL)")
	grantTo := fs.String("grant-to", "", "runtime role to grant the runtime's privileges to (optional)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), migrateUsage, "\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil
		}
		return &exitCodeError{code: 2}
	}
	if fs.NArg() > 0 {
		return &exitCodeError{code: 2, msg: fmt.Sprintf("turnledger runtime migrate: unexpected argument %q", fs.Arg(0))}
	}
	if !service.IsPostgresURL(*admin) {
		return &exitCodeError{code: 2, msg: "turnledger runtime migrate: give the schema owner's postgres:// URL in DATABASE_ADMIN_URL or --admin-url (bbolt files need no migration)"}
	}
	if err := service.Migrate(ctx, *admin, *grantTo, stdout); err != nil {
		return &exitCodeError{code: 1, msg: "turnledger runtime migrate: " + err.Error()}
	}
	return nil
}
