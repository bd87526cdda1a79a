package authn_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
	"github.com/turnledger/turnledger/internal/jsonhttp"
)

// dial opens a websocket handshake and returns the HTTP status of a refusal
// (101 when it was accepted, and then the connection is closed).
func dial(t *testing.T, u string, header http.Header) (int, jsonhttp.ErrorBody) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: header})
	if err == nil {
		c.Close(websocket.StatusNormalClosure, "")
		return http.StatusSwitchingProtocols, jsonhttp.ErrorBody{}
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	var eb jsonhttp.ErrorBody
	if resp.Body != nil {
		json.NewDecoder(resp.Body).Decode(&eb)
	}
	return resp.StatusCode, eb
}

// TestRejections is the table of bad tokens and requests, each with the
// exact status (and error name) it must get.
func TestRejections(t *testing.T) {
	idp := newEnv(t, envOpt{mode: authn.ModeIDP, mutate: func(c *authn.Config) { c.AllowQueryAuthTokens = true }})
	idpNoQuery := newEnv(t, envOpt{mode: authn.ModeIDP, mutate: func(c *authn.Config) { c.AllowQueryAuthTokens = false }})
	hosted := newEnv(t, envOpt{mode: authn.ModeHosted})
	devStrict := newEnv(t, envOpt{mode: authn.ModeDev, mutate: func(c *authn.Config) {
		c.AuthRequired, c.AllowDebugAuth, c.AllowQueryAuthTokens = true, false, false
	}})

	pub, err := x509.MarshalPKIXPublicKey(&idp.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	otherRSA := authntest.RSAKey(t, 1)

	http1 := func(e *env, h map[string]string) func() (int, jsonhttp.ErrorBody) {
		return func() (int, jsonhttp.ErrorBody) {
			_, status, eb := e.me(h)
			return status, eb
		}
	}
	idpTok := func(edit func(jwt.MapClaims)) func() (int, jsonhttp.ErrorBody) {
		return http1(idp, bearerH(idp.idpToken(tidActive, edit)))
	}
	idpSigned := func(m jwt.SigningMethod, key any, kid string, c jwt.MapClaims, h map[string]any) func() (int, jsonhttp.ErrorBody) {
		return http1(idp, bearerH(authntest.Sign(t, m, key, kid, c, h)))
	}
	hostedTok := func(edit func(jwt.MapClaims)) func() (int, jsonhttp.ErrorBody) {
		return http1(hosted, bearerH(hosted.hostedToken("user-1", edit)))
	}
	ws := func(e *env, q string, h http.Header) func() (int, jsonhttp.ErrorBody) {
		return func() (int, jsonhttp.ErrorBody) { return dial(t, e.wsURL(q), h) }
	}
	noneToken := func() string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodNone, idp.idpClaims(tidActive)).SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tampered := func() string {
		tok := idp.idpToken(tidActive, nil)
		parts := strings.Split(tok, ".")
		other := strings.Split(idp.idpToken(tidOther, nil), ".")
		return parts[0] + "." + other[1] + "." + parts[2]
	}

	// evilTID sets tid and the issuer the template would derive from it, so
	// that only the tid check can refuse the token.
	evilTID := func(tid string) func(jwt.MapClaims) {
		return func(c jwt.MapClaims) {
			c["tid"] = tid
			c["iss"] = strings.ReplaceAll(issuerTemplate, "{tenantid}", tid)
		}
	}

	cases := []struct {
		name   string
		do     func() (int, jsonhttp.ErrorBody)
		status int
		msg    string // exact message, when the spec fixes it
	}{
		{"idp/no Authorization header", http1(idp, nil), 401, ""},
		{"idp/Basic scheme", http1(idp, map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}), 401, ""},
		{"idp/Bearer with no token", http1(idp, map[string]string{"Authorization": "Bearer "}), 401, ""},
		{"idp/not a JWT", http1(idp, bearerH("not.a.jwt")), 401, ""},
		{"idp/alg none", http1(idp, bearerH(noneToken())), 401, ""},
		{"idp/HS256 signed with the RSA public key bytes", idpSigned(jwt.SigningMethodHS256, pubPEM, rsaKid, idp.idpClaims(tidActive), nil), 401, ""},
		{"idp/HS256 signed with the RSA public key DER", idpSigned(jwt.SigningMethodHS256, pub, rsaKid, idp.idpClaims(tidActive), nil), 401, ""},
		{"idp/EdDSA token", idpSigned(jwt.SigningMethodEdDSA, idp.ed, edKid, idp.idpClaims(tidActive), nil), 401, ""},
		{"idp/RS512 token", idpSigned(jwt.SigningMethodRS512, idp.rsa, rsaKid, idp.idpClaims(tidActive), nil), 401, ""},
		{"idp/PS256 token", idpSigned(jwt.SigningMethodPS256, idp.rsa, rsaKid, idp.idpClaims(tidActive), nil), 401, ""},
		{"idp/unknown kid", idpSigned(jwt.SigningMethodRS256, idp.rsa, "no-such-kid", idp.idpClaims(tidActive), nil), 401, ""},
		{"idp/no kid", idpSigned(jwt.SigningMethodRS256, idp.rsa, "", idp.idpClaims(tidActive), nil), 401, ""},
		{"idp/right kid, other key", idpSigned(jwt.SigningMethodRS256, otherRSA, rsaKid, idp.idpClaims(tidActive), nil), 401, ""},
		{"idp/payload of another token", http1(idp, bearerH(tampered())), 401, ""},
		{"idp/crit header", idpSigned(jwt.SigningMethodRS256, idp.rsa, rsaKid, idp.idpClaims(tidActive), map[string]any{"crit": []string{"exp"}}), 401, ""},
		{"idp/expired", idpTok(func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Hour).Unix() }), 401, ""},
		{"idp/iat in the future", idpTok(func(c jwt.MapClaims) { c["iat"] = t0.Add(10 * time.Minute).Unix() }), 401, ""},
		{"idp/nbf in the future", idpTok(func(c jwt.MapClaims) { c["nbf"] = t0.Add(10 * time.Minute).Unix() }), 401, ""},
		{"idp/missing iat", idpTok(func(c jwt.MapClaims) { delete(c, "iat") }), 401, ""},
		{"idp/missing exp", idpTok(func(c jwt.MapClaims) { delete(c, "exp") }), 401, ""},
		{"idp/wrong aud", idpTok(func(c jwt.MapClaims) { c["aud"] = "api://someone-else" }), 401, ""},
		{"idp/aud list with an extra audience", idpTok(func(c jwt.MapClaims) { c["aud"] = []string{audience, "api://x"} }), 401, ""},
		{"idp/missing aud", idpTok(func(c jwt.MapClaims) { delete(c, "aud") }), 401, ""},
		{"idp/wrong iss", idpTok(func(c jwt.MapClaims) { c["iss"] = "https://evil.example/contoso/v2.0" }), 401, ""},
		{"idp/iss of another tenant", idpTok(func(c jwt.MapClaims) { c["iss"] = strings.ReplaceAll(issuerTemplate, "{tenantid}", tidOther) }), 401, ""},
		{"idp/missing tid", idpTok(func(c jwt.MapClaims) { delete(c, "tid") }), 401, ""},
		{"idp/tid with a slash", idpTok(evilTID("contoso/../evil")), 401, ""},
		{"idp/tid with ? and #", idpTok(evilTID("contoso?x#y")), 401, ""},
		{"idp/tid with @ and :", idpTok(evilTID("evil.example:443@contoso")), 401, ""},
		{"idp/tid with a dot segment", idpTok(evilTID("..")), 401, ""},
		{"idp/tid with whitespace", idpTok(evilTID("con toso")), 401, ""},
		{"idp/tid with a percent escape", idpTok(evilTID("contoso%2Fx")), 401, ""},
		{"idp/tid of 65 characters", idpTok(evilTID(strings.Repeat("a", 65))), 401, ""},
		{"idp/oversized token", idpTok(func(c jwt.MapClaims) { c["pad"] = strings.Repeat("x", 9000) }), 401, ""},
		{"idp/no oid and no sub", idpTok(func(c jwt.MapClaims) { delete(c, "oid"); delete(c, "sub") }), 401, ""},
		{"idp/tenant not allowlisted", http1(idp, bearerH(idp.idpToken("stranger", nil))), 403, authn.MsgNotAllowlisted},
		{"idp/tenant suspended", http1(idp, bearerH(idp.idpToken(tidSuspended, nil))), 403, authn.MsgSuspended},
		{"idp/tenant deleted", http1(idp, bearerH(idp.idpToken(tidDeleted, nil))), 403, authn.MsgRemoved},
		{"idp/debug headers are not an idp credential", http1(idp, map[string]string{"X-Debug-Tenant-Id": tidActive, "X-Debug-User-Id": "u"}), 401, ""},

		{"hosted/RS256 token", http1(hosted, bearerH(authntest.Sign(t, jwt.SigningMethodRS256, hosted.rsa, rsaKid, hosted.hostedClaims("u"), nil))), 401, ""},
		{"hosted/idp token", http1(hosted, bearerH(hosted.idpToken(tidActive, nil))), 401, ""},
		{"hosted/wrong iss", hostedTok(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), 401, ""},
		{"hosted/iss with the path of HOSTED_AUTH_URL", hostedTok(func(c jwt.MapClaims) { c["iss"] = hosted.cfg.HostedAuthURL }), 401, ""},
		{"hosted/wrong aud", hostedTok(func(c jwt.MapClaims) { c["aud"] = "https://evil.example" }), 401, ""},
		{"hosted/missing iat", hostedTok(func(c jwt.MapClaims) { delete(c, "iat") }), 401, ""},
		{"hosted/missing exp", hostedTok(func(c jwt.MapClaims) { delete(c, "exp") }), 401, ""},
		{"hosted/expired", hostedTok(func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Minute).Unix() }), 401, ""},
		{"hosted/no sub and no id", hostedTok(func(c jwt.MapClaims) { delete(c, "sub") }), 401, ""},
		{"hosted/crit header", http1(hosted, bearerH(authntest.Sign(t, jwt.SigningMethodEdDSA, hosted.ed, edKid, hosted.hostedClaims("u"), map[string]any{"crit": []string{"b64"}}))), 401, ""},
		{"hosted/unknown kid", http1(hosted, bearerH(authntest.Sign(t, jwt.SigningMethodEdDSA, hosted.ed, "ed-unknown", hosted.hostedClaims("u"), nil))), 401, ""},

		{"dev/HS256 with a wrong secret", http1(devStrict, bearerH(authntest.Sign(t, jwt.SigningMethodHS256, []byte("wrong"), "", jwt.MapClaims{"tid": "t", "oid": "o"}, nil))), 401, ""},
		{"dev/HS256 without oid", http1(devStrict, bearerH(authntest.Sign(t, jwt.SigningMethodHS256, []byte(devSecret), "", jwt.MapClaims{"tid": "t"}, nil))), 401, ""},
		{"dev/HS256 without tid", http1(devStrict, bearerH(authntest.Sign(t, jwt.SigningMethodHS256, []byte(devSecret), "", jwt.MapClaims{"oid": "o"}, nil))), 401, ""},
		{"dev/RS256 token", http1(devStrict, bearerH(authntest.Sign(t, jwt.SigningMethodRS256, devStrict.rsa, rsaKid, jwt.MapClaims{"tid": "t", "oid": "o"}, nil))), 401, ""},
		{"dev/expired HS256", http1(devStrict, bearerH(authntest.Sign(t, jwt.SigningMethodHS256, []byte(devSecret), "", jwt.MapClaims{"tid": "t", "oid": "o", "exp": t0.Add(-time.Hour).Unix()}, nil))), 401, ""},
		{"dev/HS256 iat in the future", http1(devStrict, bearerH(authntest.Sign(t, jwt.SigningMethodHS256, []byte(devSecret), "", jwt.MapClaims{"tid": "t", "oid": "o", "iat": t0.Add(time.Hour).Unix()}, nil))), 401, ""},
		{"dev/HS256 crit header", http1(devStrict, bearerH(authntest.Sign(t, jwt.SigningMethodHS256, []byte(devSecret), "", jwt.MapClaims{"tid": "t", "oid": "o"}, map[string]any{"crit": []string{"x"}}))), 401, ""},
		{"dev/HS256 tid breaking the pattern", http1(devStrict, bearerH(authntest.Sign(t, jwt.SigningMethodHS256, []byte(devSecret), "", jwt.MapClaims{"tid": "a b", "oid": "o"}, nil))), 401, ""},
		{"dev/alg none", http1(devStrict, bearerH(func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"tid": "t", "oid": "o"}).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		}())), 401, ""},
		{"dev/debug headers when ALLOW_DEBUG_AUTH=false", http1(devStrict, map[string]string{"X-Debug-Tenant-Id": "t", "X-Debug-User-Id": "u"}), 401, ""},
		{"dev/no credentials with AUTH_REQUIRED=true", http1(devStrict, nil), 401, ""},

		{"ws/no credentials", ws(idp, "session_id=s1", nil), 401, ""},
		{"ws/workspace_id in the query", ws(idp, "session_id=s1&workspace_id=w1", http.Header{"Authorization": {"Bearer " + idp.idpToken(tidActive, nil)}}), 400, ""},
		{"ws/user_id in the query", ws(idp, "session_id=s1&user_id=u1", http.Header{"Authorization": {"Bearer " + idp.idpToken(tidActive, nil)}}), 400, ""},
		{"ws/empty session_id", ws(idp, "session_id=", http.Header{"Authorization": {"Bearer " + idp.idpToken(tidActive, nil)}}), 400, ""},
		{"ws/session_id with a dot", ws(idp, "session_id=a.b", http.Header{"Authorization": {"Bearer " + idp.idpToken(tidActive, nil)}}), 400, ""},
		{"ws/session_id with a wildcard", ws(idp, "session_id=%3E", http.Header{"Authorization": {"Bearer " + idp.idpToken(tidActive, nil)}}), 400, ""},
		{"ws/unknown query parameter", ws(idp, "session_id=s1&tenant=x", http.Header{"Authorization": {"Bearer " + idp.idpToken(tidActive, nil)}}), 400, ""},
		{"ws/idp access_token with query tokens off", ws(idpNoQuery, "session_id=s1&access_token="+url.QueryEscape(idpNoQuery.idpToken(tidActive, nil)), nil), 401, ""},
		{"ws/idp expired access_token", ws(idp, "session_id=s1&access_token="+url.QueryEscape(idp.idpToken(tidActive, func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Hour).Unix() })), nil), 401, ""},
		{"ws/idp suspended tenant", ws(idp, "session_id=s1&access_token="+url.QueryEscape(idp.idpToken(tidSuspended, nil)), nil), 403, authn.MsgSuspended},
		{"ws/hosted raw JWT in the query", ws(hosted, "session_id=s1&access_token="+url.QueryEscape(hosted.hostedToken("u", nil)), nil), 401, ""},
		{"ws/hosted forged ticket", ws(hosted, "session_id=s1&ticket=wst_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil), 401, ""},
		{"ws/hosted reused ticket", func() (int, jsonhttp.ErrorBody) {
			tr := hosted.ticket(hosted.hostedToken("user-r", nil))
			if status, _ := dial(t, hosted.wsURL("session_id=s1&ticket="+url.QueryEscape(tr.Ticket)), nil); status != 101 {
				t.Errorf("first use of a ticket = %d, want 101", status)
			}
			return dial(t, hosted.wsURL("session_id=s1&ticket="+url.QueryEscape(tr.Ticket)), nil)
		}, 401, ""},
		{"ws/hosted expired ticket", func() (int, jsonhttp.ErrorBody) {
			tr := hosted.ticket(hosted.hostedToken("user-x", nil))
			hosted.clock.Advance(31 * time.Second)
			defer hosted.clock.Advance(-31 * time.Second)
			return dial(t, hosted.wsURL("session_id=s1&ticket="+url.QueryEscape(tr.Ticket)), nil)
		}, 401, ""},
		// Two credentials are ambiguous: 401, before any other query check.
		{"ws/hosted ticket and access_token together", ws(hosted, "session_id=s1&ticket=x&access_token=y", nil), 401, ""},
		{"ws/dev debug parameters with query tokens off", ws(devStrict, "session_id=s1&debug_tenant_id=t&debug_user_id=u", nil), 401, ""},
		{"ws/dev access_token with query tokens off", ws(devStrict, "session_id=s1&access_token="+devStrict.devToken("t", "u"), nil), 401, ""},
		{"ticket/without a token", func() (int, jsonhttp.ErrorBody) {
			status, body := hosted.do("POST", "/api/v1/auth/ws-ticket", nil, "")
			var eb jsonhttp.ErrorBody
			json.Unmarshal(body, &eb)
			return status, eb
		}, 401, ""},
		{"ticket/with a body", func() (int, jsonhttp.ErrorBody) {
			status, body := hosted.do("POST", "/api/v1/auth/ws-ticket", bearerH(hosted.hostedToken("u", nil)), `{"ttl": 3600}`)
			var eb jsonhttp.ErrorBody
			json.Unmarshal(body, &eb)
			return status, eb
		}, 400, ""},
		{"ticket/expired token", func() (int, jsonhttp.ErrorBody) {
			status, body := hosted.do("POST", "/api/v1/auth/ws-ticket", bearerH(hosted.hostedToken("u", func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Hour).Unix() })), "")
			var eb jsonhttp.ErrorBody
			json.Unmarshal(body, &eb)
			return status, eb
		}, 401, ""},
	}
	names := map[int]string{400: "ValidationError", 401: "UnauthorizedError", 403: "ForbiddenError", 503: "ServiceUnavailableError"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, eb := tc.do()
			if status != tc.status {
				t.Fatalf("%s: status = %d (%+v), want %d", tc.name, status, eb, tc.status)
			}
			if eb.Error != names[tc.status] {
				t.Errorf("%s: error = %q, want %q", tc.name, eb.Error, names[tc.status])
			}
			if eb.Message == "" {
				t.Errorf("%s: empty error message", tc.name)
			}
			if tc.msg != "" && eb.Message != tc.msg {
				t.Errorf("%s: message = %q, want %q", tc.name, eb.Message, tc.msg)
			}
		})
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
}
