package authn_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/authntest"
)

func newKeySet(t *testing.T, j *authntest.JWKS, typ authn.KeyType, clock *authntest.Clock) *authn.KeySet {
	t.Helper()
	return authn.NewKeySet(authn.KeySetConfig{
		URL: j.URL() + "/keys", Type: typ, Client: &http.Client{Timeout: 300 * time.Millisecond},
		Now: clock.Now, TTL: 300 * time.Second, RefetchEvery: 10 * time.Second,
	})
}

func TestKeySetExpiry(t *testing.T) {
	j := authntest.NewJWKS(t)
	j.PutRSA("k1", authntest.RSAKey(t, 0))
	clock := authntest.NewClock(t0)
	ks := newKeySet(t, j, authn.KeyRSA, clock)
	ctx := context.Background()

	steps := []struct {
		advance time.Duration
		fetches int64
	}{
		{0, 1},                 // first use fetches
		{299 * time.Second, 1}, // still cached
		{time.Second, 2},       // 300 s: expired, fetched again
		{200 * time.Second, 2}, // cached
		{100 * time.Second, 3}, // expired again
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		key, err := ks.Key(ctx, "k1")
		if err != nil {
			t.Fatalf("step %d: Key(k1) error %v", i, err)
		}
		if _, ok := key.(*rsa.PublicKey); !ok {
			t.Fatalf("step %d: Key(k1) = %T, want *rsa.PublicKey", i, key)
		}
		if got := j.Fetches(); got != s.fetches {
			t.Errorf("step %d (t0+%v): fetches = %d, want %d", i, clock.Now().Sub(t0), got, s.fetches)
		}
	}
}

func TestKeySetRotation(t *testing.T) {
	j := authntest.NewJWKS(t)
	j.PutRSA("old", authntest.RSAKey(t, 0))
	clock := authntest.NewClock(t0)
	ks := newKeySet(t, j, authn.KeyRSA, clock)
	ctx := context.Background()

	if _, err := ks.Key(ctx, "old"); err != nil {
		t.Fatalf("Key(old): %v", err)
	}
	// The provider rotates: a new kid is published. It is picked up before
	// the TTL, at the cost of one fetch.
	clock.Advance(20 * time.Second)
	j.PutRSA("new", authntest.RSAKey(t, 1))
	j.Remove("old")
	if _, err := ks.Key(ctx, "new"); err != nil {
		t.Fatalf("Key(new) after rotation: %v", err)
	}
	if got := j.Fetches(); got != 2 {
		t.Errorf("fetches after rotation = %d, want 2", got)
	}
	// Unknown kids do not refetch more than once per RefetchEvery.
	for range 20 {
		if _, err := ks.Key(ctx, "forged"); !errors.Is(err, authn.ErrUnknownKey) {
			t.Fatalf("Key(forged) error = %v, want ErrUnknownKey", err)
		}
	}
	if got := j.Fetches(); got != 2 {
		t.Errorf("fetches after 20 unknown kids within 10 s = %d, want 2", got)
	}
	clock.Advance(10 * time.Second)
	if _, err := ks.Key(ctx, "forged"); !errors.Is(err, authn.ErrUnknownKey) {
		t.Fatalf("Key(forged) error = %v, want ErrUnknownKey", err)
	}
	if got := j.Fetches(); got != 3 {
		t.Errorf("fetches after the refetch interval = %d, want 3", got)
	}
	// The old key is gone from the fresh set.
	if _, err := ks.Key(ctx, "old"); !errors.Is(err, authn.ErrUnknownKey) {
		t.Errorf("Key(old) after it was withdrawn: error = %v, want ErrUnknownKey", err)
	}
}

func TestKeySetUnavailableIsNotUnknownKid(t *testing.T) {
	j := authntest.NewJWKS(t)
	j.PutRSA("k1", authntest.RSAKey(t, 0))
	clock := authntest.NewClock(t0)
	ks := newKeySet(t, j, authn.KeyRSA, clock)
	ctx := context.Background()

	j.Set(authntest.Down)
	if _, err := ks.Key(ctx, "k1"); !errors.Is(err, authn.ErrKeySetUnavailable) {
		t.Fatalf("Key(k1) with the endpoint down: error = %v, want ErrKeySetUnavailable", err)
	}
	// A failure is remembered for the refetch interval: no hammering.
	for range 5 {
		ks.Key(ctx, "k1")
	}
	if got := j.Fetches(); got != 1 {
		t.Errorf("fetches while down within 10 s = %d, want 1", got)
	}
	clock.Advance(10 * time.Second)
	j.Set(authntest.Serve)
	if _, err := ks.Key(ctx, "k1"); err != nil {
		t.Fatalf("Key(k1) after recovery: %v", err)
	}
	// Keys held and fresh, endpoint down: an unknown kid is still 401, not 503.
	j.Set(authntest.Down)
	clock.Advance(10 * time.Second)
	if _, err := ks.Key(ctx, "k2"); !errors.Is(err, authn.ErrUnknownKey) {
		t.Errorf("Key(k2) with fresh keys and the endpoint down: error = %v, want ErrUnknownKey", err)
	}
	if _, err := ks.Key(ctx, "k1"); err != nil {
		t.Errorf("Key(k1) with fresh keys and the endpoint down: %v", err)
	}
	// Once the keys expire and the endpoint is still down: 503.
	clock.Advance(300 * time.Second)
	if _, err := ks.Key(ctx, "k1"); !errors.Is(err, authn.ErrKeySetUnavailable) {
		t.Errorf("Key(k1) with expired keys and the endpoint down: error = %v, want ErrKeySetUnavailable", err)
	}
}

