package authn

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Authenticator turns requests into admitted principals.
type Authenticator struct {
	cfg   Config
	v     *verifier
	store Store // nil when the database could not be opened (dev only)
	now   func() time.Time
	rand  io.Reader
}

// NewAuthenticator builds the authenticator of cfg's mode. It does not call
// cfg.Validate: a missing JWKS URL, for one, is answered with 503 per request.
func NewAuthenticator(cfg Config, store Store, now func() time.Time, rnd io.Reader, client *http.Client) *Authenticator {
	if now == nil {
		now = time.Now
	}
	if client == nil {
		client = &http.Client{Timeout: cfg.KeyFetchTimeout}
	}
	v := &verifier{cfg: cfg, now: now}
	switch cfg.Mode {
	case ModeIDP:
		v.keys = NewKeySet(KeySetConfig{URL: cfg.IDPJWKSURL, Type: KeyRSA, Client: client, Now: now, TTL: cfg.KeyCacheTTL, RefetchEvery: cfg.KeyRefetchEvery})
	case ModeHosted:
		u := ""
		if cfg.HostedAuthURL != "" {
			u = hostedJWKSURL(cfg.HostedAuthURL)
		}
		v.keys = NewKeySet(KeySetConfig{URL: u, Type: KeyEd25519, Client: client, Now: now, TTL: cfg.KeyCacheTTL, RefetchEvery: cfg.KeyRefetchEvery})
	}
	return &Authenticator{cfg: cfg, v: v, store: store, now: now, rand: rnd}
}

// bearer returns the token of an Authorization header, "" when absent.
func bearer(r *http.Request) (string, bool, *Error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false, nil
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", true, unauthorized("Authorization header must be \"Bearer <token>\"")
	}
	return strings.TrimSpace(tok), true, nil
}

// anonymous is dev mode's fallback identity when AUTH_REQUIRED=false.
var anonymous = Identity{TenantClaim: "default", UserClaim: "anonymous"}

// Authenticate authenticates an HTTP request by its headers.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	ctx := r.Context()
	var (
		id  Identity
		err error
	)
	switch a.cfg.Mode {
	case ModeDev:
		id, err = a.devHeaders(r)
	default:
		tok, present, e := bearer(r)
		switch {
		case e != nil:
			err = e
		case !present:
			err = unauthorized("missing bearer token")
		default:
			id, err = a.v.verify(ctx, tok)
		}
	}
	if err != nil {
		return a.fallback(err)
	}
	return a.admit(ctx, id)
}

// fallback applies dev mode's anonymous identity when authentication is not required.
func (a *Authenticator) fallback(err error) (Principal, error) {
	if a.cfg.Mode == ModeDev && !a.cfg.AuthRequired && KindOf(err) == KindUnauthorized {
		return devPrincipal(anonymous), nil
	}
	return Principal{}, err
}

func (a *Authenticator) devHeaders(r *http.Request) (Identity, error) {
	tenant, user := r.Header.Get("X-Debug-Tenant-Id"), r.Header.Get("X-Debug-User-Id")
	if tenant != "" || user != "" {
		if !a.cfg.AllowDebugAuth {
			return Identity{}, unauthorized("debug authentication headers are not accepted (ALLOW_DEBUG_AUTH=false)")
		}
		return debugIdentity(tenant, user, r.Header.Get("X-Debug-Email"), r.Header.Get("X-Debug-Name"))
	}
	tok, present, e := bearer(r)
	if e != nil {
		return Identity{}, e
	}
	if !present {
		return Identity{}, unauthorized("missing bearer token")
	}
	return a.v.verify(r.Context(), tok)
}

func debugIdentity(tenant, user, email, name string) (Identity, error) {
	if !validTenantClaim(tenant) {
		return Identity{}, unauthorized("debug tenant id must be 1 to 64 letters, digits or inner hyphens")
	}
	if !validUserClaim(user) {
		return Identity{}, unauthorized("debug user id must be 1 to 256 printable characters")
	}
	return Identity{TenantClaim: tenant, UserClaim: user, Email: email, Name: name}, nil
}

