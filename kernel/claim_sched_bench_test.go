package kernel

import (
	"testing"
	"time"
)

// BenchmarkClaimScheduled: a claim among 100k queued Turns over 5
// priorities, half of them not due for an hour. Compare with
// BenchmarkClaimFIFO: choosing by (priority, due time, order) is a heap
// look-up, not a scan.
func BenchmarkClaimScheduled(b *testing.B) {
	cb := newClaimBench(b)
	for i := range 100_000 {
		cb.dispatch(b, i, func(d *Dispatch) {
			d.Schedule.Priority = ptr(1 + i%5)
			if i%2 == 0 {
				d.Schedule.NotBefore = ptr(cb.now.Add(time.Hour))
			}
		})
	}
	cb.claims(b)
}
