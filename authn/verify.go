package authn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// claims are the token claims this package reads.
type claims struct {
	jwt.RegisteredClaims
	TID               string `json:"tid"`
	OID               string `json:"oid"`
	HostedID          string `json:"id"`
	Email             string `json:"email"`
	PreferredUsername string `json:"preferred_username"`
	UPN               string `json:"upn"`
	Name              string `json:"name"`
}

func (c *claims) email() string {
	for _, v := range []string{c.Email, c.PreferredUsername, c.UPN} {
		if v != "" {
			return v
		}
	}
	return ""
}

// verifier checks bearer tokens of one mode and returns the identity.
type verifier struct {
	cfg  Config
	now  func() time.Time
	keys *KeySet // idp and hosted
}

func unauthorized(msg string) *Error { return errf(KindUnauthorized, msg) }

// verify checks token and returns its normalised identity and the last
// instant the token is accepted (its exp plus the leeway; for a dev token
// without exp, noExpiryHold from now). The error is an *Error of kind
// KindUnauthorized or KindUnavailable.
func (v *verifier) verify(ctx context.Context, token string) (Identity, time.Time, error) {
	if token == "" {
		return Identity{}, time.Time{}, unauthorized("missing bearer token")
	}
	if len(token) > v.cfg.MaxTokenBytes {
		return Identity{}, time.Time{}, unauthorized(fmt.Sprintf("bearer token is longer than %d bytes", v.cfg.MaxTokenBytes))
	}
	if e := checkTokenJSON(token); e != nil {
		return Identity{}, time.Time{}, e
	}
	var (
		id  Identity
		c   *claims
		err error
	)
	switch v.cfg.Mode {
	case ModeDev:
		id, c, err = v.verifyDev(token)
	case ModeIDP:
		id, c, err = v.verifyIDP(ctx, token)
	case ModeHosted:
		id, c, err = v.verifyHosted(ctx, token)
	default:
		return Identity{}, time.Time{}, errf(KindInternal, "unknown auth mode")
	}
	var e *Error
	if errors.As(err, &e) && e.Kind == KindUnavailable && e.RetryAfter == 0 {
		// The key set is fetched again at most every KeyRefetchEvery.
		e.RetryAfter = v.cfg.KeyRefetchEvery
	}
	if err != nil {
		return Identity{}, time.Time{}, err
	}
	until := v.now().Add(noExpiryHold)
	if c.ExpiresAt != nil {
		until = c.ExpiresAt.Time.Add(v.cfg.Leeway)
	}
	return id, until, nil
}

func (v *verifier) parser(method string, opts ...jwt.ParserOption) *jwt.Parser {
	return jwt.NewParser(append([]jwt.ParserOption{
		jwt.WithValidMethods([]string{method}),
		jwt.WithLeeway(v.cfg.Leeway),
		jwt.WithTimeFunc(v.now),
		jwt.WithStrictDecoding(),
	}, opts...)...)
}

// rejectCrit refuses any token with a crit header: the library ignores it,
// and we understand no extension a critical header could announce.
func rejectCrit(t *jwt.Token) error {
	if _, ok := t.Header["crit"]; ok {
		return errCrit
	}
	return nil
}

var errCrit = errors.New("crit header not supported")

// timeChecks requires exp and iat and refuses an iat in the future beyond
// the leeway; golang-jwt checks exp but leaves iat optional.
func (v *verifier) timeChecks(c *claims, requireBoth bool) *Error {
	now := v.now()
	if c.ExpiresAt == nil && requireBoth {
		return unauthorized("token has no exp claim")
	}
	if c.IssuedAt == nil {
		if requireBoth {
			return unauthorized("token has no iat claim")
		}
		return nil
	}
	if c.IssuedAt.Time.After(now.Add(v.cfg.Leeway)) {
		return unauthorized("token iat is in the future")
	}
	return nil
}

