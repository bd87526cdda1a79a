package authn_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/authn"
)

// problems splits a Validate error into its lines.
func problems(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

func TestDefaults(t *testing.T) {
	type flags struct{ AuthRequired, AllowDebugAuth, AllowQueryAuthTokens, DatabaseRequired bool }
	cases := []struct {
		env  string
		mode authn.Mode
		want flags
	}{
		{"local", "dev", flags{false, true, true, false}},
		{"local", "idp", flags{true, true, true, true}},
		{"local", "hosted", flags{true, true, true, true}},
		{"staging", "dev", flags{true, false, false, false}},
		{"production", "idp", flags{true, false, true, true}},
		{"production", "hosted", flags{true, false, false, true}},
	}
	for _, tc := range cases {
		c := authn.Defaults(tc.env, tc.mode)
		got := flags{c.AuthRequired, c.AllowDebugAuth, c.AllowQueryAuthTokens, c.DatabaseRequired}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Defaults(%s, %s) (-want +got):\n%s", tc.env, tc.mode, diff)
		}
	}
	if err := authn.DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v, want nil", err)
	}
}

func TestValidate(t *testing.T) {
	good := func(env string, mode authn.Mode) authn.Config {
		c := authn.Defaults(env, mode)
		c.DevJWTSecret = "a-real-secret"
		c.IDPJWKSURL = "https://login.example.test/keys"
		c.IDPAudience = "api://x"
		c.HostedAuthURL = "https://auth.example.test/api/auth"
		c.AllowQueryAuthTokens = mode == authn.ModeIDP
		return c
	}
	cases := []struct {
		name string
		cfg  authn.Config
		edit func(*authn.Config)
		want []string
	}{
		{"production idp ok", good("production", "idp"), nil, nil},
		{"production hosted ok", good("production", "hosted"), nil, nil},
		{"staging dev ok", good("staging", "dev"), nil, nil},
		{"production with everything loose", good("production", "dev"), func(c *authn.Config) {
			c.AuthRequired, c.AllowDebugAuth, c.AllowQueryAuthTokens = false, true, true
			c.CORSAllowedOrigins = []string{"https://app.example.test", "*"}
			c.DevJWTSecret = authn.DefaultDevJWTSecret
		}, []string{
			"AUTH_REQUIRED must be true when APP_ENV is production",
			"ALLOW_DEBUG_AUTH must be false when APP_ENV is production",
			"ALLOW_QUERY_AUTH_TOKENS must be false when APP_ENV is production (only AUTH_MODE=idp may keep query tokens)",
			"CORS_ALLOWED_ORIGINS must not contain * when APP_ENV is production",
			"DEV_JWT_SECRET must be set to a value other than its default when APP_ENV is production",
		}},
		{"staging empty dev secret", good("staging", "hosted"), func(c *authn.Config) { c.DevJWTSecret = "" }, []string{
			"DEV_JWT_SECRET must be set to a value other than its default when APP_ENV is staging",
		}},
		{"idp missing everything", good("local", "idp"), func(c *authn.Config) {
			c.AuthRequired, c.DatabaseRequired, c.IDPJWKSURL, c.IDPAudience = false, false, "", ""
			c.IDPIssuerTemplate = "https://login.example.test/common/v2.0"
		}, []string{
			"AUTH_REQUIRED must be true when AUTH_MODE is idp",
			"DATABASE_REQUIRED must be true when AUTH_MODE is idp",
			"IDP_JWKS_URL must be set when AUTH_MODE is idp",
			"IDP_AUDIENCE must be set when AUTH_MODE is idp",
			"IDP_ISSUER_TEMPLATE must contain {tenantid}",
		}},
		{"idp JWKS URL not http", good("local", "idp"), func(c *authn.Config) { c.IDPJWKSURL = "file:///etc/keys" }, []string{
			`IDP_JWKS_URL must be an absolute http or https URL, not "file:///etc/keys"`,
		}},
		{"hosted missing everything", good("local", "hosted"), func(c *authn.Config) {
			c.AuthRequired, c.DatabaseRequired, c.HostedAuthURL, c.HostedTenantClaim = false, false, "", ""
		}, []string{
			"AUTH_REQUIRED must be true when AUTH_MODE is hosted",
			"DATABASE_REQUIRED must be true when AUTH_MODE is hosted",
			"HOSTED_AUTH_URL must be set when AUTH_MODE is hosted",
			"HOSTED_TENANT_CLAIM must be set when AUTH_MODE is hosted",
		}},
		{"hosted tenant claim with a slash", good("local", "hosted"), func(c *authn.Config) { c.HostedTenantClaim = "a/b" }, []string{
			`HOSTED_TENANT_CLAIM "a/b" must be 1 to 64 letters, digits or hyphens, starting with a letter or digit`,
		}},
		{"bad secret key", good("local", "hosted"), func(c *authn.Config) { c.SecretEncryptionKey = "c2hvcnQ=" }, []string{
			"SECRET_ENCRYPTION_KEY must decode to 32 bytes, not 5",
		}},
		{"unknown mode and env", authn.Config{AppEnv: "prod", Mode: "saml", DevJWTSecret: "x", TicketTTL: 1, KeyCacheTTL: 1, KeyFetchTimeout: 1, MaxTokenBytes: 1, MaxMessageBytes: 1}, nil, []string{
			`APP_ENV must be local, staging or production, not "prod"`,
			`AUTH_MODE must be dev, idp or hosted, not "saml"`,
		}},
		{"bad CORS origin", good("local", "dev"), func(c *authn.Config) { c.CORSAllowedOrigins = []string{"app.example.test"} }, []string{
			`CORS_ALLOWED_ORIGINS entry "app.example.test" must be * or an origin such as https://app.example.com`,
		}},
	}
	for _, tc := range cases {
		cfg := tc.cfg
		if tc.edit != nil {
			tc.edit(&cfg)
		}
		err := cfg.Validate()
		if diff := cmp.Diff(tc.want, problems(err)); diff != "" {
			t.Errorf("%s: Validate() problems (-want +got):\n%s", tc.name, diff)
		}
	}
}
