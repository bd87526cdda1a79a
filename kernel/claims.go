package kernel

import (
	"sort"
	"time"
)

// ExpiredClaims returns the ids of the Turns whose claim has expired at now,
// oldest dispatch first: what claims:reconcile-expired releases. It reads
// the project's timers (queue.go), so it costs what is due, not the Turns.
func ExpiredClaims(p *Project, now time.Time) []string {
	due, _ := p.timers.due(now)
	var expired []*Turn
	for _, t := range due {
		if t.Claim != nil && !now.Before(t.Claim.ExpiresAt) {
			expired = append(expired, t)
		}
	}
	return idsByOrder(expired)
}

// DueTurns returns the ids of the Turns to which something happens by
// itself at now, oldest dispatch first: a claim expired, a claim_by or a
// deadline passed. What the reaper decides ExpireDue on.
func DueTurns(p *Project, now time.Time) []string {
	due, _ := p.timers.due(now)
	return idsByOrder(due)
}

func idsByOrder(ts []*Turn) []string {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Order < ts[j].Order })
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// ClaimCounts returns how many claims of the project are live at now and
// how many have expired without being released yet.
func (p *Project) ClaimCounts(now time.Time) (live, expired int) {
	n := len(ExpiredClaims(p, now))
	return p.timers.claims - n, n
}
