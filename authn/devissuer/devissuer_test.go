package devissuer_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/authn/devissuer"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const app = "http://127.0.0.1:8090"

func start(t *testing.T) (*httptest.Server, *http.Client) {
	t.Helper()
	var iss *devissuer.Issuer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { iss.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	var err error
	iss, err = devissuer.New(devissuer.Config{Origin: srv.URL, RedirectOrigins: []string{app}, TokenTTL: 10 * time.Minute, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return srv, c
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestNewRefusesBadOrigins(t *testing.T) {
	for _, c := range []devissuer.Config{
		{Origin: "http://127.0.0.1:1/path"},
		{Origin: "ftp://127.0.0.1:1"},
		{Origin: "http://127.0.0.1:1", RedirectOrigins: []string{"http://x/app"}},
	} {
		if _, err := devissuer.New(c); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", c)
		}
	}
}

// TestSignUpThenSignIn follows the protocol: sign up, get a token in the
// redirect's fragment, check it against the key set; sign in again as the
// same account gets the same sub.
func TestSignUpThenSignIn(t *testing.T) {
	srv, c := start(t)
	resp, body := post(t, c, srv.URL+"/sign-up", url.Values{"email": {"ada@example.com"}, "name": {"Ada"}, "redirect_uri": {app + "/app/callback"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /sign-up = %d %s", resp.StatusCode, body)
	}
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != app+"/app/callback" {
		t.Errorf("redirect to %s, want %s/app/callback", got, app)
	}
	frag, _ := url.ParseQuery(loc.Fragment)
	if frag.Get("token_type") != "Bearer" || frag.Get("expires_in") != "600" {
		t.Errorf("fragment = %v", frag)
	}

	// The key set verifies the token; iss and aud are the issuer's origin.
	kr, err := c.Get(srv.URL + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	var set struct{ Keys []map[string]string }
	json.NewDecoder(kr.Body).Decode(&set)
	kr.Body.Close()
	if len(set.Keys) != 1 || set.Keys[0]["kty"] != "OKP" || set.Keys[0]["crv"] != "Ed25519" {
		t.Fatalf("key set = %+v", set)
	}
	x, _ := base64.RawURLEncoding.DecodeString(set.Keys[0]["x"])
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(frag.Get("access_token"), claims, func(tk *jwt.Token) (any, error) {
		if tk.Header["kid"] != set.Keys[0]["kid"] {
			t.Errorf("token kid = %v, want %s", tk.Header["kid"], set.Keys[0]["kid"])
		}
		return ed25519.PublicKey(x), nil
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithTimeFunc(func() time.Time { return t0 }))
	if err != nil || !tok.Valid {
		t.Fatalf("token does not verify: %v", err)
	}
	sub, _ := claims["sub"].(string)
	want := jwt.MapClaims{"iss": srv.URL, "aud": srv.URL, "sub": sub, "email": "ada@example.com", "name": "Ada", "iat": float64(t0.Unix()), "exp": float64(t0.Add(10 * time.Minute).Unix())}
	if diff := cmp.Diff(want, claims); diff != "" || sub == "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}

	resp, _ = post(t, c, srv.URL+"/sign-in", url.Values{"email": {"ada@example.com"}, "redirect_uri": {app + "/app/callback"}})
	loc, _ = url.Parse(resp.Header.Get("Location"))
	frag, _ = url.ParseQuery(loc.Fragment)
	again := jwt.MapClaims{}
	jwt.NewParser().ParseUnverified(frag.Get("access_token"), again)
	if again["sub"] != sub {
		t.Errorf("sign-in sub = %v, want the sign-up's %s", again["sub"], sub)
	}
}

func TestRefusals(t *testing.T) {
	srv, c := start(t)
	post(t, c, srv.URL+"/sign-up", url.Values{"email": {"ada@example.com"}, "redirect_uri": {app + "/"}})
	cases := []struct {
		path string
		form url.Values
		want string
	}{
		{"/sign-in", url.Values{"email": {"bob@example.com"}, "redirect_uri": {app + "/"}}, "no account with this email"},
		{"/sign-up", url.Values{"email": {"ADA@example.com"}, "redirect_uri": {app + "/"}}, "an account with this email exists"},
		{"/sign-up", url.Values{"email": {"not an email"}, "redirect_uri": {app + "/"}}, "give an email address"},
		{"/sign-in", url.Values{"email": {"ada@example.com"}, "redirect_uri": {"http://evil.example/steal"}}, "redirect_uri origin is not one"},
		{"/sign-in", url.Values{"email": {"ada@example.com"}, "redirect_uri": {"/relative"}}, "must be an absolute URL"},
		{"/sign-in", url.Values{"email": {"ada@example.com"}, "redirect_uri": {app + "/#x"}}, "must not have a fragment"},
	}
	for _, tc := range cases {
		resp, body := post(t, c, srv.URL+tc.path, tc.form)
		if resp.StatusCode == http.StatusSeeOther || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %v = %d (Location %q), want a page saying %q", tc.path, tc.form, resp.StatusCode, resp.Header.Get("Location"), tc.want)
		}
	}
	resp, err := c.Get(srv.URL + "/sign-in?redirect_uri=" + url.QueryEscape("https://elsewhere.example/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /sign-in with a foreign redirect_uri = %d, want 400", resp.StatusCode)
	}
	resp, _ = c.Get(srv.URL + "/sign-up?redirect_uri=" + url.QueryEscape(app+"/app/callback"))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `name="email"`) {
		t.Errorf("GET /sign-up = %d %s", resp.StatusCode, b)
	}
}

// Serve stops cleanly while a client holds a connection it sent nothing on
// (a spare dial), which net/http counts busy for the five seconds Serve
// gives its stop.
func TestServeStopsWithAClientsSpareConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	iss, err := devissuer.New(devissuer.Config{Origin: "http://" + ln.Addr().String(), RedirectOrigins: []string{app}, TokenTTL: 10 * time.Minute, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- iss.Serve(ctx, ln) }()
	spare, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	// Connections are accepted in order: once a later one is answered, the
	// spare one is the server's.
	resp, err := http.Get("http://" + ln.Addr().String() + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve after its context ended = %v, want nil", err)
	}
}
