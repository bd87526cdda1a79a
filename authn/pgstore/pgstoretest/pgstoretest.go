// Package pgstoretest gives tests a migrated PostgreSQL runtime database
// (from internal/pgtest) with the two roles of docs/runtime.md: the owner,
// who migrates and administers tenants, and a runtime role made for the test,
// without superuser or BYPASSRLS, holding only pgstore.Grants.
package pgstoretest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