// describe turns a jwt error into a client message, and a key set failure
// into 503.
func describeJWT(err error) *Error {
	switch {
	case errors.Is(err, ErrKeySetUnavailable):
		return &Error{Kind: KindUnavailable, Message: "signing keys are unavailable", Err: err}
	case errors.Is(err, ErrUnknownKey):
		return unauthorized("token is signed with an unknown key")
	case errors.Is(err, errCrit):
		return unauthorized("token has a crit header, which is not supported")
	case errors.Is(err, errNoKid):
		return unauthorized("token header has no kid")
	case errors.Is(err, jwt.ErrTokenMalformed):
		return unauthorized("token is malformed")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return unauthorized("token signature or algorithm is invalid")
	case errors.Is(err, jwt.ErrTokenExpired):
		return unauthorized("token has expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return unauthorized("token is not valid yet")
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return unauthorized("token iat is in the future")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return unauthorized("token issuer is not accepted")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return unauthorized("token audience is not accepted")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return unauthorized("token lacks a required claim")
	default:
		return unauthorized("token is invalid")
	}
}

var errNoKid = errors.New("no kid")

func (v *verifier) verifyDev(token string) (Identity, *claims, error) {
	var c claims
	_, err := v.parser(jwt.SigningMethodHS256.Alg()).ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		if err := rejectCrit(t); err != nil {
			return nil, err
		}
		return []byte(v.cfg.DevJWTSecret), nil
	})
	if err != nil {
		return Identity{}, nil, describeJWT(err)
	}
	if e := v.timeChecks(&c, false); e != nil {
		return Identity{}, nil, e
	}
	if c.TID == "" || c.OID == "" {
		return Identity{}, nil, unauthorized("token lacks the tid or oid claim")
	}
	if !validTenantClaim(c.TID) {
		return Identity{}, nil, unauthorized("token tid is not a valid tenant id")
	}
	if !validUserClaim(c.OID) {
		return Identity{}, nil, unauthorized("token oid is not a valid user id")
	}
	return Identity{TenantClaim: c.TID, UserClaim: c.OID, Email: c.email(), Name: c.Name}, &c, nil
}

func (v *verifier) keyfunc(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if err := rejectCrit(t); err != nil {
			return nil, err
		}
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, errNoKid
		}
		return v.keys.Key(ctx, kid)
	}
}

// audienceIs: aud must equal want (a one-element array counts).
func audienceIs(c *claims, want string) bool {
	return len(c.Audience) == 1 && c.Audience[0] == want
}

func (v *verifier) verifyIDP(ctx context.Context, token string) (Identity, *claims, error) {
	// Step 2: read tid without verification, to know the issuer to expect.
	var pre claims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &pre); err != nil {
		return Identity{}, nil, unauthorized("token is malformed")
	}
	if pre.TID == "" {
		return Identity{}, nil, unauthorized("token lacks the tid claim")
	}
	if !validTenantClaim(pre.TID) {
		return Identity{}, nil, unauthorized("token tid is not a valid tenant id")
	}
	// Step 3: the expected issuer.
	issuer := strings.ReplaceAll(v.cfg.IDPIssuerTemplate, "{tenantid}", pre.TID)
	// Steps 4-6: key by kid, RS256 only, iss, exp (required), then our own
	// checks of aud, iat and tid.
	var c claims
	_, err := v.parser(jwt.SigningMethodRS256.Alg(),
		jwt.WithIssuer(issuer),
		jwt.WithExpirationRequired(),
	).ParseWithClaims(token, &c, v.keyfunc(ctx))
	if err != nil {
		return Identity{}, nil, describeJWT(err)
	}
	if !audienceIs(&c, v.cfg.IDPAudience) {
		return Identity{}, nil, unauthorized("token audience is not accepted")
	}
	if e := v.timeChecks(&c, true); e != nil {
		return Identity{}, nil, e
	}
	if c.TID != pre.TID {
		return Identity{}, nil, unauthorized("token tid is not a valid tenant id")
	}
	user := c.OID
	if user == "" {
		user = c.Subject
	}
	if !validUserClaim(user) {
		return Identity{}, nil, unauthorized("token lacks a valid oid or sub claim")
	}
	return Identity{TenantClaim: c.TID, UserClaim: user, Email: c.email(), Name: c.Name}, &c, nil
}

func (v *verifier) verifyHosted(ctx context.Context, token string) (Identity, *claims, error) {
	origin := hostedOrigin(v.cfg.HostedAuthURL)
	var c claims
	_, err := v.parser(jwt.SigningMethodEdDSA.Alg(),
		jwt.WithIssuer(origin),
		jwt.WithExpirationRequired(),
	).ParseWithClaims(token, &c, v.keyfunc(ctx))
	if err != nil {
		return Identity{}, nil, describeJWT(err)
	}
	if !audienceIs(&c, origin) {
		return Identity{}, nil, unauthorized("token audience is not accepted")
	}
	if e := v.timeChecks(&c, true); e != nil {
		return Identity{}, nil, e
	}
	user := c.Subject
	if user == "" {
		user = c.HostedID
	}
	if !validUserClaim(user) {
		return Identity{}, nil, unauthorized("token lacks a valid sub or id claim")
	}
	// The tenant is the deployment's, never a claim of the token.
	return Identity{TenantClaim: v.cfg.HostedTenantClaim, UserClaim: user, Email: c.email(), Name: c.Name}, &c, nil
}
