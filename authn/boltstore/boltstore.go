// Package boltstore is the embedded (bbolt) implementation of authn.Store,
// plus the administrative operations on the tenant allowlist that the
// `turnledger tenants` command uses.
//
// Buckets: tenants (id → JSON), tenant_claims (idp_tenant_id → id), users
// (tenant_id NUL user_claim → JSON), memberships (tenant_id NUL user_id →
// JSON), tickets (SHA-256 of the ticket → JSON) and profiles (tenant_id NUL
// user_id NUL provider → JSON). Every profile key starts with the tenant and
// user, and every profile method takes both: that is the row-level scoping.
package boltstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/turnledger/turnledger/authn"
	bolt "go.etcd.io/bbolt"
)

var (
	bTenants     = []byte("tenants")
	bClaims      = []byte("tenant_claims")
	bUsers       = []byte("users")
	bMemberships = []byte("memberships")
	bTickets     = []byte("tickets")
	bProfiles    = []byte("profiles")
)

// ErrTransition is a tenant status change that is not allowed.
var ErrTransition = authn.ErrTransition

// Options configure Open.
type Options struct {
	Rand    io.Reader     // source of UUIDs; default crypto/rand
	Timeout time.Duration // wait for the file lock; default 2 s
}

// Store is a bbolt file holding the allowlist, users, tickets and profiles.
type Store struct {
	db   *bolt.DB
	rand io.Reader
}

var _ authn.Store = (*Store)(nil)

// Open opens (creating it and its directory if needed) the bbolt file at path.
func Open(path string, o Options) (*Store, error) {
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create database directory: %w", err)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.Timeout})
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bTenants, bClaims, bUsers, bMemberships, bTickets, bProfiles} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare database %s: %w", path, err)
	}
	return &Store{db: db, rand: o.Rand}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Ping reports whether the database is open.
func (s *Store) Ping(ctx context.Context) error {
	return s.db.View(func(tx *bolt.Tx) error { return nil })
}

func key(parts ...string) []byte { return []byte(joinNUL(parts)) }

func joinNUL(parts []string) string {
	var b bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(p)
	}
	return b.String()
}

func get[T any](b *bolt.Bucket, k []byte) (T, error) {
	var v T
	raw := b.Get(k)
	if raw == nil {
		return v, authn.ErrNotFound
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("corrupt record %q: %w", k, err)
	}
	return v, nil
}

func put(b *bolt.Bucket, k []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, raw)
}

// TenantByClaim implements authn.Store.
func (s *Store) TenantByClaim(ctx context.Context, claim string) (authn.Tenant, error) {
	var t authn.Tenant
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bClaims).Get([]byte(claim))
		if id == nil {
			return authn.ErrNotFound
		}
		var err error
		t, err = get[authn.Tenant](tx.Bucket(bTenants), id)
		return err
	})
	return t, err
}

// TenantByID implements authn.Store.
func (s *Store) TenantByID(ctx context.Context, id string) (authn.Tenant, error) {
	var t authn.Tenant
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		t, err = get[authn.Tenant](tx.Bucket(bTenants), []byte(id))
		return err
	})
	return t, err
}

type user struct {
	ID        string    `json:"id"`
	TenantID  string    `json:"tenant_id"`
	UserClaim string    `json:"user_claim"`
	Email     string    `json:"email,omitempty"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

type membership struct {
	TenantID  string    `json:"tenant_id"`
	UserID    string    `json:"user_id"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// UpsertUser implements authn.Store. A user is keyed by its tenant and
// external user claim; email and name follow the latest login.
func (s *Store) UpsertUser(ctx context.Context, tenantID string, id authn.Identity, now time.Time) (string, error) {
	var uid string
	// Most logins change nothing: answer those from a read transaction, as a
	// write transaction costs an fsync.
	err := s.db.View(func(tx *bolt.Tx) error {
		u, err := get[user](tx.Bucket(bUsers), key(tenantID, id.UserClaim))
		if err == nil && u.Email == id.Email && u.Name == id.Name {
			uid = u.ID
		}
		return nil
	})
	if err != nil || uid != "" {
		return uid, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		users := tx.Bucket(bUsers)
		k := key(tenantID, id.UserClaim)
		u, err := get[user](users, k)
		switch {
		case errors.Is(err, authn.ErrNotFound):
			newID, err := authn.NewUUID(s.rand)
			if err != nil {
				return err
			}
			u = user{ID: newID, TenantID: tenantID, UserClaim: id.UserClaim, CreatedAt: now.UTC()}
		case err != nil:
			return err
		case u.Email == id.Email && u.Name == id.Name:
			uid = u.ID
			return nil // nothing changed; membership exists
		}
		u.Email, u.Name, u.UpdatedAt = id.Email, id.Name, now.UTC()
		if err := put(users, k, u); err != nil {
			return err
		}
		ms := tx.Bucket(bMemberships)
		mk := key(tenantID, u.ID)
		if ms.Get(mk) == nil {
			if err := put(ms, mk, membership{TenantID: tenantID, UserID: u.ID, Role: "member", CreatedAt: now.UTC()}); err != nil {
				return err
			}
		}
		uid = u.ID
		return nil
	})
	return uid, err
}

