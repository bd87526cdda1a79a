package projection

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/kernel"
)

// TestTransactionsFoldAsEventByEvent: a transaction of thousands of events,
// whose writes to the indexes and feeds are applied at its commit in key
// order and whose counters and last-seen times are kept in memory
// (writes.go), leaves the file exactly as folding every event in a
// transaction of its own does, where each read finds the file as the
// previous event left it: the same key put and deleted again within one
// transaction (the state index), counters that go to zero and back, an agent
// seen many times.
func TestTransactionsFoldAsEventByEvent(t *testing.T) {
	for seed := uint64(20); seed < 23; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			l := scenario(seed, 2500)
			one := applied(t, l)
			each, _ := openStore(t)
			for _, r := range l.recs {
				mustApply(t, each, []kernel.Recorded{r})
			}
			if diff := cmp.Diff(mustDump(t, each), mustDump(t, one)); diff != "" {
				t.Errorf("one transaction differs from one per event (-each +one):\n%s", diff)
			}
		})
	}
}
