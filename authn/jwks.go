package authn

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sync"
	"time"
)

// KeyType is the one kind of public key a key set accepts.
type KeyType int

// Key types per mode: RSA for idp (RS256), Ed25519 for hosted (EdDSA).
const (
	KeyRSA KeyType = iota + 1
	KeyEd25519
)

// ErrKeySetUnavailable wraps every failure to get a usable key set: the
// endpoint is not configured, unreachable, slow, answers an error status or
// garbage. The service answers it with 503.
var ErrKeySetUnavailable = errors.New("signing key set unavailable")

// ErrUnknownKey is a kid the (fresh) key set does not hold: 401.
var ErrUnknownKey = errors.New("no signing key with this kid")

// maxJWKSBytes bounds a key set response.
const maxJWKSBytes = 1 << 20

// KeySetConfig configures a KeySet.
type KeySetConfig struct {
	URL          string
	Type         KeyType
	Client       *http.Client     // with its timeout; http.DefaultClient is not used
	Now          func() time.Time // injected clock
	TTL          time.Duration    // keys are kept this long (300 s)
	RefetchEvery time.Duration    // least time between fetches before expiry
}

// KeySet is a cache of one JWKS endpoint's keys of one type. Keys are kept
// for TTL and fetched again on expiry; a kid it does not hold triggers a
// fetch too, but at most once per RefetchEvery, so rotation works without
// letting forged kids hammer the provider. One fetch runs at a time; callers
// that arrive meanwhile wait for its result. A failed fetch is remembered
// for RefetchEvery as well.
type KeySet struct {
	cfg KeySetConfig

	mu        sync.Mutex
	keys      map[string]crypto.PublicKey
	fetchedAt time.Time // of the keys held
	triedAt   time.Time // of the last fetch attempt, ok or not
	lastErr   error     // of the last attempt, nil if it succeeded
	inflight  chan struct{}
}

// NewKeySet returns an empty cache; nothing is fetched until a key is asked for.
func NewKeySet(cfg KeySetConfig) *KeySet {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 5 * time.Second}
	}
	// Redirects are never followed, whoever built the client: a key set
	// that moves elsewhere would hand the choice of trusted keys to the
	// redirect's target (another host, or https downgraded to http). A 3xx
	// answer is a key-set failure (503), and no request leaves for its
	// Location.
	c := *cfg.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.Client = &c
	return &KeySet{cfg: cfg}
}

// Key returns the key with kid. Its error wraps ErrKeySetUnavailable or ErrUnknownKey.
func (k *KeySet) Key(ctx context.Context, kid string) (crypto.PublicKey, error) {
	if k.cfg.URL == "" {
		return nil, fmt.Errorf("%w: no key set URL is configured", ErrKeySetUnavailable)
	}
	for attempt := 0; ; attempt++ {
		k.mu.Lock()
		now := k.cfg.Now()
		fresh := k.keys != nil && now.Sub(k.fetchedAt) < k.cfg.TTL
		if fresh {
			if key, ok := k.keys[kid]; ok {
				k.mu.Unlock()
				return key, nil
			}
		}
		recent := !k.triedAt.IsZero() && now.Sub(k.triedAt) < k.cfg.RefetchEvery
		if attempt > 0 || (recent && k.inflight == nil) {
			// Nothing new to learn: we fetched for this call already, or
			// somebody fetched a moment ago.
			err := k.lastErr
			k.mu.Unlock()
			if err != nil && !fresh {
				return nil, err
			}
			if !fresh {
				// keys expired and the last attempt is recent but ok:
				// cannot happen (a successful attempt makes them fresh).
				return nil, fmt.Errorf("%w: key set expired", ErrKeySetUnavailable)
			}
			return nil, fmt.Errorf("%w %q", ErrUnknownKey, kid)
		}
		if k.inflight != nil {
			wait := k.inflight
			k.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: %v", ErrKeySetUnavailable, ctx.Err())
			}
			continue
		}
		done := make(chan struct{})
		k.inflight = done
		k.mu.Unlock()

		keys, err := k.fetch(context.WithoutCancel(ctx))

		k.mu.Lock()
		k.triedAt = k.cfg.Now()
		k.lastErr = err
		if err == nil {
			k.keys = keys
			k.fetchedAt = k.triedAt
		} else if k.keys != nil && k.cfg.Now().Sub(k.fetchedAt) >= k.cfg.TTL {
			k.keys = nil
		}
		k.inflight = nil
		close(done)
		k.mu.Unlock()
	}
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
}

func (k *KeySet) fetch(ctx context.Context) (map[string]crypto.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.cfg.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeySetUnavailable, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeySetUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, fmt.Errorf("%w: key set endpoint answered %s; redirects are not followed", ErrKeySetUnavailable, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: key set endpoint answered %s", ErrKeySetUnavailable, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeySetUnavailable, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("%w: key set is larger than %d bytes", ErrKeySetUnavailable, maxJWKSBytes)
	}
	keys, err := ParseKeySet(body, k.cfg.Type)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeySetUnavailable, err)
	}
	return keys, nil
}

// ParseKeySet reads a JWKS document and keeps the signing keys of type t
// that have a kid. Keys of other types, keys for encryption and keys with an
// algorithm other than the mode's are left out; a document with no usable
// key is an error.
func ParseKeySet(body []byte, t KeyType) (map[string]crypto.PublicKey, error) {
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("key set is not a JWKS document: %v", err)
	}
	keys := make(map[string]crypto.PublicKey)
	for _, j := range doc.Keys {
		if j.Kid == "" || (j.Use != "" && j.Use != "sig") {
			continue
		}
		switch {
		case t == KeyRSA && j.Kty == "RSA" && (j.Alg == "" || j.Alg == "RS256"):
			if key, err := rsaKey(j); err == nil {
				keys[j.Kid] = key
			}
		case t == KeyEd25519 && j.Kty == "OKP" && j.Crv == "Ed25519" && (j.Alg == "" || j.Alg == "EdDSA" || j.Alg == "Ed25519"):
			x, err := base64.RawURLEncoding.DecodeString(j.X)
			if err == nil && len(x) == ed25519.PublicKeySize {
				keys[j.Kid] = ed25519.PublicKey(x)
			}
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("key set holds no usable signing key")
	}
	return keys, nil
}

func rsaKey(j jwk) (*rsa.PublicKey, error) {
	nb, err := base64.RawURLEncoding.DecodeString(j.N)
	if err != nil {
		return nil, err
	}
	eb, err := base64.RawURLEncoding.DecodeString(j.E)
	if err != nil || len(eb) == 0 || len(eb) > 4 {
		return nil, errors.New("bad exponent")
	}
	n := new(big.Int).SetBytes(nb)
	if n.BitLen() < 2048 || n.BitLen() > 8192 {
		return nil, errors.New("modulus size out of range")
	}
	e := int(new(big.Int).SetBytes(eb).Int64())
	if e < 3 || e%2 == 0 {
		return nil, errors.New("bad exponent")
	}
	return &rsa.PublicKey{N: n, E: e}, nil
}
