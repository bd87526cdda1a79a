package authn

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/turnledger/turnledger/internal/throttle"
)

// Mode is the authentication mode selected by AUTH_MODE.
type Mode string

// The three modes.
const (
	ModeDev    Mode = "dev"
	ModeIDP    Mode = "idp"
	ModeHosted Mode = "hosted"
)

// The application environments of APP_ENV.
const (
	EnvLocal      = "local"
	EnvStaging    = "staging"
	EnvProduction = "production"
)

// DefaultDevJWTSecret is the fixed default of DEV_JWT_SECRET. It is public,
// so the startup guardrails refuse it in staging and production.
const DefaultDevJWTSecret = "turnledger-dev-secret-do-not-use-outside-local"

// DefaultIDPIssuerTemplate is the identity provider's public issuer URL.
const DefaultIDPIssuerTemplate = "https://login.microsoftonline.com/{tenantid}/v2.0"

// DefaultHostedTenantClaim is the default of HOSTED_TENANT_CLAIM.
const DefaultHostedTenantClaim = "default"

// Config is everything the runtime authentication service is told. The field
// comments name the environment variable each one comes from; only cmd reads
// the environment.
type Config struct {
	AppEnv               string   // APP_ENV: local, staging or production
	Mode                 Mode     // AUTH_MODE
	AuthRequired         bool     // AUTH_REQUIRED
	AllowDebugAuth       bool     // ALLOW_DEBUG_AUTH
	AllowQueryAuthTokens bool     // ALLOW_QUERY_AUTH_TOKENS
	DevJWTSecret         string   // DEV_JWT_SECRET
	IDPJWKSURL           string   // IDP_JWKS_URL
	IDPAudience          string   // IDP_AUDIENCE
	IDPIssuerTemplate    string   // IDP_ISSUER_TEMPLATE
	HostedAuthURL        string   // HOSTED_AUTH_URL
	HostedTenantClaim    string   // HOSTED_TENANT_CLAIM
	SecretEncryptionKey  string   // SECRET_ENCRYPTION_KEY: standard base64 of 32 bytes
	CORSAllowedOrigins   []string // CORS_ALLOWED_ORIGINS, comma separated
	DatabaseURL          string   // DATABASE_URL: bolt:<path> or a file path
	DatabaseAdminURL     string   // DATABASE_ADMIN_URL: same forms, used by `tenants`
	DatabaseRequired     bool     // DATABASE_REQUIRED

	// Not from the spec's table; fixed defaults, settable by code.
	TicketTTL       time.Duration // lifetime of a websocket ticket (30 s)
	KeyCacheTTL     time.Duration // JWKS cache lifetime (300 s)
	KeyRefetchEvery time.Duration // least time between two JWKS fetches outside expiry (10 s)
	KeyFetchTimeout time.Duration // one JWKS fetch (5 s)
	Leeway          time.Duration // clock skew allowed on exp, nbf and iat (30 s)
	MaxTokenBytes   int           // longest bearer token accepted (8 KiB)
	MaxMessageBytes int64         // largest websocket message (64 KiB)
	// AuthFailures throttles failed authentication per remote address
	// (burst 20, one more per second; a zero Rate turns it off): see
	// throttle.go.
	AuthFailures throttle.Rate
	// VerifiedTokens is how many credentials that authenticated are
	// remembered (by hash, until their expiry) so that they skip that
	// throttle (10,000, about 2 MB; 0 remembers none): see verified.go.
	VerifiedTokens int
}

// DefaultConfig is the configuration of a local developer machine in dev mode.
func DefaultConfig() Config { return Defaults(EnvLocal, ModeDev) }

// Defaults returns the defaults the spec gives for an environment and a mode.
// Unknown values are kept as given so that Validate can name them.
func Defaults(appEnv string, mode Mode) Config {
	local := appEnv == EnvLocal
	return Config{
		AppEnv:               appEnv,
		Mode:                 mode,
		AuthRequired:         mode == ModeIDP || mode == ModeHosted || !local,
		AllowDebugAuth:       local,
		AllowQueryAuthTokens: local || mode == ModeIDP,
		DevJWTSecret:         DefaultDevJWTSecret,
		IDPIssuerTemplate:    DefaultIDPIssuerTemplate,
		HostedTenantClaim:    DefaultHostedTenantClaim,
		DatabaseRequired:     mode == ModeIDP || mode == ModeHosted,
		TicketTTL:            30 * time.Second,
		KeyCacheTTL:          300 * time.Second,
		KeyRefetchEvery:      10 * time.Second,
		KeyFetchTimeout:      5 * time.Second,
		Leeway:               30 * time.Second,
		MaxTokenBytes:        8 << 10,
		MaxMessageBytes:      64 << 10,
		AuthFailures:         throttle.Rate{Burst: 20, Every: time.Second},
		VerifiedTokens:       10_000,
	}
}

