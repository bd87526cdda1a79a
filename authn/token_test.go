package authn_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
)

// signRaw signs the header and payload JSON exactly as written (key order,
// duplicates and all), which jwt.Token cannot produce.
func signRaw(t testing.TB, m jwt.SigningMethod, key any, header, payload string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	ss := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	sig, err := m.Sign(ss, key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return ss + "." + enc.EncodeToString(sig)
}

// kv is one member of a JSON object: a key and its raw JSON value.
type kv struct{ k, v string }

func object(members ...kv) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", m.k, m.v)
	}
	b.WriteByte('}')
	return b.String()
}

func without(ms []kv, keys ...string) []kv {
	var out []kv
	for _, m := range ms {
		drop := false
		for _, k := range keys {
			drop = drop || m.k == k
		}
		if !drop {
			out = append(out, m)
		}
	}
	return out
}

func with(ms []kv, extra ...kv) []kv { return append(append([]kv(nil), ms...), extra...) }

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func quoted(s string) string { return strconv.Quote(s) }

// tokenCase is a raw token for one environment and the status /me must give.
type tokenCase struct {
	name   string
	e      *env
	token  string
	status int
	user   string // user_claim of a 200, when it matters
}

func runTokenCases(t *testing.T, cases []tokenCase) {
	t.Helper()
	for _, tc := range cases {
		p, status, eb := tc.e.me(bearerH(tc.token))
		if status != tc.status {
			t.Errorf("%s: GET /me = %d %+v, want %d", tc.name, status, eb, tc.status)
			continue
		}
		if status == http.StatusUnauthorized && (eb.Error != "UnauthorizedError" || eb.Message == "") {
			t.Errorf("%s: error body %+v, want an UnauthorizedError with a message", tc.name, eb)
		}
		if tc.user != "" && p.UserClaim != tc.user {
			t.Errorf("%s: user_claim = %q, want %q", tc.name, p.UserClaim, tc.user)
		}
	}
}

// tokenEnvs are the three verifying modes with dev requiring authentication
// (so that a refusal is not hidden by the anonymous fallback).
type tokenEnvs struct{ idp, hosted, dev *env }

func newTokenEnvs(t *testing.T) tokenEnvs {
	natsURL := authntest.StartNATS(t)
	return tokenEnvs{
		idp:    newEnv(t, envOpt{mode: authn.ModeIDP, natsURL: natsURL}),
		hosted: newEnv(t, envOpt{mode: authn.ModeHosted, natsURL: natsURL}),
		dev:    newEnv(t, envOpt{mode: authn.ModeDev, natsURL: natsURL, mutate: func(c *authn.Config) { c.AuthRequired = true }}),
	}
}

func (te tokenEnvs) idpBase() []kv {
	e := te.idp
	now := e.clock.Now()
	return []kv{
		{"iss", quoted(strings.ReplaceAll(issuerTemplate, "{tenantid}", tidActive))},
		{"aud", quoted(audience)}, {"tid", quoted(tidActive)}, {"oid", quoted("oid-1")}, {"sub", quoted("sub-1")},
		{"iat", unix(now.Add(-time.Minute))}, {"exp", unix(now.Add(time.Hour))},
	}
}

func (te tokenEnvs) hostedBase() []kv {
	e := te.hosted
	now := e.clock.Now()
	return []kv{
		{"iss", quoted(e.hostedOrigin())}, {"aud", quoted(e.hostedOrigin())}, {"sub", quoted("user-1")},
		{"iat", unix(now.Add(-time.Minute))}, {"exp", unix(now.Add(time.Hour))},
	}
}

func (te tokenEnvs) devBase() []kv {
	return []kv{{"tid", quoted("acme")}, {"oid", quoted("u1")}}
}

func (te tokenEnvs) idpTok(ms []kv) string {
	return signRaw(te.idp.t, jwt.SigningMethodRS256, te.idp.rsa, `{"alg":"RS256","kid":"`+rsaKid+`","typ":"JWT"}`, object(ms...))
}

func (te tokenEnvs) hostedTok(ms []kv) string {
	return signRaw(te.hosted.t, jwt.SigningMethodEdDSA, te.hosted.ed, `{"alg":"EdDSA","kid":"`+edKid+`","typ":"JWT"}`, object(ms...))
}

func (te tokenEnvs) devTok(ms []kv) string {
	return signRaw(te.dev.t, jwt.SigningMethodHS256, []byte(devSecret), `{"alg":"HS256","typ":"JWT"}`, object(ms...))
}

