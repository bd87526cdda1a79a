package serve

import (
	"testing"
	"time"
)

// TestLagWatch drives the projection lag check through probes at given
// times: caught up, a little behind while advancing, stalled past the bound,
// too far behind, and advancing again.
func TestLagWatch(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	var w lagWatch
	for i, c := range []struct {
		at               time.Duration
		head, checkpoint uint64
		events           uint64
		stalled          string
		ok               bool
	}{
		{0, 10, 10, 0, "0s", true},
		{time.Second, 20, 15, 5, "0s", true},                                              // behind, but it moved
		{10 * time.Second, 30, 15, 15, "9s", true},                                        // behind and standing still
		{time.Second + MaxProjectionStall, 40, 15, 25, MaxProjectionStall.String(), true}, // at the bound
		{2*time.Second + MaxProjectionStall, 50, 15, 35, (time.Second + MaxProjectionStall).String(), false},
		{3*time.Second + MaxProjectionStall, 60, 16, 44, "0s", true}, // it moved again
		{4*time.Second + MaxProjectionStall, 16 + MaxProjectionLag + 1, 17, MaxProjectionLag, "0s", true},
		{5*time.Second + MaxProjectionStall, 18 + MaxProjectionLag + 1, 18, MaxProjectionLag + 1, "0s", false},
		{6*time.Second + MaxProjectionStall, 30, 30, 0, "0s", true},
		{60*time.Second + MaxProjectionStall, 30, 30, 0, "0s", true}, // caught up is never stalled
	} {
		got := w.check(t0.Add(c.at), c.head, c.checkpoint)
		if got.Events != c.events || got.StalledFor != c.stalled || got.WithinBound != c.ok {
			t.Errorf("probe %d: check(+%v, head %d, checkpoint %d) = %+v, want %d events, stalled %s, within bounds %v",
				i, c.at, c.head, c.checkpoint, got, c.events, c.stalled, c.ok)
		}
	}
}