// Validate checks the startup guardrails and returns every broken rule,
// joined with errors.Join; each one reads as a sentence of its own. The rule
// that HOSTED_TENANT_CLAIM names an admitted tenant needs the store and is
// checked by CheckHostedTenant instead.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	switch c.AppEnv {
	case EnvLocal, EnvStaging, EnvProduction:
	default:
		bad("APP_ENV must be local, staging or production, not %q", c.AppEnv)
	}
	switch c.Mode {
	case ModeDev, ModeIDP, ModeHosted:
	default:
		bad("AUTH_MODE must be dev, idp or hosted, not %q", c.Mode)
	}
	if c.AppEnv == EnvStaging || c.AppEnv == EnvProduction {
		if !c.AuthRequired {
			bad("AUTH_REQUIRED must be true when APP_ENV is %s", c.AppEnv)
		}
		if c.AllowDebugAuth {
			bad("ALLOW_DEBUG_AUTH must be false when APP_ENV is %s", c.AppEnv)
		}
		// idp is the one compatibility mode whose clients may still send
		// access tokens in websocket query strings.
		if c.AllowQueryAuthTokens && c.Mode != ModeIDP {
			bad("ALLOW_QUERY_AUTH_TOKENS must be false when APP_ENV is %s (only AUTH_MODE=idp may keep query tokens)", c.AppEnv)
		}
		if slices.Contains(c.CORSAllowedOrigins, "*") {
			bad("CORS_ALLOWED_ORIGINS must not contain * when APP_ENV is %s", c.AppEnv)
		}
		if c.DevJWTSecret == "" || c.DevJWTSecret == DefaultDevJWTSecret {
			bad("DEV_JWT_SECRET must be set to a value other than its default when APP_ENV is %s", c.AppEnv)
		}
	}
	if c.Mode == ModeDev && c.DevJWTSecret == "" {
		bad("DEV_JWT_SECRET must not be empty when AUTH_MODE is dev")
	}
	if c.Mode == ModeIDP {
		if !c.AuthRequired {
			bad("AUTH_REQUIRED must be true when AUTH_MODE is idp")
		}
		if !c.DatabaseRequired {
			bad("DATABASE_REQUIRED must be true when AUTH_MODE is idp")
		}
		if c.IDPJWKSURL == "" {
			bad("IDP_JWKS_URL must be set when AUTH_MODE is idp")
		} else if err := checkHTTPURL(c.IDPJWKSURL); err != nil {
			bad("IDP_JWKS_URL %v", err)
		}
		if c.IDPAudience == "" {
			bad("IDP_AUDIENCE must be set when AUTH_MODE is idp")
		}
		if !strings.Contains(c.IDPIssuerTemplate, "{tenantid}") {
			bad("IDP_ISSUER_TEMPLATE must contain {tenantid}")
		}
	}
	if c.Mode == ModeHosted {
		if !c.AuthRequired {
			bad("AUTH_REQUIRED must be true when AUTH_MODE is hosted")
		}
		if !c.DatabaseRequired {
			bad("DATABASE_REQUIRED must be true when AUTH_MODE is hosted")
		}
		if c.HostedAuthURL == "" {
			bad("HOSTED_AUTH_URL must be set when AUTH_MODE is hosted")
		} else if err := checkHTTPURL(c.HostedAuthURL); err != nil {
			bad("HOSTED_AUTH_URL %v", err)
		}
		if c.HostedTenantClaim == "" {
			bad("HOSTED_TENANT_CLAIM must be set when AUTH_MODE is hosted")
		} else if !validTenantClaim(c.HostedTenantClaim) {
			bad("HOSTED_TENANT_CLAIM %q must be 1 to 64 letters, digits or hyphens, starting with a letter or digit", c.HostedTenantClaim)
		}
	}
	if c.SecretEncryptionKey != "" {
		if _, err := decodeKey(c.SecretEncryptionKey); err != nil {
			bad("SECRET_ENCRYPTION_KEY %v", err)
		}
	}
	for _, o := range c.CORSAllowedOrigins {
		if o == "*" {
			continue
		}
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad("CORS_ALLOWED_ORIGINS entry %q must be * or an origin such as https://app.example.com", o)
		}
	}
	if c.TicketTTL <= 0 || c.KeyCacheTTL <= 0 || c.KeyFetchTimeout <= 0 || c.MaxTokenBytes <= 0 || c.MaxMessageBytes <= 0 || c.Leeway < 0 || c.KeyRefetchEvery < 0 {
		bad("ticket lifetime, key cache lifetime, fetch timeout and size limits must be positive")
	}
	if c.AuthFailures.Burst < 0 || c.AuthFailures.Every < 0 {
		bad("the failed-authentication rate must not be negative")
	}
	return errors.Join(errs...)
}

func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an absolute http or https URL, not %q", s)
	}
	return nil
}

// decodeKey decodes SECRET_ENCRYPTION_KEY: standard base64 (padded) of
// exactly 32 bytes, for AES-256-GCM.
func decodeKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("must be standard base64 of 32 bytes (e.g. `openssl rand -base64 32`)")
	}
	if len(k) != 32 {
		return nil, fmt.Errorf("must decode to 32 bytes, not %d", len(k))
	}
	return k, nil
}

// hostedOrigin is scheme://host[:port] of HOSTED_AUTH_URL: the expected iss and aud.
func hostedOrigin(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// hostedJWKSURL is <HOSTED_AUTH_URL>/.well-known/jwks.json.
func hostedJWKSURL(base string) string {
	return strings.TrimRight(base, "/") + "/.well-known/jwks.json"
}
