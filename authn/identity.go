package authn

import (
	"context"
	"crypto/sha1"
	"fmt"
	"io"
	"regexp"
)

// Identity is the normalised identity every mode produces.
type Identity struct {
	TenantClaim string `json:"tenant_claim"`
	UserClaim   string `json:"user_claim"`
	Email       string `json:"email,omitempty"`
	Name        string `json:"name,omitempty"`
}

// Principal is an identity resolved to internal identifiers: the body of
// GET /api/v1/auth/me.
type Principal struct {
	Identity
	TenantID string `json:"tenant_id"`
	UserID   string `json:"user_id"`
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal of ctx; ok is false when there is none,
// which callers must treat as an error, never as a default identity.
func PrincipalFrom(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// tenantClaimPattern is what a tid (and HOSTED_TENANT_CLAIM) may look like.
// It is substituted into the issuer URL template, so it must not be able to
// change the URL's shape: no '/', '?', '#', '@', ':', '.', '%', whitespace or
// anything else outside letters, digits and inner hyphens. Real tenant ids
// (GUIDs) fit easily in 64 characters.
var tenantClaimPattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?$`)

func validTenantClaim(s string) bool { return tenantClaimPattern.MatchString(s) }

// userClaimMax bounds oid/sub and debug user ids; any printable text is fine.
const userClaimMax = 256

func validUserClaim(s string) bool {
	if s == "" || len(s) > userClaimMax {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// sessionIDPattern: session ids become one NATS subject token.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// devNamespace is the UUID namespace of dev-mode ids.
var devNamespace = [16]byte{0x6f, 0x1d, 0x2a, 0x51, 0x7c, 0x3e, 0x4b, 0x8f, 0x9a, 0x10, 0x2c, 0x5d, 0x6e, 0x7f, 0x80, 0x91}

// devUUID is the name-based (version 5) UUID of name: in dev mode there is
// no admission, so tenant_id and user_id are derived from the claims.
func devUUID(name string) string {
	h := sha1.New()
	h.Write(devNamespace[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = (u[6] & 0x0f) | 0x50
	u[8] = (u[8] & 0x3f) | 0x80
	return formatUUID(u)
}

// NewUUID draws a random (version 4) UUID from r.
func NewUUID(r io.Reader) (string, error) {
	var u [16]byte
	if _, err := io.ReadFull(r, u[:]); err != nil {
		return "", fmt.Errorf("draw uuid: %w", err)
	}
	u[6] = (u[6] & 0x0f) | 0x40
	u[8] = (u[8] & 0x3f) | 0x80
	return formatUUID(u), nil
}

func formatUUID(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// IsUUID reports whether s is a lower-case UUID as this package writes them.
func IsUUID(s string) bool { return uuidPattern.MatchString(s) }
