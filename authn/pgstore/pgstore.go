// Package pgstore is the PostgreSQL implementation of authn.Store, plus the
// administrative operations on the tenant allowlist that `turnledger
// tenants` uses and the versioned schema migrations.
//
// Two roles use the database. The owner of the schema (DATABASE_ADMIN_URL)
// runs Migrate and administers tenants. The runtime (DATABASE_URL, through a
// database/sql pool) logs in as a role that is neither superuser nor
// BYPASSRLS, with only the privileges of Grants; Open refuses any other.
//
// Provider profiles carry row-level security: every profile statement runs in
// a transaction that first sets turnledger.tenant_id and turnledger.user_id
// with set_config(..., true) (local to the transaction, so a pooled
// connection never carries one user's context into another's), and the
// table's policy shows and accepts only rows of that tenant and user. A
// transaction that sets nothing sees nothing. The statements name the tenant
// and user as well; the policy is what holds should one of them forget.
//
// Ticket redemption is one DELETE … RETURNING: of any number of concurrent
// redeemers, on any number of runtime processes, exactly one gets the row.
package pgstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/turnledger/turnledger/authn"
)

// ErrPrivileged is a runtime role that would escape row-level security.
var ErrPrivileged = errors.New("the database role bypasses row-level security")

// Options configure Open.
type Options struct {
	Rand io.Reader // source of UUIDs; default crypto/rand
	// Admin opens the store for administration (`turnledger tenants`) with
	// the owner's URL: the role check is skipped.
	Admin bool
	// MaxConns bounds the pool; default 10.
	MaxConns int
}

// Store is a PostgreSQL database holding the allowlist, users, tickets and
// profiles.
type Store struct {
	db   *sql.DB
	rand io.Reader
}

var _ authn.Store = (*Store)(nil)

func openDB(url string) (*sql.DB, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	return db, nil
}

// Open connects to the database at url and checks that its schema is the
// one this build needs (else an error wrapping ErrSchema that names the
// command to run) and, unless o.Admin, that the role is neither superuser
// nor BYPASSRLS (else ErrPrivileged).
func Open(ctx context.Context, url string, o Options) (*Store, error) {
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.MaxConns == 0 {
		o.MaxConns = 10
	}
	db, err := openDB(url)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(o.MaxConns)
	db.SetMaxIdleConns(o.MaxConns)
	fail := func(err error) (*Store, error) {
		db.Close()
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("connect to PostgreSQL: %w", err))
	}
	if !o.Admin {
		var role string
		var privileged bool
		if err := db.QueryRowContext(ctx, `SELECT rolname, rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user`).Scan(&role, &privileged); err != nil {
			return fail(fmt.Errorf("read the database role: %w", err))
		}
		if privileged {
			return fail(fmt.Errorf("role %q is a superuser or has BYPASSRLS, so row-level security would not hold: give DATABASE_URL a runtime role without them (docs/runtime.md): %w", role, ErrPrivileged))
		}
	}
	v, err := currentVersion(ctx, db)
	if err != nil {
		return fail(fmt.Errorf("read the schema version: %w", err))
	}
	if v != SchemaVersion() {
		return fail(fmt.Errorf("database schema is at version %d, this build needs %d: run `turnledger runtime migrate` with DATABASE_ADMIN_URL set to the schema owner: %w", v, SchemaVersion(), ErrSchema))
	}
	return &Store{db: db, rand: o.Rand}, nil
}

// Close closes the pool.
func (s *Store) Close() error { return s.db.Close() }

// Ping implements authn.Store.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

const tenantColumns = `id::text, idp_tenant_id, status, plan, created_at, updated_at`

type scanner interface{ Scan(dest ...any) error }

func scanTenant(r scanner) (authn.Tenant, error) {
	var t authn.Tenant
	err := r.Scan(&t.ID, &t.IDPTenantID, &t.Status, &t.Plan, &t.CreatedAt, &t.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return t, authn.ErrNotFound
	}
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return t, err
}

// TenantByClaim implements authn.Store.
func (s *Store) TenantByClaim(ctx context.Context, claim string) (authn.Tenant, error) {
	return scanTenant(s.db.QueryRowContext(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE idp_tenant_id = $1`, claim))
}

// TenantByID implements authn.Store.
func (s *Store) TenantByID(ctx context.Context, id string) (authn.Tenant, error) {
	if !authn.IsUUID(id) {
		return authn.Tenant{}, authn.ErrNotFound
	}
	return scanTenant(s.db.QueryRowContext(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1::uuid`, id))
}