// TestClaimsReadFromExactKeysOnly: a payload or header holding a
// registered or spec name twice, or in another letter case, is refused;
// encoding/json would otherwise let the last of exp/EXP, oid/OID… win.
func TestClaimsReadFromExactKeysOnly(t *testing.T) {
	te := newTokenEnvs(t)
	past, future := unix(t0.Add(-time.Hour)), unix(t0.Add(time.Hour))
	idp, hosted, dev := te.idpBase(), te.hostedBase(), te.devBase()
	evilIss := quoted(strings.ReplaceAll(issuerTemplate, "{tenantid}", tidOther))
	cases := []tokenCase{
		// Controls: the raw builders make tokens that are accepted.
		{"idp/control", te.idp, te.idpTok(idp), 200, "oid-1"},
		{"hosted/control", te.hosted, te.hostedTok(hosted), 200, "user-1"},
		{"dev/control", te.dev, te.devTok(dev), 200, "u1"},

		{"idp/exp then EXP", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", past}, kv{"EXP", future})), 401, ""},
		{"idp/EXP only", te.idp, te.idpTok(with(without(idp, "exp"), kv{"EXP", future})), 401, ""},
		{"idp/exp twice", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", past}, kv{"exp", future})), 401, ""},
		{"idp/Exp", te.idp, te.idpTok(with(without(idp, "exp"), kv{"Exp", future})), 401, ""},
		{"idp/OID after oid", te.idp, te.idpTok(with(idp, kv{"OID", quoted("victim")})), 401, ""},
		{"idp/oid twice", te.idp, te.idpTok(with(idp, kv{"oid", quoted("victim")})), 401, ""},
		{"idp/TID after tid", te.idp, te.idpTok(with(idp, kv{"TID", quoted(tidOther)})), 401, ""},
		{"idp/ISS before iss", te.idp, te.idpTok(append([]kv{{"ISS", evilIss}}, idp...)), 401, ""},
		{"idp/AUD before aud", te.idp, te.idpTok(append([]kv{{"AUD", quoted("api://other")}}, idp...)), 401, ""},
		{"idp/SUB", te.idp, te.idpTok(with(without(idp, "oid"), kv{"SUB", quoted("victim")})), 401, ""},
		{"idp/IAT", te.idp, te.idpTok(with(idp, kv{"IAT", unix(t0)})), 401, ""},
		{"idp/Email", te.idp, te.idpTok(with(idp, kv{"Email", quoted("x@evil.test")})), 401, ""},
		{"hosted/sub then SUB", te.hosted, te.hostedTok(with(hosted, kv{"SUB", quoted("victim")})), 401, ""},
		{"hosted/sub with a long s (folds to sub)", te.hosted, te.hostedTok(with(without(hosted, "sub"), kv{"ſub", quoted("victim")})), 401, ""},
		{"hosted/ID", te.hosted, te.hostedTok(with(without(hosted, "sub"), kv{"ID", quoted("victim")})), 401, ""},
		{"hosted/exp then EXP", te.hosted, te.hostedTok(with(without(hosted, "exp"), kv{"exp", past}, kv{"EXP", future})), 401, ""},
		{"dev/OID after oid", te.dev, te.devTok(with(dev, kv{"OID", quoted("victim")})), 401, ""},
		{"dev/TID after tid", te.dev, te.devTok(with(dev, kv{"TID", quoted("other")})), 401, ""},
		{"dev/exp then EXP", te.dev, te.devTok(with(dev, kv{"exp", past}, kv{"EXP", future})), 401, ""},

		// The header: duplicate or case-variant parameters.
		{"idp/header kid twice", te.idp, signRaw(t, jwt.SigningMethodRS256, te.idp.rsa, `{"alg":"RS256","kid":"nope","kid":"`+rsaKid+`"}`, object(idp...)), 401, ""},
		{"idp/header KID", te.idp, signRaw(t, jwt.SigningMethodRS256, te.idp.rsa, `{"alg":"RS256","kid":"`+rsaKid+`","KID":"nope"}`, object(idp...)), 401, ""},
		{"idp/header ALG", te.idp, signRaw(t, jwt.SigningMethodRS256, te.idp.rsa, `{"ALG":"none","alg":"RS256","kid":"`+rsaKid+`"}`, object(idp...)), 401, ""},
		{"hosted/header alg twice", te.hosted, signRaw(t, jwt.SigningMethodEdDSA, te.hosted.ed, `{"alg":"HS256","alg":"EdDSA","kid":"`+edKid+`"}`, object(hosted...)), 401, ""},
		{"dev/header Crit", te.dev, signRaw(t, jwt.SigningMethodHS256, []byte(devSecret), `{"alg":"HS256","Crit":["x"]}`, object(dev...)), 401, ""},

		// The shape: one object, nothing after it.
		{"idp/data after the payload object", te.idp, signRaw(t, jwt.SigningMethodRS256, te.idp.rsa, `{"alg":"RS256","kid":"`+rsaKid+`"}`, object(idp...)+`{"oid":"victim"}`), 401, ""},
		{"dev/payload is an array", te.dev, signRaw(t, jwt.SigningMethodHS256, []byte(devSecret), `{"alg":"HS256"}`, `[1]`), 401, ""},
		{"dev/header is a string", te.dev, signRaw(t, jwt.SigningMethodHS256, []byte(devSecret), `"HS256"`, object(dev...)), 401, ""},
	}
	runTokenCases(t, cases)
}

// TestNumericDates: exp, iat and nbf are JSON numbers from 0 to
// authn.MaxNumericDate (RFC 7519 NumericDate), nothing else.
func TestNumericDates(t *testing.T) {
	te := newTokenEnvs(t)
	idp, hosted, dev := te.idpBase(), te.hostedBase(), te.devBase()
	future := t0.Add(time.Hour)
	max := strconv.Itoa(authn.MaxNumericDate)
	cases := []tokenCase{
		{"idp/exp at the bound", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", max})), 200, ""},
		{"idp/exp with a fraction", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", unix(future) + ".5"})), 200, ""},
		{"idp/iat 0 and nbf 0", te.idp, te.idpTok(with(without(idp, "iat"), kv{"iat", "0"}, kv{"nbf", "0"})), 200, ""},
		{"dev/no dates at all", te.dev, te.devTok(dev), 200, ""},

		{"idp/exp as a string", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", quoted(unix(future))})), 401, ""},
		{"idp/iat as a string", te.idp, te.idpTok(with(without(idp, "iat"), kv{"iat", quoted(unix(t0))})), 401, ""},
		{"idp/nbf as a string", te.idp, te.idpTok(with(idp, kv{"nbf", quoted(unix(t0))})), 401, ""},
		{"idp/iat 1e30", te.idp, te.idpTok(with(without(idp, "iat"), kv{"iat", "1e30"})), 401, ""},
		{"idp/iat 2^63", te.idp, te.idpTok(with(without(idp, "iat"), kv{"iat", "9223372036854775808"})), 401, ""},
		{"idp/iat -1", te.idp, te.idpTok(with(without(idp, "iat"), kv{"iat", "-1"})), 401, ""},
		{"idp/nbf -1e30", te.idp, te.idpTok(with(idp, kv{"nbf", "-1e30"})), 401, ""},
		{"idp/nbf -1", te.idp, te.idpTok(with(idp, kv{"nbf", "-1"})), 401, ""},
		{"idp/exp 1e30", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", "1e30"})), 401, ""},
		{"idp/exp past the bound", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", strconv.Itoa(authn.MaxNumericDate + 1)})), 401, ""},
		{"idp/exp 1e400", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", "1e400"})), 401, ""},
		{"idp/exp null", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", "null"})), 401, ""},
		{"idp/exp true", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", "true"})), 401, ""},
		{"idp/exp an object", te.idp, te.idpTok(with(without(idp, "exp"), kv{"exp", `{"n":1}`})), 401, ""},
		{"idp/iat in the future beyond the leeway", te.idp, te.idpTok(with(without(idp, "iat"), kv{"iat", unix(t0.Add(time.Minute))})), 401, ""},
		{"hosted/exp as a string", te.hosted, te.hostedTok(with(without(hosted, "exp"), kv{"exp", quoted(unix(future))})), 401, ""},
		{"hosted/iat -1", te.hosted, te.hostedTok(with(without(hosted, "iat"), kv{"iat", "-1"})), 401, ""},
		{"hosted/nbf 1e30", te.hosted, te.hostedTok(with(hosted, kv{"nbf", "1e30"})), 401, ""},
		{"dev/exp as a string", te.dev, te.devTok(with(dev, kv{"exp", quoted(unix(future))})), 401, ""},
		{"dev/exp null", te.dev, te.devTok(with(dev, kv{"exp", "null"})), 401, ""},
		{"dev/iat 2^63", te.dev, te.devTok(with(dev, kv{"iat", "9223372036854775808"})), 401, ""},
		{"dev/exp past the bound", te.dev, te.devTok(with(dev, kv{"exp", strconv.Itoa(authn.MaxNumericDate + 1)})), 401, ""},
	}
	runTokenCases(t, cases)
}