func devPrincipal(id Identity) Principal {
	return Principal{
		Identity: id,
		TenantID: devUUID("tenant\x00" + id.TenantClaim),
		UserID:   devUUID("user\x00" + id.TenantClaim + "\x00" + id.UserClaim),
	}
}

// admit resolves id to internal ids: in dev mode by derivation, otherwise
// through the allowlist and a user upsert.
func (a *Authenticator) admit(ctx context.Context, id Identity) (Principal, error) {
	if a.cfg.Mode == ModeDev {
		return devPrincipal(id), nil
	}
	if a.store == nil {
		return Principal{}, errf(KindUnavailable, "the admission database is unavailable")
	}
	t, err := a.store.TenantByClaim(ctx, id.TenantClaim)
	if errors.Is(err, ErrNotFound) {
		return Principal{}, errf(KindForbidden, MsgNotAllowlisted)
	}
	if err != nil {
		return Principal{}, &Error{Kind: KindUnavailable, Message: "the admission database is unavailable", Err: err}
	}
	if e := statusError(t.Status); e != nil {
		return Principal{}, e
	}
	uid, err := a.store.UpsertUser(ctx, t.ID, id, a.now())
	if err != nil {
		return Principal{}, &Error{Kind: KindUnavailable, Message: "the admission database is unavailable", Err: err}
	}
	return Principal{Identity: id, TenantID: t.ID, UserID: uid}, nil
}

func statusError(status string) *Error {
	switch status {
	case StatusActive:
		return nil
	case StatusSuspended:
		return errf(KindForbidden, MsgSuspended)
	case StatusDeleted:
		return errf(KindForbidden, MsgRemoved)
	default:
		return errf(KindForbidden, MsgNotAllowlisted)
	}
}

// CheckHostedTenant is the startup guardrail that HOSTED_TENANT_CLAIM names
// an admitted (present and active) tenant.
func CheckHostedTenant(ctx context.Context, cfg Config, store Store) error {
	if cfg.Mode != ModeHosted {
		return nil
	}
	t, err := store.TenantByClaim(ctx, cfg.HostedTenantClaim)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("HOSTED_TENANT_CLAIM %q must match an admitted tenant record; add it with `turnledger tenants add --idp-tenant-id %s`", cfg.HostedTenantClaim, cfg.HostedTenantClaim)
	}
	if err != nil {
		return fmt.Errorf("HOSTED_TENANT_CLAIM cannot be checked: %w", err)
	}
	if t.Status != StatusActive {
		return fmt.Errorf("HOSTED_TENANT_CLAIM %q must match an admitted tenant record, but tenant %s is %s", cfg.HostedTenantClaim, t.ID, t.Status)
	}
	return nil
}