// UpsertUser implements authn.Store. A user is keyed by its tenant and
// external user claim; email and name follow the latest login. Most logins
// change nothing and are answered by one read.
func (s *Store) UpsertUser(ctx context.Context, tenantID string, id authn.Identity, now time.Time) (string, error) {
	var uid, email, name string
	err := s.db.QueryRowContext(ctx, `SELECT id::text, email, name FROM users WHERE tenant_id = $1::uuid AND user_claim = $2`, tenantID, id.UserClaim).Scan(&uid, &email, &name)
	switch {
	case err == nil && email == id.Email && name == id.Name:
		return uid, nil
	case err == nil:
	case errors.Is(err, sql.ErrNoRows):
		if uid, err = authn.NewUUID(s.rand); err != nil {
			return "", err
		}
	default:
		return "", err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	now = now.UTC()
	// Two first logins at once: the loser's insert becomes an update and
	// both get the winner's id.
	err = tx.QueryRowContext(ctx, `INSERT INTO users (id, tenant_id, user_claim, email, name, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6)
		ON CONFLICT (tenant_id, user_claim) DO UPDATE SET email = EXCLUDED.email, name = EXCLUDED.name, updated_at = EXCLUDED.updated_at
		RETURNING id::text`, uid, tenantID, id.UserClaim, id.Email, id.Name, now).Scan(&uid)
	if err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO memberships (tenant_id, user_id, role, created_at) VALUES ($1, $2, 'member', $3) ON CONFLICT DO NOTHING`, tenantID, uid, now); err != nil {
		return "", err
	}
	return uid, tx.Commit()
}

// PutTicket implements authn.Store; it also drops expired tickets.
func (s *Store) PutTicket(ctx context.Context, hash [32]byte, t authn.Ticket, now time.Time) error {
	p, err := json.Marshal(t.Principal)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM ws_tickets WHERE expires_at <= $1`, now.UTC()); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ws_tickets (hash, principal, expires_at) VALUES ($1, $2, $3)`, hash[:], string(p), t.ExpiresAt.UTC()); err != nil {
		return err
	}
	return tx.Commit()
}

// TakeTicket implements authn.Store: one DELETE … RETURNING, so a ticket is
// taken once however many processes race for it.
func (s *Store) TakeTicket(ctx context.Context, hash [32]byte) (authn.Ticket, error) {
	return scanTicket(s.db.QueryRowContext(ctx, `DELETE FROM ws_tickets WHERE hash = $1 RETURNING principal::text, expires_at`, hash[:]))
}

// PeekTicket returns the ticket under hash without taking it, or
// authn.ErrNotFound. The websocket route looks a ticket up with it first and
// takes it (TakeTicket) only once the dial has passed every other check.
func (s *Store) PeekTicket(ctx context.Context, hash [32]byte) (authn.Ticket, error) {
	return scanTicket(s.db.QueryRowContext(ctx, `SELECT principal::text, expires_at FROM ws_tickets WHERE hash = $1`, hash[:]))
}

// scanTicket reads a ticket row (principal, expires_at).
func scanTicket(row *sql.Row) (authn.Ticket, error) {
	var t authn.Ticket
	var p []byte
	err := row.Scan(&p, &t.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return t, authn.ErrNotFound
	}
	if err != nil {
		return t, err
	}
	t.ExpiresAt = t.ExpiresAt.UTC()
	if err := json.Unmarshal(p, &t.Principal); err != nil {
		return t, fmt.Errorf("corrupt ticket: %w", err)
	}
	return t, nil
}

// asUser runs fn in a transaction whose row-level security context is the
// tenant and user. Ids that are not UUIDs have no rows.
func (s *Store) asUser(ctx context.Context, tenantID, userID string, fn func(tx *sql.Tx) error) error {
	if !authn.IsUUID(tenantID) || !authn.IsUUID(userID) {
		return authn.ErrNotFound
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT set_config('turnledger.tenant_id', $1, true), set_config('turnledger.user_id', $2, true)`, tenantID, userID); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

const profileColumns = `provider, base_url, model, api_key_ciphertext, api_key_hint, updated_at`

func scanProfile(r scanner) (authn.Profile, error) {
	var p authn.Profile
	err := r.Scan(&p.Provider, &p.BaseURL, &p.Model, &p.APIKeyCiphertext, &p.APIKeyHint, &p.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return p, authn.ErrNotFound
	}
	p.UpdatedAt = p.UpdatedAt.UTC()
	if len(p.APIKeyCiphertext) == 0 {
		p.APIKeyCiphertext = nil
	}
	return p, err
}

