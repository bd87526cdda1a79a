package main

import (
	"encoding/base64"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/turnledger/turnledger/authn/devissuer"
	"github.com/turnledger/turnledger/authn/webclient"
	"github.com/turnledger/turnledger/internal/browsertest"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// hostedPair starts a dev issuer and a hosted-mode runtime whose web client
// was "built" for that issuer, and returns the runtime's base URL. The
// issuer's listener is bound first (its origin goes into the runtime and the
// client); it is served once the runtime's origin, its one redirect origin,
// is known.
func hostedPair(t *testing.T, ttl time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuerURL := "http://" + ln.Addr().String()
	old := webclient.HostedAuthURL
	webclient.HostedAuthURL = issuerURL // the build-time setting
	t.Cleanup(func() { webclient.HostedAuthURL = old })

	db := filepath.Join(t.TempDir(), "rt.db")
	if code, out := tenantsRun(t, nil, "add", "--idp-tenant-id", "default", "--db", db); code != 0 {
		t.Fatalf("tenants add = %d %q", code, out)
	}
	base := rtStart(t, []string{"--addr", "127.0.0.1:0", "--db", db}, map[string]string{
		"APP_ENV": "local", "AUTH_MODE": "hosted", "HOSTED_AUTH_URL": issuerURL,
		"SECRET_ENCRYPTION_KEY": base64.StdEncoding.EncodeToString(make([]byte, 32)),
	})
	iss, err := devissuer.New(devissuer.Config{Origin: issuerURL, RedirectOrigins: []string{base}, TokenTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: iss, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return base
}

// signUp drives the sign-up from the client's sign-in page through the
// issuer and back, to a connected workspace.
func signUp(t *testing.T, b *browsertest.Browser, base, email string) {
	t.Helper()
	b.Navigate(t, base+"/app/")
	b.Click(t, "#sign-up")
	b.WaitVisible(t, "#email")
	b.Do(t,
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#name"), "Ada Lovelace"),
		chromedp.Click(chromedp.CSS("#submit")),
	)
	b.WaitVisible(t, "#ws-state.state-connected")
}

func apiRequests(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if strings.Contains(r, "/api/") {
			out = append(out, r)
		}
	}
	return out
}

// wsSessionID is the form of a session id the server makes.
var wsSessionID = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// TestWebClientInChromium: sign up through the dev issuer, land on
// /app/workspace, see the identity, the websocket connected through a ticket
// on a session of the tab's own (made by the server, kept across a reload,
// a new one after signing in again), save a profile and see its key masked;
// sign out and find the cached data gone: storage empty, no request for it
// afterwards. The token lives 30 days, longer than setTimeout's longest
// delay (2^31-1 ms, about 24.8 days): the page must not take that for an
// expiry and sign out at once.
func TestWebClientInChromium(t *testing.T) {
	base := hostedPair(t, 30*24*time.Hour)
	b := browsertest.Start(t, browsertest.Options{})
	signUp(t, b, base, "ada@example.com")

	if got := b.Location(t); got != base+"/app/workspace" {
		t.Errorf("after sign-up the page is %s, want %s/app/workspace", got, base)
	}
	firstUser := b.Text(t, `#identity dd[data-field="User id"]`)
	if len(firstUser) != 36 {
		t.Errorf("user id shown = %q, want a UUID", firstUser)
	}
	identity := b.Text(t, "#identity")
	for _, want := range []string{"ada@example.com", "Ada Lovelace", "default"} {
		if !strings.Contains(identity, want) {
			t.Errorf("identity shows %q, want it to contain %q", identity, want)
		}
	}
	reqs := b.Requests()
	if !slices.Contains(reqs, "POST "+base+"/api/v1/auth/ws-ticket") {
		t.Errorf("requests %v lack POST ws-ticket", reqs)
	}
	var ws []string
	for _, r := range reqs {
		if strings.HasPrefix(r, "WS ") {
			ws = append(ws, r)
		}
		if strings.Contains(r, "access_token") || strings.Contains(r, "eyJ") && strings.HasPrefix(r, "WS ") {
			t.Errorf("request %q carries a token", r)
		}
	}
	// The first dial names no session: the server makes one and announces
	// it, and the page uses that one.
	if len(ws) != 1 || !strings.Contains(ws[0], "/api/v1/ws/execution?ticket=wst_") {
		t.Errorf("websockets opened = %v, want one with a ticket and no session_id", ws)
	}
	sid := b.Text(t, "#ws-session")
	if !wsSessionID.MatchString(sid) {
		t.Errorf("session shown = %q, want one made by the server", sid)
	}

	// A message goes through the websocket and comes back on the session.
	b.Do(t, chromedp.SendKeys(chromedp.CSS("#message"), "hello"), chromedp.Click(chromedp.CSS("#send")))
	b.WaitVisible(t, "#messages li")
	if got := b.Text(t, "#messages li"); !strings.Contains(got, "hello") {
		t.Errorf("message shown = %q, want hello", got)
	}
	if got := b.Location(t); got != base+"/app/workspace" {
		t.Errorf("with a 30-day token the page went to %s, want it to stay on %s/app/workspace", got, base)
	}

	// A reload rejoins the tab's session.
	b.Navigate(t, base+"/app/workspace")
	b.WaitVisible(t, "#ws-state.state-connected")
	if got := b.Text(t, "#ws-session"); got != sid {
		t.Errorf("session after a reload = %q, want %q", got, sid)
	}
	var rejoined []string
	for _, r := range b.Requests() {
		if strings.HasPrefix(r, "WS ") {
			rejoined = append(rejoined, r)
		}
	}
	if len(rejoined) != 2 || !strings.Contains(rejoined[1], "/api/v1/ws/execution?session_id="+sid+"&ticket=wst_") {
		t.Errorf("websockets opened = %v, want the second on session %s", rejoined, sid)
	}

	// Save a profile: the key is write-only and shown masked.
	const key = "sk-test-1234567890abcdef"
	b.Do(t,
		chromedp.SendKeys(chromedp.CSS("#profile-provider"), "openai"),
		chromedp.SendKeys(chromedp.CSS("#profile-model"), "gpt-test"),
		chromedp.SendKeys(chromedp.CSS("#profile-api-key"), key),
		chromedp.Click(chromedp.CSS("#profile-save")),
	)
	b.WaitVisible(t, `#profiles tr[data-provider="openai"]`)
	if got := b.Text(t, `#profiles tr[data-provider="openai"] .key`); got != "••••cdef" {
		t.Errorf("saved profile's key shows %q, want ••••cdef", got)
	}
	if html := browsertest.Eval[string](t, b, "document.documentElement.outerHTML + JSON.stringify(sessionStorage)"); strings.Contains(html, key) {
		t.Errorf("the page or its storage holds the plaintext key")
	}
	if n := browsertest.Eval[int](t, b, "sessionStorage.length"); n < 2 {
		t.Errorf("sessionStorage has %d entries before sign-out, want the session and cached queries", n)
	}
	b.Screenshot(t, "workspace")

	// Sign out: the page leaves at once, storage is empty, and no request
	// for the cached data follows, not even on coming back to the workspace.
	before := len(b.Requests())
	b.Click(t, "#sign-out")
	b.WaitVisible(t, "#sign-in")
	if got := b.Location(t); got != base+"/app/?reason=signed-out" {
		t.Errorf("after sign-out the page is %s", got)
	}
	if n := browsertest.Eval[int](t, b, "sessionStorage.length + Object.keys(localStorage).length"); n != 0 {
		t.Errorf("storage after sign-out has %d entries, want 0", n)
	}
	b.Navigate(t, base+"/app/workspace")
	b.WaitVisible(t, "#sign-in")
	if got := b.Location(t); got != base+"/app/" {
		t.Errorf("the workspace without a session went to %s, want %s/app/", got, base)
	}
	if body := b.Text(t, "body"); strings.Contains(body, "ada@example.com") {
		t.Errorf("after sign-out the page still shows the identity: %q", body)
	}
	if after := apiRequests(b.Requests()[before:]); len(after) != 0 {
		t.Errorf("requests to the API after sign-out: %v", after)
	}

	// Signing in again (not up) is the same user, with the profile kept.
	userID := func() string { return b.Text(t, `#identity dd[data-field="User id"]`) }
	b.Click(t, "#sign-in")
	b.WaitVisible(t, "#email")
	b.Do(t, chromedp.SendKeys(chromedp.CSS("#email"), "ada@example.com"), chromedp.Click(chromedp.CSS("#submit")))
	b.WaitVisible(t, "#ws-state.state-connected")
	b.WaitVisible(t, `#profiles tr[data-provider="openai"]`)
	if got := userID(); got != firstUser {
		t.Errorf("user id after signing in again = %s, want %s", got, firstUser)
	}
	// The session went with the sign-out: a new one is made.
	if got := b.Text(t, "#ws-session"); !wsSessionID.MatchString(got) || got == sid {
		t.Errorf("session after signing in again = %q, want a new one (not %q)", got, sid)
	}
}

// TestWebClientTokenExpiry: a token that expires while the workspace is
// open sends the user to the sign-in page with the session cleared.
func TestWebClientTokenExpiry(t *testing.T) {
	base := hostedPair(t, 4*time.Second)
	b := browsertest.Start(t, browsertest.Options{})
	signUp(t, b, base, "grace@example.com")
	checkfor.Until(t, 30*time.Second, "the expired session to return to sign-in", func() bool {
		return strings.HasPrefix(b.Location(t), base+"/app/?reason=expired")
	})
	b.WaitVisible(t, "#sign-in")
	if got := b.Text(t, "#notice"); !strings.Contains(got, "expired") {
		t.Errorf("notice = %q, want it to say the session expired", got)
	}
	if n := browsertest.Eval[int](t, b, "sessionStorage.length"); n != 0 {
		t.Errorf("sessionStorage after expiry has %d entries, want 0", n)
	}
}
