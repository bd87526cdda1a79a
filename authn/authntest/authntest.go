// Package authntest holds the real parts authn's tests run against: a JWKS
// server on loopback, token minting, a settable clock, the embedded NATS
// server and a bbolt store in a temporary directory.
package authntest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/turnledger/turnledger/authn/boltstore"
	"github.com/turnledger/turnledger/authn/natsbus"
)

// Clock is a settable clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Behaviour of a JWKS server.
type Behaviour int

// Behaviours.
const (
	Serve   Behaviour = iota // serve the key set
	Down                     // answer 502
	Garbage                  // answer 200 with a body that is not JSON
	Slow                     // answer nothing until the client gives up
	Empty                    // answer {"keys":[]}
)

// JWKS is a key set server on loopback. It serves its keys at every path,
// so it stands for both IDP_JWKS_URL and <HOSTED_AUTH_URL>/.well-known/jwks.json.
type JWKS struct {
	Server *httptest.Server

	mu        sync.Mutex
	keys      []map[string]string
	behaviour Behaviour
	fetches   atomic.Int64
	entered   chan struct{}
	release   chan struct{}
	stop      chan struct{}
}

// NewJWKS starts an empty key set server, closed at the end of the test.
func NewJWKS(t testing.TB) *JWKS {
	t.Helper()
	j := &JWKS{stop: make(chan struct{})}
	j.Server = httptest.NewServer(http.HandlerFunc(j.serve))
	t.Cleanup(func() {
		close(j.stop)
		j.Server.Close()
	})
	return j
}

func (j *JWKS) serve(w http.ResponseWriter, r *http.Request) {
	j.fetches.Add(1)
	j.mu.Lock()
	b, keys, entered, release := j.behaviour, j.keys, j.entered, j.release
	j.mu.Unlock()
	if entered != nil {
		select {
		case entered <- struct{}{}:
		default:
		}
	}
	if release != nil {
		select {
		case <-release:
		case <-j.stop:
			return
		}
	}
	switch b {
	case Down:
		http.Error(w, "bad gateway", http.StatusBadGateway)
	case Garbage:
		w.Write([]byte("<html>this is not a key set</html>"))
	case Slow:
		select {
		case <-r.Context().Done():
		case <-j.stop:
		}
	case Empty:
		w.Write([]byte(`{"keys":[]}`))
	default:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	}
}

// URL is the server's base URL.
func (j *JWKS) URL() string { return j.Server.URL }

// Fetches counts requests served so far.
func (j *JWKS) Fetches() int64 { return j.fetches.Load() }

// Set changes the behaviour.
func (j *JWKS) Set(b Behaviour) {
	j.mu.Lock()
	j.behaviour = b
	j.mu.Unlock()
}

// Gate makes each request wait until release is closed, signalling entered
// (non-blocking) first. Gate(nil, nil) removes it.
func (j *JWKS) Gate(entered chan struct{}, release chan struct{}) {
	j.mu.Lock()
	j.entered, j.release = entered, release
	j.mu.Unlock()
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// PutRSA publishes the public half of key under kid (replacing the keys
// with the same kid).
func (j *JWKS) PutRSA(kid string, key *rsa.PrivateKey) {
	j.put(map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())})
}

// PutEd25519 publishes the public half of key under kid.
func (j *JWKS) PutEd25519(kid string, key ed25519.PrivateKey) {
	j.put(map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig", "alg": "EdDSA",
		"x": b64(key.Public().(ed25519.PublicKey))})
}

func (j *JWKS) put(k map[string]string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	kept := j.keys[:0:0]
	for _, old := range j.keys {
		if old["kid"] != k["kid"] {
			kept = append(kept, old)
		}
	}
	j.keys = append(kept, k)
}

// Remove withdraws kid.
func (j *JWKS) Remove(kid string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	kept := j.keys[:0:0]
	for _, old := range j.keys {
		if old["kid"] != kid {
			kept = append(kept, old)
		}
	}
	j.keys = kept
}

var (
	rsaOnce sync.Once
	rsaKeys [3]*rsa.PrivateKey
)

// RSAKey returns one of three 2048-bit keys generated once per test binary.
func RSAKey(t testing.TB, i int) *rsa.PrivateKey {
	t.Helper()
	rsaOnce.Do(func() {
		for n := range rsaKeys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			rsaKeys[n] = k
		}
	})
	return rsaKeys[i]
}

// Ed25519Key returns a fresh Ed25519 key.
func Ed25519Key(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("ed25519.GenerateKey: %v", err)
	}
	return k
}

// Sign mints a token with method and key; kid goes into the header when not
// empty, and header entries are added as given.
func Sign(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign token: %v", err)
	}
	return s
}

// StartNATS starts the embedded NATS server on a loopback random port and
// returns its URL.
func StartNATS(t testing.TB) string {
	t.Helper()
	ns, err := natsbus.StartEmbedded()
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

// OpenStore opens a bbolt store in a temporary directory.
func OpenStore(t testing.TB) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "runtime.db"), boltstore.Options{})
	if err != nil {
		t.Fatalf("boltstore.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