// Profiles implements authn.Store.
func (s *Store) Profiles(ctx context.Context, tenantID, userID string) ([]authn.Profile, error) {
	if !authn.IsUUID(tenantID) || !authn.IsUUID(userID) {
		return nil, nil
	}
	var out []authn.Profile
	err := s.asUser(ctx, tenantID, userID, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+profileColumns+` FROM provider_profiles WHERE tenant_id = $1::uuid AND user_id = $2::uuid ORDER BY provider`, tenantID, userID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			p, err := scanProfile(rows)
			if err != nil {
				return err
			}
			out = append(out, p)
		}
		return rows.Err()
	})
	return out, err
}

// Profile implements authn.Store.
func (s *Store) Profile(ctx context.Context, tenantID, userID, provider string) (authn.Profile, error) {
	var p authn.Profile
	err := s.asUser(ctx, tenantID, userID, func(tx *sql.Tx) error {
		var err error
		p, err = scanProfile(tx.QueryRowContext(ctx, `SELECT `+profileColumns+` FROM provider_profiles WHERE tenant_id = $1::uuid AND user_id = $2::uuid AND provider = $3`, tenantID, userID, provider))
		return err
	})
	return p, err
}

// PutProfile implements authn.Store.
func (s *Store) PutProfile(ctx context.Context, tenantID, userID string, p authn.Profile) error {
	return s.asUser(ctx, tenantID, userID, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO provider_profiles (tenant_id, user_id, `+profileColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (tenant_id, user_id, provider) DO UPDATE SET base_url = EXCLUDED.base_url, model = EXCLUDED.model,
				api_key_ciphertext = EXCLUDED.api_key_ciphertext, api_key_hint = EXCLUDED.api_key_hint, updated_at = EXCLUDED.updated_at`,
			tenantID, userID, p.Provider, p.BaseURL, p.Model, p.APIKeyCiphertext, p.APIKeyHint, p.UpdatedAt.UTC())
		return err
	})
}

// DeleteProfile implements authn.Store.
func (s *Store) DeleteProfile(ctx context.Context, tenantID, userID, provider string) error {
	return s.asUser(ctx, tenantID, userID, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM provider_profiles WHERE tenant_id = $1::uuid AND user_id = $2::uuid AND provider = $3`, tenantID, userID, provider)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return authn.ErrNotFound
		}
		return nil
	})
}

// AddTenant inserts an active tenant for idpTenantID. An idp_tenant_id can
// be on the allowlist once.
func (s *Store) AddTenant(ctx context.Context, idpTenantID, plan string, now time.Time) (authn.Tenant, error) {
	if err := authn.CheckNewTenant(idpTenantID, plan); err != nil {
		return authn.Tenant{}, err
	}
	id, err := authn.NewUUID(s.rand)
	if err != nil {
		return authn.Tenant{}, err
	}
	now = now.UTC()
	t, err := scanTenant(s.db.QueryRowContext(ctx, `INSERT INTO tenants (id, idp_tenant_id, status, plan, created_at, updated_at)
		VALUES ($1, $2, 'active', $3, $4, $4) ON CONFLICT (idp_tenant_id) DO NOTHING RETURNING `+tenantColumns, id, idpTenantID, plan, now))
	if errors.Is(err, authn.ErrNotFound) {
		old, err := s.TenantByClaim(ctx, idpTenantID)
		if err != nil {
			return authn.Tenant{}, err
		}
		return authn.Tenant{}, fmt.Errorf("tenant with idp tenant id %s %w (id %s)", idpTenantID, authn.ErrExists, old.ID)
	}
	return t, err
}

// SetTenantStatus moves the tenant named by ref (its id or its
// idp_tenant_id) to status, under authn.CheckTransition. Setting the
// current status again is a no-op.
func (s *Store) SetTenantStatus(ctx context.Context, ref, status string, now time.Time) (authn.Tenant, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return authn.Tenant{}, err
	}
	defer tx.Rollback()
	t, err := scanTenant(tx.QueryRowContext(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id::text = $1 OR idp_tenant_id = $1 ORDER BY id::text = $1 DESC LIMIT 1 FOR UPDATE`, ref))
	if errors.Is(err, authn.ErrNotFound) {
		return t, fmt.Errorf("tenant %q: %w", ref, authn.ErrNotFound)
	}
	if err != nil {
		return t, err
	}
	if t.Status == status {
		return t, nil
	}
	if err := authn.CheckTransition(t.ID, t.Status, status); err != nil {
		return t, err
	}
	t, err = scanTenant(tx.QueryRowContext(ctx, `UPDATE tenants SET status = $2, updated_at = $3 WHERE id = $1 RETURNING `+tenantColumns, t.ID, status, now.UTC()))
	if err != nil {
		return t, err
	}
	return t, tx.Commit()
}

// Tenants lists every tenant, ordered by idp_tenant_id.
func (s *Store) Tenants(ctx context.Context) ([]authn.Tenant, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tenantColumns+` FROM tenants ORDER BY idp_tenant_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []authn.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
