package authn_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
)

// FuzzParseKeySet: any body is a key set or an error, never a panic.
func FuzzParseKeySet(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"a","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"a","n":"AQAB","e":"AAAAAAAA"}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, typ := range []authn.KeyType{authn.KeyRSA, authn.KeyEd25519} {
			keys, err := authn.ParseKeySet(body, typ)
			if err == nil && len(keys) == 0 {
				t.Errorf("ParseKeySet(%q) = no keys and no error", body)
			}
		}
	})
}

// FuzzBearer: any Authorization header gets 401 (or 503 for the key set),
// never a panic or a 500.
func FuzzBearer(f *testing.F) {
	j := authntest.NewJWKS(f)
	j.PutRSA("k", authntest.RSAKey(f, 0))
	clock := authntest.NewClock(t0)
	auths := map[authn.Mode]*authn.Authenticator{}
	for _, m := range []authn.Mode{authn.ModeDev, authn.ModeIDP, authn.ModeHosted} {
		cfg := authn.Defaults(authn.EnvLocal, m)
		cfg.AuthRequired = true
		cfg.IDPJWKSURL, cfg.IDPAudience, cfg.HostedAuthURL = j.URL(), "aud", j.URL()
		auths[m] = authn.NewAuthenticator(cfg, authntest.OpenStore(f), clock.Now, nil, &http.Client{Timeout: time.Second})
	}
	f.Add("Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6ImsifQ.eyJ0aWQiOiJ4In0.c2ln")
	f.Add("Bearer eyJhbGciOiJub25lIn0.e30.")
	f.Add("Bearer ...")
	f.Add("bearer eyJhbGciOiJIUzI1NiIsImNyaXQiOlsiYiJdfQ.eyJ0aWQiOiIvLi4vIn0.")
	f.Fuzz(func(t *testing.T, header string) {
		for m, a := range auths {
			r := httptest.NewRequest("GET", "/api/v1/auth/me", nil)
			r.Header.Set("Authorization", header)
			_, err := a.Authenticate(r)
			if err == nil {
				t.Fatalf("%s: Authenticate(%q) succeeded", m, header)
			}
			if k := authn.KindOf(err); k != authn.KindUnauthorized && k != authn.KindUnavailable {
				t.Errorf("%s: Authenticate(%q) kind = %v (%v), want unauthorized or unavailable", m, header, k, err)
			}
		}
	})
}
