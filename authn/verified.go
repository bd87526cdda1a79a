package authn

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"
)

// The cache of verified credentials: what lets a valid credential past the
// throttle of failed authentication (throttle.go) at an address whose
// bucket another client emptied.
//
// Checking a token is a signature verification, perhaps a key-set fetch,
// and admission in the database: far more than a 429, so the throttle
// refuses a throttled address before looking at its credential. Instead, the
// server remembers the credentials that authenticated recently and lets a
// request that carries one skip the throttle (it is then authenticated in
// full, as any other). Deciding costs a SHA-256 of the credential and a map
// look-up, about as much as the 429 itself.
//
// Entries are keyed by the SHA-256 of the credential (never the credential),
// with a byte naming its kind; they hold until the token's own exp plus the
// leeway (a dev token without exp: noExpiryHold after its last success), or
// a ticket's expiry. A request that skipped the throttle but is refused
// (401 or 403) forgets its entry at once, so an entry never outlives what
// the service knows of a revocation: a key gone from the key set, a tenant
// suspended, a ticket spent. At most Config.VerifiedTokens entries are kept
// (10,000 by default, about 200 bytes each, 2 MB); beyond it, the least
// recently used is dropped. Only successes add entries, so a flood of wrong
// credentials adds none.

// noExpiryHold is how long a verified token without exp (dev mode only) is
// remembered after its last success.
const noExpiryHold = 15 * time.Minute

// Credential kinds in a cache key: a token (sent in a header or the
// websocket's access_token, the same token) and a websocket ticket.
const (
	keyToken  byte = 't'
	keyTicket byte = 'w'
)

// credentialKey is the cache key of a credential of a kind.
func credentialKey(kind byte, cred string) [32]byte {
	h := sha256.New()
	h.Write([]byte{kind, 0})
	h.Write([]byte(cred))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// verifiedTokens is a bounded LRU of credentials that authenticated, by key,
// each with the last instant it holds. Safe for concurrent use.
type verifiedTokens struct {
	max int
	now func() time.Time

	mu  sync.Mutex
	m   map[[32]byte]*list.Element // of *verifiedEntry
	lru list.List                  // most recently used first
}

type verifiedEntry struct {
	key   [32]byte
	until time.Time
}

// newVerifiedTokens keeps at most max entries (0 or less: none) on the clock now.
func newVerifiedTokens(max int, now func() time.Time) *verifiedTokens {
	return &verifiedTokens{max: max, now: now, m: map[[32]byte]*list.Element{}}
}

// has reports whether key authenticated and still holds; an entry that no
// longer holds is dropped.
func (c *verifiedTokens) has(key [32]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.m[key]
	if el == nil {
		return false
	}
	if !c.now().Before(el.Value.(*verifiedEntry).until) {
		c.remove(el)
		return false
	}
	c.lru.MoveToFront(el)
	return true
}

// put remembers key until until (nothing when until is past).
func (c *verifiedTokens) put(key [32]byte, until time.Time) {
	if c.max <= 0 || !c.now().Before(until) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[key]; el != nil {
		el.Value.(*verifiedEntry).until = until
		c.lru.MoveToFront(el)
		return
	}
	for c.lru.Len() >= c.max {
		c.remove(c.lru.Back())
	}
	c.m[key] = c.lru.PushFront(&verifiedEntry{key: key, until: until})
}

// forget drops key.
func (c *verifiedTokens) forget(key [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[key]; el != nil {
		c.remove(el)
	}
}

// len is the number of entries kept.
func (c *verifiedTokens) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

func (c *verifiedTokens) remove(el *list.Element) {
	delete(c.m, el.Value.(*verifiedEntry).key)
	c.lru.Remove(el)
}