func TestKeySetTypes(t *testing.T) {
	j := authntest.NewJWKS(t)
	j.PutRSA("r", authntest.RSAKey(t, 0))
	j.PutEd25519("e", authntest.Ed25519Key(t))
	clock := authntest.NewClock(t0)
	ctx := context.Background()

	rs := newKeySet(t, j, authn.KeyRSA, clock)
	if _, err := rs.Key(ctx, "e"); !errors.Is(err, authn.ErrUnknownKey) {
		t.Errorf("RSA key set Key(ed25519 kid): error = %v, want ErrUnknownKey", err)
	}
	es := newKeySet(t, j, authn.KeyEd25519, clock)
	k, err := es.Key(ctx, "e")
	if _, ok := k.(ed25519.PublicKey); err != nil || !ok {
		t.Errorf("Ed25519 key set Key(e) = %T, %v, want ed25519.PublicKey", k, err)
	}
	if _, err := es.Key(ctx, "r"); !errors.Is(err, authn.ErrUnknownKey) {
		t.Errorf("Ed25519 key set Key(rsa kid): error = %v, want ErrUnknownKey", err)
	}
}

func TestParseKeySetRejects(t *testing.T) {
	cases := map[string]string{
		"not json":          `nope`,
		"no keys":           `{"keys":[]}`,
		"short modulus":     `{"keys":[{"kty":"RSA","kid":"a","n":"AQAB","e":"AQAB"}]}`,
		"encryption key":    `{"keys":[{"kty":"RSA","kid":"a","use":"enc","n":"AQAB","e":"AQAB"}]}`,
		"keys not a list":   `{"keys":{}}`,
		"no kid":            `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`,
		"ed25519 wrong alg": `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"a","alg":"RS256","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`,
	}
	for name, body := range cases {
		if _, err := authn.ParseKeySet([]byte(body), authn.KeyEd25519); err == nil {
			t.Errorf("ParseKeySet(%s, Ed25519) = nil error, want an error", name)
		}
		if _, err := authn.ParseKeySet([]byte(body), authn.KeyRSA); err == nil {
			t.Errorf("ParseKeySet(%s, RSA) = nil error, want an error", name)
		}
	}
}

// TestKeySetSingleFlight: many requests on a cold cache cause one fetch.
func TestKeySetSingleFlight(t *testing.T) {
	j := authntest.NewJWKS(t)
	j.PutRSA("k1", authntest.RSAKey(t, 0))
	entered, release := make(chan struct{}, 1), make(chan struct{})
	j.Gate(entered, release)
	clock := authntest.NewClock(t0)
	ks := authn.NewKeySet(authn.KeySetConfig{URL: j.URL(), Type: authn.KeyRSA, Client: &http.Client{Timeout: 5 * time.Second}, Now: clock.Now, TTL: 300 * time.Second, RefetchEvery: 10 * time.Second})

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := ks.Key(context.Background(), "k1")
			errs <- err
		}()
	}
	<-entered
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Key(k1): %v", err)
		}
	}
	if got := j.Fetches(); got != 1 {
		t.Errorf("fetches for 16 concurrent cold lookups = %d, want 1", got)
	}
}

// TestIDPKeyRotationEndToEnd: a token signed with a newly published key is
// accepted before the cache expires.
func TestIDPKeyRotationEndToEnd(t *testing.T) {
	e := newEnv(t, envOpt{mode: authn.ModeIDP})
	if _, status, eb := e.me(bearerH(e.idpToken(tidActive, nil))); status != 200 {
		t.Fatalf("GET /me = %d %+v", status, eb)
	}
	newKey := authntest.RSAKey(t, 2)
	e.jwks.PutRSA("rsa-2", newKey)
	e.clock.Advance(time.Minute)
	tok := authntest.Sign(t, jwt.SigningMethodRS256, newKey, "rsa-2", e.idpClaims(tidActive), nil)
	if _, status, eb := e.me(bearerH(tok)); status != 200 {
		t.Errorf("GET /me with a rotated-in key = %d %+v, want 200", status, eb)
	}
}
