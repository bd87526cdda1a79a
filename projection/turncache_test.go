package projection

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/kernel"
)

// Folding a ledger in batches of every size, so that most events of a Turn
// find its record in the cache of recent batches, gives the very store one
// batch gives; a batch that fails leaves no trace in the cache either.
func TestRecentTurnsFoldLikeOneBatch(t *testing.T) {
	l := scenario(7, 600)
	want := mustDump(t, applied(t, l))

	s, _ := openStore(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < len(l.recs); {
		n := 1 + rng.IntN(6)
		end := min(i+n, len(l.recs))
		if i > 0 && rng.IntN(4) == 0 {
			// A failing batch: its good events change cached records in
			// place before an event out of order fails it.
			bad := append([]kernel.Recorded{}, l.recs[i:end]...)
			bad = append(bad, l.recs[i])
			if err := s.Apply(bad); err == nil {
				t.Fatalf("Apply(batch out of order) = nil, want an error")
			}
		}
		mustApply(t, s, l.recs[i:end])
		i = end
	}
	if diff := cmp.Diff(want, mustDump(t, s)); diff != "" {
		t.Errorf("small batches differ from one batch (-one +small):\n%s", diff)
	}
}
