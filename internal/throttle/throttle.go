// Package throttle keeps token buckets of failures by key, on an injected
// clock: the throttle of failed authentication shared by the coordination
// API (httpapi) and the runtime authentication service (authn).
//
// Each failure of a key takes a token from its bucket; a key whose bucket is
// empty must wait (Wait says how long) until a token comes back, one per
// Rate.Every. Only keys that failed recently are kept: a bucket that is full
// again is forgotten (when its key is next looked at, or by a sweep every few
// thousand failures), and at most a fixed number of keys are kept (beyond
// it, new keys share one overflow bucket), so memory stays bounded whatever
// a flood sends, and comes back once the flood stops.
package throttle

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Rate is a token bucket: Burst tokens, refilled at one per Every. A zero
// Burst or Every turns the throttle off.
type Rate struct {
	Burst int
	Every time.Duration
}

// Enabled reports whether r throttles at all.
func (r Rate) Enabled() bool { return r.Burst > 0 && r.Every > 0 }

// bucket is the tokens of one key as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

// Buckets are the token buckets of failures, by key. Safe for concurrent use.
type Buckets struct {
	rate    Rate
	now     func() time.Time
	maxKeys int
	mu      sync.Mutex
	keys    map[string]*bucket
	fails   int // failures since the last sweep
}

// sweepEvery is how many failures pass between two sweeps of the buckets
// that are full again: a sweep costs the keys kept, so this keeps it to a
// few operations per failure, and keys that stop failing do not linger.
const sweepEvery = 4096

// sweep forgets the buckets that are full again at now. A map keeps the
// memory of its largest size, so once most keys are gone the rest move to a
// map of their own size.
func (t *Buckets) sweep(now time.Time) {
	n := len(t.keys)
	for k, b := range t.keys {
		if t.refill(b, now) {
			delete(t.keys, k)
		}
	}
	if len(t.keys) < n/2 {
		keys := make(map[string]*bucket, len(t.keys))
		for k, b := range t.keys {
			keys[k] = b
		}
		t.keys = keys
	}
	t.fails = 0
}

// maxKeys bounds the keys kept: about 100 bytes each, 10 MB at most.
const maxKeys = 100_000

// overflowKey is the bucket shared by the keys that fail while maxKeys are
// kept.
const overflowKey = "\x00overflow"

// New returns the buckets of rate on the clock now.
func New(rate Rate, now func() time.Time) *Buckets {
	return &Buckets{rate: rate, now: now, maxKeys: maxKeys, keys: map[string]*bucket{}}
}

// refill brings b up to now and reports whether it is full (and so can be
// forgotten).
func (t *Buckets) refill(b *bucket, now time.Time) bool {
	if el := now.Sub(b.at); el > 0 {
		b.tokens += float64(el) / float64(t.rate.Every)
		b.at = now
	}
	if b.tokens >= float64(t.rate.Burst) {
		b.tokens = float64(t.rate.Burst)
		return true
	}
	return false
}

// Wait reports how long key must wait for a token (0: it has one), and
// whether key has failed recently (its bucket is not full).
func (t *Buckets) Wait(key string) (wait time.Duration, failed bool) {
	if !t.rate.Enabled() {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.keys[key]
	if b == nil {
		return 0, false
	}
	if t.refill(b, t.now()) {
		delete(t.keys, key)
		return 0, false
	}
	if b.tokens >= 1 {
		return 0, true
	}
	return time.Duration((1 - b.tokens) * float64(t.rate.Every)), true
}

// Fail takes a token from key's bucket.
func (t *Buckets) Fail(key string) {
	if !t.rate.Enabled() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.fails++; t.fails >= sweepEvery {
		t.sweep(now)
	}
	b := t.keys[key]
	if b == nil {
		if len(t.keys) >= t.maxKeys {
			key = overflowKey
			if b = t.keys[key]; b != nil {
				t.refill(b, now)
			}
		}
		if b == nil {
			b = &bucket{tokens: float64(t.rate.Burst), at: now}
			t.keys[key] = b
		}
	} else {
		t.refill(b, now)
	}
	b.tokens = max(b.tokens-1, 0)
}

// RemoteHost is the address a request came from, without its port: the key
// of the address's bucket. Proxy headers are not trusted: behind a proxy,
// the proxy's address is the key.
func RemoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
