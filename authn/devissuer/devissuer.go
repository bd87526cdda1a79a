// Package devissuer is a local stand-in for the hosted auth provider of
// AUTH_MODE=hosted, for trying hosted mode on a laptop (as Dex or a mock
// OAuth server are used in development). `turnledger runtime dev-issuer`
// serves it on loopback and refuses to start outside APP_ENV=local.
//
// It keeps accounts in memory (an email and a name; no passwords: anyone
// who can reach it can be anyone) and signs EdDSA (Ed25519) tokens with a
// key drawn at start, with iss and aud set to its own origin, sub the
// account's id, email, name, iat and exp.
//
// Protocol (redirect-based, like the implicit flow):
//
//	GET  /sign-in?redirect_uri=U   the sign-in page (an email)
//	GET  /sign-up?redirect_uri=U   the sign-up page (an email and a name)
//	POST /sign-in, /sign-up        form fields email, name, redirect_uri;
//	                               303 to U#access_token=T&token_type=Bearer&expires_in=S
//	POST /sign-out                 204; tokens are not revocable, the client forgets them
//	GET  /.well-known/jwks.json    the public key set
//
// U must be an absolute http(s) URL whose origin is one of the configured
// redirect origins; anything else is refused, so the stand-in never hands a
// token to a page it was not told about. The token travels in the fragment,
// which browsers do not send to servers.
package devissuer

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/internal/graceful"
)

// Config configures an Issuer.
type Config struct {
	Origin          string        // the issuer's own origin, e.g. http://127.0.0.1:8091: iss and aud
	RedirectOrigins []string      // origins a redirect_uri may have
	TokenTTL        time.Duration // lifetime of a token; default 1 h
	Now             func() time.Time
	Rand            io.Reader
}

// Issuer serves the sign-in and sign-up pages and the key set.
type Issuer struct {
	cfg  Config
	key  ed25519.PrivateKey
	kid  string
	mux  *http.ServeMux
	mu   sync.Mutex
	accs map[string]account // by email
}

type account struct {
	ID, Email, Name string
}

// New makes an Issuer with a fresh signing key.
func New(cfg Config) (*Issuer, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.TokenTTL == 0 {
		cfg.TokenTTL = time.Hour
	}
	if origin, err := originOf(cfg.Origin); err != nil || origin != cfg.Origin {
		return nil, fmt.Errorf("issuer origin %q must be scheme://host[:port] with no path", cfg.Origin)
	}
	for _, o := range cfg.RedirectOrigins {
		if origin, err := originOf(o); err != nil || origin != o {
			return nil, fmt.Errorf("redirect origin %q must be scheme://host[:port] with no path", o)
		}
	}
	_, key, err := ed25519.GenerateKey(cfg.Rand)
	if err != nil {
		return nil, fmt.Errorf("draw signing key: %w", err)
	}
	sum := sha256.Sum256(key.Public().(ed25519.PublicKey))
	i := &Issuer{cfg: cfg, key: key, kid: base64.RawURLEncoding.EncodeToString(sum[:8]), accs: map[string]account{}}
	m := http.NewServeMux()
	m.HandleFunc("GET /.well-known/jwks.json", i.jwks)
	m.HandleFunc("GET /sign-in", i.page("sign-in"))
	m.HandleFunc("GET /sign-up", i.page("sign-up"))
	m.HandleFunc("POST /sign-in", i.submit("sign-in"))
	m.HandleFunc("POST /sign-up", i.submit("sign-up"))
	m.HandleFunc("POST /sign-out", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "turnledger dev-issuer (local only): a stand-in for the hosted auth provider.\nSign in at %s/sign-in?redirect_uri=<one of %v>\n", cfg.Origin, cfg.RedirectOrigins)
	})
	i.mux = m
	return i, nil
}

// ServeHTTP serves the issuer's routes.
// Serve serves the issuer on ln until ctx ends, then shuts down within 5 s.
func (i *Issuer) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: i, ReadHeaderTimeout: 10 * time.Second}
	graceful.CloseFreshConns(hs) // a client's spare connection does not hold the stop up
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

func (i *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	i.mux.ServeHTTP(w, r)
}

func originOf(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", errors.New("not an http(s) URL")
	}
	return u.Scheme + "://" + u.Host, nil
}

func (i *Issuer) jwks(w http.ResponseWriter, r *http.Request) {
	pub := i.key.Public().(ed25519.PublicKey)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
		"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": i.kid,
		"x": base64.RawURLEncoding.EncodeToString(pub),
	}}})
}

