package authn

import (
	"fmt"
	"testing"
	"time"
)

// clock is a clock that moves only when told (the package's own tests
// cannot import authntest, which imports this package).
type clock struct{ t time.Time }

func (c *clock) Now() time.Time          { return c.t }
func (c *clock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func TestVerifiedTokensHoldUntilTheirExpiry(t *testing.T) {
	clock := &clock{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	c := newVerifiedTokens(10, clock.Now)
	a, b := credentialKey(keyToken, "token-a"), credentialKey(keyToken, "token-b")
	c.put(a, clock.Now().Add(time.Minute))
	c.put(b, clock.Now()) // already over: not kept
	if !c.has(a) {
		t.Errorf("has(a) = false right after put, want true")
	}
	if c.has(b) || c.len() != 1 {
		t.Errorf("has(b) = %v, len = %d; want false, 1 (an entry that is already over is not kept)", c.has(b), c.len())
	}
	clock.Advance(59 * time.Second)
	if !c.has(a) {
		t.Errorf("has(a) 1 s before its expiry = false, want true")
	}
	clock.Advance(time.Second)
	if c.has(a) {
		t.Errorf("has(a) at its expiry = true, want false")
	}
	if c.len() != 0 {
		t.Errorf("len after the expired entry was looked at = %d, want 0", c.len())
	}
	// A later success extends it.
	c.put(a, clock.Now().Add(time.Second))
	c.put(a, clock.Now().Add(time.Hour))
	clock.Advance(time.Minute)
	if !c.has(a) || c.len() != 1 {
		t.Errorf("has(a) after a second put extended it = %v, len %d; want true, 1", c.has(a), c.len())
	}
	c.forget(a)
	if c.has(a) {
		t.Errorf("has(a) after forget = true, want false")
	}
}

func TestVerifiedTokensAreBounded(t *testing.T) {
	clock := &clock{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	const max = 100
	c := newVerifiedTokens(max, clock.Now)
	key := func(i int) [32]byte { return credentialKey(keyToken, fmt.Sprint("token-", i)) }
	until := clock.Now().Add(time.Hour)
	for i := range max {
		c.put(key(i), until)
	}
	c.has(key(0)) // the most recently used now
	for i := max; i < 10*max; i++ {
		c.put(key(i), until)
		if c.len() > max {
			t.Fatalf("len after %d puts = %d, want at most %d", i+1, c.len(), max)
		}
	}
	if c.has(key(1)) {
		t.Errorf("has(the least recently used) after %d more puts = true, want false", 9*max)
	}
	if !c.has(key(10*max - 1)) {
		t.Errorf("has(the last put) = false, want true")
	}
	if off := newVerifiedTokens(0, clock.Now); func() bool { off.put(key(0), until); return off.has(key(0)) }() {
		t.Errorf("a cache of 0 entries keeps one, want none")
	}
}

func TestCredentialKeysSeparateKinds(t *testing.T) {
	if credentialKey(keyToken, "x") == credentialKey(keyTicket, "x") {
		t.Errorf("credentialKey(token, x) = credentialKey(ticket, x), want different keys")
	}
	if credentialKey(keyToken, "x") == credentialKey(keyToken, "y") {
		t.Errorf("credentialKey(token, x) = credentialKey(token, y), want different keys")
	}
}
