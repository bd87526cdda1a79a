package kernel

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// expiredByWalk is the reaper's old way: every Turn of the project looked at.
func expiredByWalk(p *Project, now time.Time) []string {
	var expired []*Turn
	for _, t := range p.Turns {
		if t.State == StateClaimed && t.Claim != nil && !now.Before(t.Claim.ExpiresAt) {
			expired = append(expired, t)
		}
	}
	sort.Slice(expired, func(i, j int) bool { return expired[i].Order < expired[j].Order })
	var ids []string
	for _, t := range expired {
		ids = append(ids, t.ID)
	}
	return ids
}

// TestClaimIndexTouchesOnlyExpired: with many finished Turns, claims taken,
// renewed, suspended, finished and released at different times, the claim
// index finds exactly the claims a walk of every Turn finds, at every moment,
// and looks at no more than the expired claims and the entries right below
// them — never the finished Turns.
func TestClaimIndexTouchesOnlyExpired(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	w := h.agent("worker", 1000)
	const turns = 300
	tokens := map[string]*ClaimToken{}
	for i := range turns {
		id := fmt.Sprintf("t%03d", i)
		h.do(rootDispatch(req, id, "req", "worker", id))
		h.now = t0.Add(time.Duration(i) * time.Second) // each claim expires a second after the one before
		tokens[id] = h.claim(w, "worker", "c"+id)
	}
	h.now = t0
	// Finish the first 200 (they must never be looked at), renew every
	// fifth of the rest, suspend every seventh.
	for i := range turns {
		id := fmt.Sprintf("t%03d", i)
		tok := tokens[id]
		switch {
		case i < 200:
			h.do(Finish{Common: w, TurnID: id, Claim: *tok, TokenHash: HashSecret(tok.Token), Outcome: "succeeded"})
		case i%5 == 0:
			h.do(Renew{Common: w, Claim: *tok, TokenHash: HashSecret(tok.Token), ExpiresAt: h.now.Add(time.Hour)})
		case i%7 == 0:
			h.do(Suspend{Common: w, TurnID: id, Claim: *tok, TokenHash: HashSecret(tok.Token)})
		}
	}
	live, _ := h.p.ClaimCounts(t0)
	if want := len(expiredByWalk(h.p, t0.Add(1000*time.Hour))); live != want {
		t.Fatalf("%d claims indexed, want the %d live ones", live, want)
	}
	for _, at := range []time.Duration{0, 150*time.Second + time.Minute, 230*time.Second + time.Minute, 260*time.Second + time.Minute, 299*time.Second + time.Minute, 2 * time.Hour} {
		now := t0.Add(at)
		if diff := cmp.Diff(expiredByWalk(h.p, now), ExpiredClaims(h.p, now), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("at +%s: ExpiredClaims differs from a walk of every Turn (-walk +index):\n%s", at, diff)
		}
		exp, visited := h.p.timers.due(now)
		if visited > 2*len(exp)+1 {
			t.Errorf("at +%s: looked at %d entries for %d expired claims", at, visited, len(exp))
		}
	}
	// Releasing them empties the index of them.
	now := t0.Add(2 * time.Hour)
	h.now = now
	for _, id := range ExpiredClaims(h.p, now) {
		h.do(ExpireClaim{Common: admin, TurnID: id})
	}
	if live, expired := h.p.ClaimCounts(now); live != 0 || expired != 0 {
		t.Errorf("after releasing: ClaimCounts = %d live, %d expired; want none", live, expired)
	}
}
