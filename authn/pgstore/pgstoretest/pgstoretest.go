// Package pgstoretest gives tests a migrated PostgreSQL runtime database
// (from internal/pgtest) with the two roles of docs/runtime.md: the owner,
// who migrates and administers tenants, and a runtime role made for the test,
// without superuser or BYPASSRLS, holding only pgstore.Grants. In New the
// owner is the test server's superuser; NewAsDocumented follows the
// documented set-up to the letter, with an owner that is not one.
package pgstoretest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnledger/turnledger/authn/pgstore"
	"github.com/turnledger/turnledger/internal/pgtest"
)

// DB is a test database.
type DB struct {
	AdminURL   string // the owner (DATABASE_ADMIN_URL)
	RuntimeURL string // the runtime role (DATABASE_URL)
	Role       string // the runtime role's name
}

// New makes a fresh database, migrates it as the owner, and creates a runtime
// role with its grants; both are dropped when t ends.
func New(t testing.TB) DB {
	t.Helper()
	db := NewUnmigrated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pgstore.Migrate(ctx, db.AdminURL); err != nil {
		t.Fatalf("pgstoretest: migrate: %v", err)
	}
	if err := pgstore.Grant(ctx, db.AdminURL, db.Role); err != nil {
		t.Fatalf("pgstoretest: grant: %v", err)
	}
	return db
}

// NewUnmigrated is New without the migration and the grants.
func NewUnmigrated(t testing.TB) DB {
	t.Helper()
	admin := pgtest.New(t)
	var b [6]byte
	rand.Read(b[:])
	role := "tl_runtime_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgstoretest: connect: %v", err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE ROLE "+role+" LOGIN NOSUPERUSER NOBYPASSRLS"); err != nil {
		t.Fatalf("pgstoretest: create role: %v", err)
	}
	// Registered after pgtest's drop of the database, so it runs first:
	// forget the role's grants in this database, then drop it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("pgstoretest: drop role %s: %v", role, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP OWNED BY "+role); err != nil {
			t.Errorf("pgstoretest: drop owned by %s: %v", role, err)
		}
		// Connections of the role may still be closing; the database drop
		// that follows forces them out, and the role goes with a retry.
		if _, err := c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role); err != nil {
			t.Errorf("pgstoretest: terminate %s: %v", role, err)
		}
		if _, err := c.Exec(ctx, "DROP ROLE "+role); err != nil {
			t.Errorf("pgstoretest: drop role %s: %v", role, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("pgstoretest: %v", err)
	}
	u.User = url.User(role)
	return DB{AdminURL: admin, RuntimeURL: u.String(), Role: role}
}

// NewAsDocumented makes a fresh database set up as docs/runtime.md tells an
// operator to, as a superuser: an owner role without superuser (or any
// other attribute) that owns the database, and a runtime role with neither
// superuser nor BYPASSRLS, both logging in with a password. Nothing is
// migrated or granted. The database and both roles are dropped when t
// ends.
func NewAsDocumented(t testing.TB) DB {
	t.Helper()
	super := pgtest.New(t) // a superuser's connection, to make the roles and database
	var b [6]byte
	rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	owner, runtime, name := "tl_owner_"+suffix, "tl_runtime_"+suffix, "tl_docs_"+suffix
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exec := func(stmts ...string) error {
		c, err := pgx.Connect(ctx, super)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		for _, s := range stmts {
			if _, err := c.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	}
	// Registered after pgtest's cleanup, so it runs first, while the
	// superuser's database is still there: the database goes, then the
	// roles that owned it or were granted things in it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, super)
		if err != nil {
			t.Errorf("pgstoretest: clean up %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		for _, s := range []string{
			"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)",
			"DROP ROLE IF EXISTS " + runtime,
			"DROP ROLE IF EXISTS " + owner,
		} {
			if _, err := c.Exec(ctx, s); err != nil {
				t.Errorf("pgstoretest: %s: %v", s, err)
			}
		}
	})
	// The statements of docs/runtime.md, "Set-up, once, as a superuser".
	if err := exec(
		"CREATE ROLE "+owner+" LOGIN PASSWORD 'owner-secret'",
		"CREATE ROLE "+runtime+" LOGIN PASSWORD 'runtime-secret' NOSUPERUSER NOBYPASSRLS",
		"CREATE DATABASE "+name+" OWNER "+owner,
	); err != nil {
		t.Fatalf("pgstoretest: set up as documented: %v", err)
	}
	u, err := url.Parse(super)
	if err != nil {
		t.Fatalf("pgstoretest: %v", err)
	}
	u.Path = "/" + name
	admin, rt := *u, *u
	admin.User = url.UserPassword(owner, "owner-secret")
	rt.User = url.UserPassword(runtime, "runtime-secret")
	return DB{AdminURL: admin.String(), RuntimeURL: rt.String(), Role: runtime}
}