// redirectURI checks a redirect_uri against the configured origins.
func (i *Issuer) redirectURI(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() {
		return nil, errors.New("redirect_uri must be an absolute URL")
	}
	origin, err := originOf(s)
	if err != nil || !slices.Contains(i.cfg.RedirectOrigins, origin) {
		return nil, fmt.Errorf("redirect_uri origin is not one this issuer was started with (--redirect-origin %v)", i.cfg.RedirectOrigins)
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return nil, errors.New("redirect_uri must not have a fragment")
	}
	return u, nil
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · turnledger dev-issuer</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px system-ui,sans-serif;max-width:26rem;margin:4rem auto;padding:0 1rem}label{display:block;margin:.8rem 0}input{display:block;width:100%;padding:.4rem;font:inherit}button{margin-top:1rem;padding:.5rem 1rem;font:inherit}.err{color:#a00}small{color:#666}</style>
</head><body>
<h1>{{.Title}}</h1>
<p><small>turnledger dev-issuer: a local stand-in for the hosted auth provider. No passwords: for development only.</small></p>
{{if .Error}}<p class="err" id="error">{{.Error}}</p>{{end}}
{{if .RedirectURI}}<form method="post" action="/{{.Action}}">
<input type="hidden" name="redirect_uri" value="{{.RedirectURI}}">
<label>Email <input id="email" name="email" type="email" required autocomplete="email" value="{{.Email}}"></label>
{{if eq .Action "sign-up"}}<label>Name <input id="name" name="name" autocomplete="name" value="{{.Name}}"></label>{{end}}
<button id="submit" type="submit">{{.Title}}</button>
</form>
{{if eq .Action "sign-in"}}<p>No account? <a id="other" href="/sign-up?redirect_uri={{.RedirectURI}}">Sign up</a></p>{{else}}<p>Have an account? <a id="other" href="/sign-in?redirect_uri={{.RedirectURI}}">Sign in</a></p>{{end}}
{{end}}
</body></html>
`))

type pageData struct {
	Title, Action, RedirectURI, Error, Email, Name string
}

func (i *Issuer) render(w http.ResponseWriter, status int, d pageData) {
	d.Title = map[string]string{"sign-in": "Sign in", "sign-up": "Sign up"}[d.Action]
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	pageTmpl.Execute(w, d)
}

func (i *Issuer) page(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw := r.URL.Query().Get("redirect_uri")
		if _, err := i.redirectURI(raw); err != nil {
			i.render(w, http.StatusBadRequest, pageData{Action: action, Error: err.Error()})
			return
		}
		i.render(w, http.StatusOK, pageData{Action: action, RedirectURI: raw})
	}
}

func (i *Issuer) submit(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			i.render(w, http.StatusBadRequest, pageData{Action: action, Error: "the form could not be read"})
			return
		}
		raw := r.PostForm.Get("redirect_uri")
		u, err := i.redirectURI(raw)
		if err != nil {
			i.render(w, http.StatusBadRequest, pageData{Action: action, Error: err.Error()})
			return
		}
		email := strings.TrimSpace(r.PostForm.Get("email"))
		name := strings.TrimSpace(r.PostForm.Get("name"))
		d := pageData{Action: action, RedirectURI: raw, Email: email, Name: name}
		if a, err := mail.ParseAddress(email); err != nil || a.Address != email || len(email) > 254 || len(name) > 200 {
			d.Error = "give an email address (and a name of at most 200 characters)"
			i.render(w, http.StatusBadRequest, d)
			return
		}
		key := strings.ToLower(email)
		i.mu.Lock()
		acc, exists := i.accs[key]
		switch {
		case action == "sign-up" && exists:
			d.Error = "an account with this email exists: sign in instead"
		case action == "sign-in" && !exists:
			d.Error = "no account with this email: sign up first"
		case action == "sign-up":
			id, err := authn.NewUUID(i.cfg.Rand)
			if err != nil {
				d.Error = "could not create the account"
				break
			}
			acc = account{ID: id, Email: email, Name: name}
			i.accs[key] = acc
		}
		i.mu.Unlock()
		if d.Error != "" {
			i.render(w, http.StatusOK, d)
			return
		}
		tok, err := i.Token(acc.ID, acc.Email, acc.Name)
		if err != nil {
			i.render(w, http.StatusInternalServerError, pageData{Action: action, Error: "could not sign the token"})
			return
		}
		frag := url.Values{"access_token": {tok}, "token_type": {"Bearer"}, "expires_in": {strconv.Itoa(int(i.cfg.TokenTTL / time.Second))}}
		u.Fragment = ""
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, u.String()+"#"+frag.Encode(), http.StatusSeeOther)
	}
}

// Token signs a token for the account sub.
func (i *Issuer) Token(sub, email, name string) (string, error) {
	now := i.cfg.Now()
	claims := jwt.MapClaims{
		"iss": i.cfg.Origin, "aud": i.cfg.Origin, "sub": sub,
		"iat": now.Unix(), "exp": now.Add(i.cfg.TokenTTL).Unix(),
	}
	if email != "" {
		claims["email"] = email
	}
	if name != "" {
		claims["name"] = name
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["kid"] = i.kid
	return t.SignedString(i.key)
}
