package serve

import (
	"sync"
	"time"
)

// Bounds of projection lag past which /readyz answers 503 (the defaults of
// LagBounds).
const (
	// MaxProjectionLag is the most events the projections may be behind the
	// ledger's head: about a second of folding at the measured rates.
	MaxProjectionLag = 10_000
	// MaxProjectionStall is how long the projections may stand still while
	// they are behind the ledger.
	MaxProjectionStall = 15 * time.Second
)

// LagBounds are the bounds of projection lag past which /readyz answers
// 503. serve uses MaxProjectionLag and MaxProjectionStall; tests set small
// ones. A zero field means its default.
type LagBounds struct {
	Events uint64        // most events behind the ledger's head
	Stall  time.Duration // longest standing still while behind
}

func (b LagBounds) orDefaults() LagBounds {
	if b.Events == 0 {
		b.Events = MaxProjectionLag
	}
	if b.Stall == 0 {
		b.Stall = MaxProjectionStall
	}
	return b
}

// LagReport is the projection_lag of /readyz.
type LagReport struct {
	Events      uint64 `json:"events"`        // ledger head minus applied ledger_seq
	MaxEvents   uint64 `json:"max_events"`    // LagBounds.Events
	StalledFor  string `json:"stalled_for"`   // how long the projections have been behind without advancing ("0s" when they advance or are caught up)
	MaxStalled  string `json:"max_stalled"`   // LagBounds.Stall
	WithinBound bool   `json:"within_bounds"` // false makes /readyz answer 503
}

// lagWatch remembers when the projections last advanced or were caught up,
// across /readyz probes: a projector that has stopped while the ledger moves
// is behind by an unchanging checkpoint for longer and longer. It only
// learns when asked, so the stall is measured from the first probe that
// saw it behind.
type lagWatch struct {
	bounds LagBounds // zero: the defaults

	mu         sync.Mutex
	checkpoint uint64
	since      time.Time // when checkpoint was last seen to move, or to be caught up
}

// check reports the lag at now of projections at checkpoint behind a ledger
// at head.
func (w *lagWatch) check(now time.Time, head, checkpoint uint64) LagReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	var behind uint64
	if head > checkpoint {
		behind = head - checkpoint
	}
	if w.since.IsZero() || behind == 0 || checkpoint != w.checkpoint {
		w.checkpoint, w.since = checkpoint, now
	}
	stalled := now.Sub(w.since)
	if behind == 0 {
		stalled = 0
	}
	b := w.bounds.orDefaults()
	return LagReport{
		Events:      behind,
		MaxEvents:   b.Events,
		StalledFor:  stalled.Round(time.Millisecond).String(),
		MaxStalled:  b.Stall.String(),
		WithinBound: behind <= b.Events && stalled <= b.Stall,
	}
}
