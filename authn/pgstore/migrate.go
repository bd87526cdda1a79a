package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// migration is one versioned step of the schema. Steps are never edited once
// released: a change is a new step.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations, in order. Version n is at index n-1.
var migrations = []migration{
	{1, "runtime schema with row-level security on provider profiles", `
CREATE TABLE tenants (
	id            uuid PRIMARY KEY,
	idp_tenant_id text NOT NULL UNIQUE,
	status        text NOT NULL CHECK (status IN ('active', 'suspended', 'deleted')),
	plan          text NOT NULL,
	created_at    timestamptz NOT NULL,
	updated_at    timestamptz NOT NULL
);

CREATE TABLE users (
	id         uuid PRIMARY KEY,
	tenant_id  uuid NOT NULL REFERENCES tenants (id),
	user_claim text NOT NULL,
	email      text NOT NULL DEFAULT '',
	name       text NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	UNIQUE (tenant_id, user_claim)
);

CREATE TABLE memberships (
	tenant_id  uuid NOT NULL REFERENCES tenants (id),
	user_id    uuid NOT NULL REFERENCES users (id),
	role       text NOT NULL,
	created_at timestamptz NOT NULL,
	PRIMARY KEY (tenant_id, user_id)
);

-- Tickets are found by the SHA-256 of the ticket before anyone is known, so
-- they carry no row-level policy: the hash is the capability.
CREATE TABLE ws_tickets (
	hash       bytea PRIMARY KEY CHECK (octet_length(hash) = 32),
	principal  jsonb NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX ws_tickets_expires_at ON ws_tickets (expires_at);

CREATE TABLE provider_profiles (
	tenant_id          uuid NOT NULL,
	user_id            uuid NOT NULL,
	provider           text NOT NULL,
	base_url           text NOT NULL DEFAULT '',
	model              text NOT NULL DEFAULT '',
	api_key_ciphertext bytea,
	api_key_hint       text NOT NULL DEFAULT '',
	updated_at         timestamptz NOT NULL,
	PRIMARY KEY (tenant_id, user_id, provider),
	FOREIGN KEY (tenant_id, user_id) REFERENCES memberships (tenant_id, user_id) ON DELETE CASCADE
);

-- Every row is visible and writable only under the tenant and user set for
-- the transaction (set_config(..., true)). A transaction that set nothing
-- sees NULL or '' and so matches no row. FORCE applies the policy to the
-- table's owner too; only superusers and BYPASSRLS roles escape it, and the
-- runtime refuses to run as one.
ALTER TABLE provider_profiles ENABLE ROW LEVEL SECURITY;
ALTER TABLE provider_profiles FORCE ROW LEVEL SECURITY;
CREATE POLICY provider_profiles_owner ON provider_profiles
	USING (tenant_id::text = current_setting('turnledger.tenant_id', true)
	   AND user_id::text = current_setting('turnledger.user_id', true))
	WITH CHECK (tenant_id::text = current_setting('turnledger.tenant_id', true)
	   AND user_id::text = current_setting('turnledger.user_id', true));
`},
}

// SchemaVersion is the schema version this build needs.
func SchemaVersion() int { return len(migrations) }

// migrationsTable records the applied versions.
const migrationsTable = `CREATE TABLE IF NOT EXISTS turnledger_schema_migrations (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL
)`

// migrateLock is the advisory lock key that serialises migrators.
const migrateLock = 7_140_221_001

// Migrate brings the database at url (DATABASE_ADMIN_URL: the owner of the
// schema) to SchemaVersion, applying each missing step in its own
// transaction, and returns the versions it applied. Running it again applies
// nothing; two migrators at once wait for each other.
func Migrate(ctx context.Context, url string) ([]int, error) {
	db, err := openDB(url)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return migrate(ctx, db, time.Now)
}

func migrate(ctx context.Context, db *sql.DB, now func() time.Time) ([]int, error) {
	var applied []int
	for _, m := range migrations {
		done, err := step(ctx, db, m, now)
		if err != nil {
			return applied, fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
		}
		if done {
			applied = append(applied, m.version)
		}
	}
	return applied, nil
}

func step(ctx context.Context, db *sql.DB, m migration, now func() time.Time) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, migrationsTable); err != nil {
		return false, err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM turnledger_schema_migrations WHERE version = $1`, m.version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO turnledger_schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`, m.version, m.name, now().UTC()); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// rolePattern is a role name Grant accepts (it is spliced into SQL).
var rolePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Grants are the privileges the runtime role needs, in SQL, for role.
func Grants(role string) []string {
	return []string{
		"GRANT SELECT ON turnledger_schema_migrations, tenants TO " + role,
		"GRANT SELECT, INSERT, UPDATE ON users, memberships TO " + role,
		"GRANT SELECT, INSERT, DELETE ON ws_tickets TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON provider_profiles TO " + role,
	}
}

// Grant gives role (the one DATABASE_URL logs in as) the privileges of
// Grants on the migrated schema, through the owner's url. The role must
// exist; granting twice is harmless. The grants run in one transaction
// under the migrators' advisory lock, so runtimes starting together (each
// granting through DATABASE_ADMIN_URL) and a migrator wait for each other
// instead of colliding on the catalog.
func Grant(ctx context.Context, url, role string) error {
	if !ValidRole(role) {
		return fmt.Errorf("role name %q must be lower-case letters, digits and '_'", role)
	}
	db, err := openDB(url)
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
		return err
	}
	for _, g := range Grants(role) {
		if _, err := tx.ExecContext(ctx, g); err != nil {
			return fmt.Errorf("%s: %w", g, err)
		}
	}
	return tx.Commit()
}

// ValidRole reports a role name Grant accepts: lower-case letters, digits
// and '_', as an unquoted SQL identifier names it.
func ValidRole(role string) bool { return rolePattern.MatchString(role) }

// Role returns the role the database at url logs in as (current_user).
func Role(ctx context.Context, url string) (string, error) {
	db, err := openDB(url)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var role string
	if err := db.QueryRowContext(ctx, `SELECT current_user`).Scan(&role); err != nil {
		return "", fmt.Errorf("read the database role: %w", err)
	}
	return role, nil
}

// currentVersion is the highest applied version, 0 on a fresh database.
func currentVersion(ctx context.Context, db *sql.DB) (int, error) {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('turnledger_schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(version) FROM turnledger_schema_migrations`).Scan(&v); err != nil {
		return 0, err
	}
	return int(v.Int64), nil
}

// ErrSchema is a database whose schema is not the one this build needs.
var ErrSchema = errors.New("database schema is not current")
