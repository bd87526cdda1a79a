package authn

import (
	"context"
	"time"
)

// Tenant statuses.
const (
	StatusActive    = "active"
	StatusSuspended = "suspended"
	StatusDeleted   = "deleted"
)

// Tenant is one record of the allowlist.
type Tenant struct {
	ID          string    `json:"id"`
	IDPTenantID string    `json:"idp_tenant_id"`
	Status      string    `json:"status"`
	Plan        string    `json:"plan"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Ticket is what a websocket ticket stands for, stored under the SHA-256 of
// the ticket.
type Ticket struct {
	Principal Principal `json:"principal"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Profile is a stored provider profile. APIKeyCiphertext is AES-256-GCM
// (nonce first) of the API key; the plaintext is never stored.
type Profile struct {
	Provider         string    `json:"provider"`
	BaseURL          string    `json:"base_url,omitempty"`
	Model            string    `json:"model,omitempty"`
	APIKeyCiphertext []byte    `json:"api_key_ciphertext,omitempty"`
	APIKeyHint       string    `json:"api_key_hint,omitempty"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// Store is what the service needs from its database: the allowlist lookup
// and user upsert of admission, single-use tickets, and provider profiles
// scoped to one tenant and user. Every method that reads product state takes
// the admitted tenant and user, so no call can reach another tenant's rows.
type Store interface {
	// TenantByClaim returns the tenant whose idp_tenant_id is claim, or ErrNotFound.
	TenantByClaim(ctx context.Context, claim string) (Tenant, error)
	// TenantByID returns the tenant with internal id, or ErrNotFound.
	TenantByID(ctx context.Context, id string) (Tenant, error)
	// UpsertUser creates or updates the user (tenantID, identity.UserClaim)
	// with its membership in the tenant and returns the user's internal id.
	UpsertUser(ctx context.Context, tenantID string, id Identity, now time.Time) (userID string, err error)

	// PutTicket stores t under hash.
	PutTicket(ctx context.Context, hash [32]byte, t Ticket, now time.Time) error
	// TakeTicket removes and returns the ticket under hash in one
	// transaction, or ErrNotFound; a ticket can be taken once.
	TakeTicket(ctx context.Context, hash [32]byte) (Ticket, error)

	Profiles(ctx context.Context, tenantID, userID string) ([]Profile, error)
	Profile(ctx context.Context, tenantID, userID, provider string) (Profile, error)
	PutProfile(ctx context.Context, tenantID, userID string, p Profile) error
	// DeleteProfile returns ErrNotFound when there was nothing to delete.
	DeleteProfile(ctx context.Context, tenantID, userID, provider string) error

	// Ping reports whether the store can be used (for /ready).
	Ping(ctx context.Context) error
}

// Bus carries websocket messages between runtime processes.
type Bus interface {
	Publish(ctx context.Context, subject string, data []byte) error
	// Subscribe calls fn for every message on subject until unsubscribe.
	Subscribe(subject string, fn func(data []byte)) (unsubscribe func() error, err error)
	// Ping reports whether the bus is connected (for /ready).
	Ping(ctx context.Context) error
}
