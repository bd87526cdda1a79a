package authn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
)

// jsonMembers is an independent reading of a JSON object's top-level
// members in order, duplicates kept; ok is false for anything that is not
// exactly one object.
func jsonMembers(b []byte) (keys []string, vals []json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		keys, vals = append(keys, t.(string)), append(vals, v)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, false
	}
	return keys, vals, true
}

// FuzzTokenJSON signs arbitrary header and payload JSON in each mode and
// checks every accepted token against the rules, read independently: one
// object each, every key once and no key that differs from a registered or
// spec name only in letter case, exp/iat/nbf JSON numbers in
// [0, MaxNumericDate] and exp not past, and the identity taken from the
// exact keys. Nothing panics and every refusal is 401, 403 or 503.
//
// In the header and payload, $ALG, $KID, $ISS, $AUD, $IAT and $EXP stand
// for the mode's valid values, so that seeds can pass in every mode.
func FuzzTokenJSON(f *testing.F) {
	j := authntest.NewJWKS(f)
	rsaKey, edKey := authntest.RSAKey(f, 0), authntest.Ed25519Key(f)
	j.PutRSA("r", rsaKey)
	j.PutEd25519("e", edKey)
	store := authntest.OpenStore(f)
	if _, err := store.AddTenant(context.Background(), "contoso", "standard", t0); err != nil {
		f.Fatal(err)
	}
	clock := authntest.NewClock(t0)
	type mode struct {
		m        authn.Mode
		a        *authn.Authenticator
		alg, kid string
		method   jwt.SigningMethod
		key      any
		iss, aud string
	}
	var modes []mode
	for _, m := range []authn.Mode{authn.ModeDev, authn.ModeIDP, authn.ModeHosted} {
		cfg := authn.Defaults(authn.EnvLocal, m)
		cfg.AuthRequired = true
		cfg.DevJWTSecret = devSecret
		cfg.IDPJWKSURL, cfg.IDPAudience, cfg.IDPIssuerTemplate = j.URL(), audience, issuerTemplate
		cfg.HostedAuthURL, cfg.HostedTenantClaim = j.URL(), "contoso"
		md := mode{m: m, a: authn.NewAuthenticator(cfg, store, clock.Now, nil, &http.Client{Timeout: time.Second})}
		switch m {
		case authn.ModeDev:
			md.alg, md.method, md.key = "HS256", jwt.SigningMethodHS256, []byte(devSecret)
		case authn.ModeIDP:
			md.alg, md.kid, md.method, md.key = "RS256", "r", jwt.SigningMethodRS256, rsaKey
			md.iss, md.aud = strings.ReplaceAll(issuerTemplate, "{tenantid}", "contoso"), audience
		case authn.ModeHosted:
			md.alg, md.kid, md.method, md.key = "EdDSA", "e", jwt.SigningMethodEdDSA, edKey
			md.iss, md.aud = j.URL(), j.URL()
		}
		modes = append(modes, md)
	}
	h := `{"alg":"$ALG","kid":"$KID","typ":"JWT"}`
	good := `{"iss":"$ISS","aud":"$AUD","tid":"contoso","oid":"o1","sub":"s1","iat":$IAT,"exp":$EXP}`
	f.Add(h, good)
	f.Add(h, `{"iss":"$ISS","aud":"$AUD","tid":"contoso","oid":"o1","sub":"s1","iat":$IAT,"exp":1,"EXP":$EXP}`)
	f.Add(h, `{"iss":"$ISS","aud":"$AUD","tid":"contoso","oid":"o1","sub":"s1","iat":$IAT,"exp":$EXP,"OID":"victim"}`)
	f.Add(h, `{"iss":"$ISS","aud":"$AUD","tid":"contoso","oid":"o1","ſub":"s1","iat":$IAT,"exp":$EXP}`)
	f.Add(h, `{"iss":"$ISS","aud":"$AUD","tid":"contoso","oid":"o1","sub":"s1","iat":$IAT,"exp":"$EXP"}`)
	f.Add(h, `{"iss":"$ISS","aud":"$AUD","tid":"contoso","oid":"o1","sub":"s1","iat":1e30,"exp":$EXP}`)
	f.Add(h, `{"iss":"$ISS","aud":"$AUD","tid":"contoso","oid":"o1","sub":"s1","iat":-1,"nbf":9223372036854775808,"exp":$EXP}`)
	f.Add(h, `{"iss":"$ISS","aud":"$AUD","tid":"contoso","oid":"o1","sub":"s1","iat":$IAT,"exp":$EXP.25,"nbf":0}`)
	f.Add(h, `{"iss":"$ISS","aud":["$AUD"],"tid":"contoso","oid":"o1","sub":"s1","iat":$IAT,"exp":253402300799}`)
	f.Add(`{"alg":"$ALG","kid":"x","kid":"$KID"}`, good)
	f.Add(`{"alg":"$ALG","KID":"$KID"}`, good)
	f.Add(h, good+`{}`)
	f.Add(h, `{"tid":"contoso","oid":"o1","iat":null,"exp":true}`)
	f.Fuzz(func(t *testing.T, header, payload string) {
		for _, md := range modes {
			r := strings.NewReplacer("$ALG", md.alg, "$KID", md.kid, "$ISS", md.iss, "$AUD", md.aud,
				"$IAT", strconv.FormatInt(t0.Add(-time.Minute).Unix(), 10), "$EXP", strconv.FormatInt(t0.Add(time.Hour).Unix(), 10))
			hdr, pl := r.Replace(header), r.Replace(payload)
			tok := signRaw(t, md.method, md.key, hdr, pl)
			req := httptest.NewRequest("GET", "/api/v1/auth/me", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			p, err := md.a.Authenticate(req)
			if err != nil {
				switch authn.KindOf(err) {
				case authn.KindUnauthorized, authn.KindForbidden, authn.KindUnavailable:
				default:
					t.Errorf("%s: Authenticate(%s . %s) error %v of kind %v", md.m, hdr, pl, err, authn.KindOf(err))
				}
				continue
			}
			checkAccepted(t, string(md.m), hdr, pl, p)
		}
	})
}

func checkAccepted(t *testing.T, mode, hdr, pl string, p authn.Principal) {
	t.Helper()
	bad := func(why string) { t.Errorf("%s: accepted %s . %s, but %s", mode, hdr, pl, why) }
	for _, part := range []struct {
		doc   string
		names []string
	}{
		{hdr, []string{"alg", "kid", "typ", "crit"}},
		{pl, []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "tid", "oid", "id", "email", "name"}},
	} {
		keys, _, ok := jsonMembers([]byte(part.doc))
		if !ok {
			bad("it is not one JSON object")
			return
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				bad(k + " appears twice")
			}
			seen[k] = true
			for _, n := range part.names {
				if k != n && strings.EqualFold(k, n) {
					bad(k + " differs from " + n + " only in letter case")
				}
			}
		}
	}
	keys, vals, _ := jsonMembers([]byte(pl))
	claim := map[string]json.RawMessage{}
	for i, k := range keys {
		claim[k] = vals[i]
	}
	for _, d := range []string{"exp", "iat", "nbf"} {
		raw, ok := claim[d]
		if !ok {
			continue
		}
		var n json.Number
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		tok, err := dec.Token()
		if n, ok = tok.(json.Number); err != nil || !ok {
			bad(d + " is not a JSON number")
			continue
		}
		v, err := strconv.ParseFloat(string(n), 64)
		if err != nil || v < 0 || v > authn.MaxNumericDate {
			bad(d + " is out of range")
		}
		if d == "exp" && v < float64(t0.Add(-30*time.Second).Unix()) {
			bad("exp is past")
		}
	}
	str := func(k string) string {
		var s string
		json.Unmarshal(claim[k], &s)
		return s
	}
	switch mode {
	case "dev":
		if p.TenantClaim != str("tid") || p.UserClaim != str("oid") {
			bad("the identity " + p.TenantClaim + "/" + p.UserClaim + " is not tid/oid")
		}
	case "idp":
		user := str("oid")
		if user == "" {
			user = str("sub")
		}
		if p.TenantClaim != str("tid") || p.UserClaim != user {
			bad("the identity " + p.TenantClaim + "/" + p.UserClaim + " is not tid/(oid or sub)")
		}
	case "hosted":
		user := str("sub")
		if user == "" {
			user = str("id")
		}
		if p.UserClaim != user {
			bad("the user " + p.UserClaim + " is not sub (or id)")
		}
	}
}
