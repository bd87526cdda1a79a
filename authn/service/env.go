package service

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/internal/throttle"
)

// EnvHelp lists the environment variables AuthConfigFromEnv and
// `turnledger runtime` read, for --help.
const EnvHelp = `Environment (see docs/runtime.md):
  APP_ENV                  local (default), staging or production
  AUTH_MODE                dev (default), idp or hosted
  AUTH_REQUIRED            true/false; default true for idp, hosted, staging and production
  ALLOW_DEBUG_AUTH         true/false; default true only when APP_ENV=local
  ALLOW_QUERY_AUTH_TOKENS  true/false; default true when APP_ENV=local or AUTH_MODE=idp
  DEV_JWT_SECRET           HS256 secret of dev mode; must be changed in staging and production
  IDP_JWKS_URL             idp: key set URL
  IDP_AUDIENCE             idp: expected aud
  IDP_ISSUER_TEMPLATE      idp: issuer with {tenantid}
  HOSTED_AUTH_URL          hosted: base URL of the hosted auth service
  HOSTED_TENANT_CLAIM      hosted: this deployment's tenant (default "default")
  SECRET_ENCRYPTION_KEY    hosted: base64 of 32 bytes, encrypts provider profile keys
  CORS_ALLOWED_ORIGINS     comma-separated origins (or *)
  DATABASE_URL             postgres://… (runtime role), bolt:<path> or a file path (default ./data/runtime.db)
  DATABASE_ADMIN_URL       postgres://… of the schema owner: migrations at start, 'runtime migrate' and
                           'turnledger tenants' (or a bbolt path for tenants)
  DATABASE_REQUIRED        true/false; default true for idp and hosted
`

// AuthConfigFromEnv reads the runtime's environment through getenv (the
// variables of EnvHelp): APP_ENV and AUTH_MODE choose the defaults, every
// other variable that is set overrides its default. With the throttle of
// failed authentications (authFailures), it returns every problem of the
// configuration: unreadable values and those authn.Config.Validate finds.
func AuthConfigFromEnv(getenv func(string) string, authFailures throttle.Rate) (authn.Config, []string) {
	appEnv := getenv("APP_ENV")
	if appEnv == "" {
		appEnv = authn.EnvLocal
	}
	mode := authn.Mode(getenv("AUTH_MODE"))
	if mode == "" {
		mode = authn.ModeDev
	}
	cfg := authn.Defaults(appEnv, mode)
	var problems []string
	boolVar := func(name string, dst *bool) {
		v := getenv(name)
		if v == "" {
			return
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s must be true or false, not %q", name, v))
			return
		}
		*dst = b
	}
	strVar := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	boolVar("AUTH_REQUIRED", &cfg.AuthRequired)
	boolVar("ALLOW_DEBUG_AUTH", &cfg.AllowDebugAuth)
	boolVar("ALLOW_QUERY_AUTH_TOKENS", &cfg.AllowQueryAuthTokens)
	boolVar("DATABASE_REQUIRED", &cfg.DatabaseRequired)
	strVar("DEV_JWT_SECRET", &cfg.DevJWTSecret)
	strVar("IDP_JWKS_URL", &cfg.IDPJWKSURL)
	strVar("IDP_AUDIENCE", &cfg.IDPAudience)
	strVar("IDP_ISSUER_TEMPLATE", &cfg.IDPIssuerTemplate)
	strVar("HOSTED_AUTH_URL", &cfg.HostedAuthURL)
	strVar("HOSTED_TENANT_CLAIM", &cfg.HostedTenantClaim)
	strVar("SECRET_ENCRYPTION_KEY", &cfg.SecretEncryptionKey)
	strVar("DATABASE_URL", &cfg.DatabaseURL)
	strVar("DATABASE_ADMIN_URL", &cfg.DatabaseAdminURL)
	for _, o := range strings.Split(getenv("CORS_ALLOWED_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.CORSAllowedOrigins = append(cfg.CORSAllowedOrigins, strings.TrimRight(o, "/"))
		}
	}
	cfg.AuthFailures = authFailures
	if err := cfg.Validate(); err != nil {
		problems = append(problems, splitJoined(err)...)
	}
	return cfg, problems
}

func splitJoined(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}