// PutTicket implements authn.Store; it also drops expired tickets.
func (s *Store) PutTicket(ctx context.Context, hash [32]byte, t authn.Ticket, now time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bTickets)
		var expired [][]byte
		err := b.ForEach(func(k, v []byte) error {
			var old authn.Ticket
			if json.Unmarshal(v, &old) != nil || !now.Before(old.ExpiresAt) {
				expired = append(expired, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range expired {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return put(b, hash[:], t)
	})
}

// TakeTicket implements authn.Store.
func (s *Store) TakeTicket(ctx context.Context, hash [32]byte) (authn.Ticket, error) {
	var t authn.Ticket
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bTickets)
		var err error
		if t, err = get[authn.Ticket](b, hash[:]); err != nil {
			return err
		}
		return b.Delete(hash[:])
	})
	return t, err
}

// Profiles implements authn.Store.
func (s *Store) Profiles(ctx context.Context, tenantID, userID string) ([]authn.Profile, error) {
	var out []authn.Profile
	prefix := append(key(tenantID, userID), 0)
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bProfiles).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var p authn.Profile
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("corrupt profile %q: %w", k, err)
			}
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// Profile implements authn.Store.
func (s *Store) Profile(ctx context.Context, tenantID, userID, provider string) (authn.Profile, error) {
	var p authn.Profile
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		p, err = get[authn.Profile](tx.Bucket(bProfiles), key(tenantID, userID, provider))
		return err
	})
	return p, err
}

// PutProfile implements authn.Store.
func (s *Store) PutProfile(ctx context.Context, tenantID, userID string, p authn.Profile) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return put(tx.Bucket(bProfiles), key(tenantID, userID, p.Provider), p)
	})
}

// DeleteProfile implements authn.Store.
func (s *Store) DeleteProfile(ctx context.Context, tenantID, userID, provider string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bProfiles)
		k := key(tenantID, userID, provider)
		if b.Get(k) == nil {
			return authn.ErrNotFound
		}
		return b.Delete(k)
	})
}

// AddTenant inserts an active tenant for idpTenantID. An idp_tenant_id can
// be on the allowlist once.
func (s *Store) AddTenant(ctx context.Context, idpTenantID, plan string, now time.Time) (authn.Tenant, error) {
	if err := authn.CheckNewTenant(idpTenantID, plan); err != nil {
		return authn.Tenant{}, err
	}
	var t authn.Tenant
	err := s.db.Update(func(tx *bolt.Tx) error {
		claims := tx.Bucket(bClaims)
		if id := claims.Get([]byte(idpTenantID)); id != nil {
			return fmt.Errorf("tenant with idp tenant id %s %w (id %s)", idpTenantID, authn.ErrExists, id)
		}
		id, err := authn.NewUUID(s.rand)
		if err != nil {
			return err
		}
		t = authn.Tenant{ID: id, IDPTenantID: idpTenantID, Status: authn.StatusActive, Plan: plan, CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
		if err := put(tx.Bucket(bTenants), []byte(id), t); err != nil {
			return err
		}
		return claims.Put([]byte(idpTenantID), []byte(id))
	})
	return t, err
}

// SetTenantStatus moves the tenant named by ref (its id or its
// idp_tenant_id) to status. Allowed: active ⇄ suspended, active or
// suspended → deleted; deleted is final. Setting the current status again is
// a no-op.
func (s *Store) SetTenantStatus(ctx context.Context, ref, status string, now time.Time) (authn.Tenant, error) {
	var t authn.Tenant
	err := s.db.Update(func(tx *bolt.Tx) error {
		tenants := tx.Bucket(bTenants)
		id := []byte(ref)
		if tenants.Get(id) == nil {
			if id = tx.Bucket(bClaims).Get([]byte(ref)); id == nil {
				return fmt.Errorf("tenant %q: %w", ref, authn.ErrNotFound)
			}
		}
		var err error
		if t, err = get[authn.Tenant](tenants, id); err != nil {
			return err
		}
		if t.Status == status {
			return nil
		}
		if err := authn.CheckTransition(t.ID, t.Status, status); err != nil {
			return err
		}
		t.Status, t.UpdatedAt = status, now.UTC()
		return put(tenants, id, t)
	})
	return t, err
}

// Tenants lists every tenant, ordered by idp_tenant_id.
func (s *Store) Tenants(ctx context.Context) ([]authn.Tenant, error) {
	var out []authn.Tenant
	err := s.db.View(func(tx *bolt.Tx) error {
		tenants := tx.Bucket(bTenants)
		return tx.Bucket(bClaims).ForEach(func(_, id []byte) error {
			t, err := get[authn.Tenant](tenants, id)
			if err != nil {
				return err
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// View calls fn with the path of the database file.
func (s *Store) View(fn func(path string)) { fn(s.db.Path()) }

// PeekTicket returns the ticket under hash without taking it, or
// authn.ErrNotFound. The websocket route looks a ticket up with it first
// and takes it (TakeTicket) only once the dial has passed every other check.
func (s *Store) PeekTicket(ctx context.Context, hash [32]byte) (authn.Ticket, error) {
	var t authn.Ticket
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		t, err = get[authn.Ticket](tx.Bucket(bTickets), hash[:])
		return err
	})
	return t, err
}
