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

// anonymous is dev mode's fallback identity when AUTH_REQUIRED=false.
var anonymous = Identity{TenantClaim: "default", UserClaim: "anonymous"}

// Authenticate authenticates an HTTP request by its headers. Credentials in
// query parameters are not accepted here, but they still count: a request
// that carries one next to a header is refused as ambiguous.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	p, _, err := a.authenticate(r)
	return p, err
}

// authenticate is Authenticate that also returns the last instant the
// request's token is accepted: zero unless the request was admitted by a
// token (not debug headers, not dev mode's anonymous fallback).
func (a *Authenticator) authenticate(r *http.Request) (Principal, time.Time, error) {
	c, e := a.credentialOf(r)
	if e != nil {
		return Principal{}, time.Time{}, e
	}
	id, until, err := a.identify(r, c, false)
	if err != nil {
		p, err := a.fallback(err)
		return p, time.Time{}, err
	}
	p, err := a.admit(r.Context(), id)
	if err != nil {
		return Principal{}, time.Time{}, err
	}
	return p, until, nil
}

// fallback applies dev mode's anonymous identity when authentication is not
// required. Ambiguous credentials are never passed as anonymous.
func (a *Authenticator) fallback(err error) (Principal, error) {
	if a.cfg.Mode == ModeDev && !a.cfg.AuthRequired && KindOf(err) == KindUnauthorized && !errors.Is(err, errAmbiguous) {
		return devPrincipal(anonymous), nil
	}
	return Principal{}, err
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

// ticketPeeker is a Store that can read a ticket without taking it (both
// stores of this repository can: boltstore.Store and pgstore.Store). With
// one, a websocket dial checks its ticket before anything else and spends
// it only once every other check has passed; with a Store that cannot, the
// ticket is checked when it is spent, after the other checks.
type ticketPeeker interface {
	PeekTicket(ctx context.Context, hash [32]byte) (Ticket, error)
}

// ticket looks a ticket up (take=false) or takes it (take=true), and checks
// its expiry and, in idp and hosted modes, its tenant's status again, so a
// tenant suspended after the ticket was issued cannot use it. A lookup in a
// Store that cannot peek answers the zero Principal and no error.
func (a *Authenticator) ticket(ctx context.Context, ticket string, take bool) (Principal, error) {
	if len(ticket) > 128 {
		return Principal{}, unauthorized("ticket is unknown, used or expired")
	}
	if a.store == nil {
		return Principal{}, errf(KindUnavailable, "the ticket database is unavailable")
	}
	hash := sha256.Sum256([]byte(ticket))
	var (
		t   Ticket
		err error
	)
	switch pk, ok := a.store.(ticketPeeker); {
	case take:
		t, err = a.store.TakeTicket(ctx, hash)
	case ok:
		t, err = pk.PeekTicket(ctx, hash)
	default:
		return Principal{}, nil
	}
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

// checkWSQuery validates the query of a websocket handshake (after
// authentication) and returns the session id, "" when none was given.
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
	if !q.Has("session_id") {
		return "", nil
	}
	sid := q.Get("session_id")
	if !sessionIDPattern.MatchString(sid) {
		return "", errf(KindInvalid, "session_id must be 1 to 64 letters, digits, '-' or '_' (or left out: the server then makes one)")
	}
	return sid, nil
}

// authenticateWebSocket authenticates a websocket handshake by its one
// credential: a header, or a query parameter its mode allows. A ticket is
// looked up, not spent: it returns the ticket to give spendTicket once the
// dial has passed every other check ("" for other credentials), and for a
// token the last instant it is accepted (zero otherwise).
func (a *Authenticator) authenticateWebSocket(r *http.Request) (p Principal, ticket string, until time.Time, err error) {
	c, e := a.credentialOf(r)
	if e != nil {
		return Principal{}, "", time.Time{}, e
	}
	if c == credTicket {
		ticket = r.URL.Query().Get("ticket")
		if p, err = a.ticket(r.Context(), ticket, false); err != nil {
			p, err = a.fallback(err)
			return p, "", time.Time{}, err
		}
		return p, ticket, time.Time{}, nil
	}
	id, until, err := a.identify(r, c, true)
	if err != nil {
		p, err = a.fallback(err)
		return p, "", time.Time{}, err
	}
	if p, err = a.admit(r.Context(), id); err != nil {
		return Principal{}, "", time.Time{}, err
	}
	return p, "", until, nil
}

// spendTicket takes the ticket and returns its principal. Of two dials
// racing with one ticket, exactly one takes it; the other gets 401.
func (a *Authenticator) spendTicket(ctx context.Context, ticket string) (Principal, error) {
	return a.ticket(ctx, ticket, true)
}