// IssueTicket stores a new single-use websocket ticket for p and returns it
// with its expiry. Only the SHA-256 of the ticket is stored.
func (a *Authenticator) IssueTicket(ctx context.Context, p Principal) (string, time.Time, error) {
	if a.store == nil {
		return "", time.Time{}, errf(KindUnavailable, "the ticket database is unavailable")
	}
	var raw [32]byte
	if _, err := io.ReadFull(a.rand, raw[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("draw ticket: %w", err)
	}
	ticket := "wst_" + base64.RawURLEncoding.EncodeToString(raw[:])
	now := a.now().UTC()
	exp := now.Add(a.cfg.TicketTTL).Truncate(time.Second)
	if err := a.store.PutTicket(ctx, sha256.Sum256([]byte(ticket)), Ticket{Principal: p, ExpiresAt: exp}, now); err != nil {
		return "", time.Time{}, &Error{Kind: KindUnavailable, Message: "the ticket database is unavailable", Err: err}
	}
	return ticket, exp, nil
}

// redeem consumes a ticket. The tenant's status is looked up again, so a
// tenant suspended after the ticket was issued cannot use it.
func (a *Authenticator) redeem(ctx context.Context, ticket string) (Principal, error) {
	if len(ticket) > 128 {
		return Principal{}, unauthorized("ticket is unknown, used or expired")
	}
	if a.store == nil {
		return Principal{}, errf(KindUnavailable, "the ticket database is unavailable")
	}
	t, err := a.store.TakeTicket(ctx, sha256.Sum256([]byte(ticket)))
	if errors.Is(err, ErrNotFound) {
		return Principal{}, unauthorized("ticket is unknown or already used")
	}
	if err != nil {
		return Principal{}, &Error{Kind: KindUnavailable, Message: "the ticket database is unavailable", Err: err}
	}
	if !a.now().Before(t.ExpiresAt) {
		return Principal{}, unauthorized("ticket has expired")
	}
	if a.cfg.Mode != ModeDev {
		tn, err := a.store.TenantByID(ctx, t.Principal.TenantID)
		if errors.Is(err, ErrNotFound) {
			return Principal{}, errf(KindForbidden, MsgNotAllowlisted)
		}
		if err != nil {
			return Principal{}, &Error{Kind: KindUnavailable, Message: "the admission database is unavailable", Err: err}
		}
		if e := statusError(tn.Status); e != nil {
			return Principal{}, e
		}
	}
	return t.Principal, nil
}

// The websocket query parameters.
var wsParams = map[string]bool{"ticket": true, "access_token": true, "debug_tenant_id": true, "debug_user_id": true, "session_id": true}

// checkWSQuery validates the query of a websocket handshake and returns the session id.
func checkWSQuery(q url.Values) (string, error) {
	for k, vs := range q {
		switch {
		case k == "workspace_id" || k == "user_id":
			return "", errf(KindInvalid, fmt.Sprintf("query parameter %s is not supported; the tenant and user come from authentication and session_id is the only selector", k))
		case !wsParams[k]:
			return "", errf(KindInvalid, fmt.Sprintf("unknown query parameter %q", k))
		case len(vs) != 1:
			return "", errf(KindInvalid, fmt.Sprintf("query parameter %s is given more than once", k))
		}
	}
	sid := q.Get("session_id")
	if !sessionIDPattern.MatchString(sid) {
		return "", errf(KindInvalid, "session_id is required: 1 to 64 letters, digits, '-' or '_'")
	}
	return sid, nil
}

// AuthenticateWebSocket authenticates a websocket handshake by its headers
// and the query parameters its mode allows.
func (a *Authenticator) AuthenticateWebSocket(r *http.Request) (Principal, error) {
	q := r.URL.Query()
	ctx := r.Context()
	ticket, token := q.Get("ticket"), q.Get("access_token")
	dTenant, dUser := q.Get("debug_tenant_id"), q.Get("debug_user_id")
	hasDebug := q.Has("debug_tenant_id") || q.Has("debug_user_id")

	n := 0
	for _, has := range []bool{q.Has("ticket"), q.Has("access_token"), hasDebug} {
		if has {
			n++
		}
	}
	if n > 1 {
		return Principal{}, errf(KindInvalid, "give only one of ticket, access_token or debug_tenant_id/debug_user_id")
	}

	var (
		id  Identity
		err error
	)
	switch {
	case q.Has("ticket"):
		p, err := a.redeem(ctx, ticket)
		if err != nil {
			return a.fallback(err)
		}
		return p, nil
	case q.Has("access_token"):
		switch {
		case a.cfg.Mode == ModeHosted:
			err = unauthorized("tokens in websocket query parameters are refused in hosted mode; exchange the token for a ticket at POST /api/v1/auth/ws-ticket")
		case !a.cfg.AllowQueryAuthTokens:
			err = unauthorized("tokens in websocket query parameters are not accepted (ALLOW_QUERY_AUTH_TOKENS=false)")
		default:
			id, err = a.v.verify(ctx, token)
		}
	case hasDebug:
		switch {
		case a.cfg.Mode != ModeDev:
			err = unauthorized("debug parameters are accepted only in dev mode")
		case !a.cfg.AllowQueryAuthTokens || !a.cfg.AllowDebugAuth:
			err = unauthorized("debug parameters need ALLOW_DEBUG_AUTH=true and ALLOW_QUERY_AUTH_TOKENS=true")
		default:
			id, err = debugIdentity(dTenant, dUser, "", "")
		}
	default:
		return a.Authenticate(r)
	}
	if err != nil {
		return a.fallback(err)
	}
	return a.admit(ctx, id)
}
