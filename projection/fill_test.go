package projection

import (
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestAppendOnlyBucketsAreFull: folded in many small batches, as serve
// folds, the buckets whose keys only grow at the end of their range (feeds,
// the dispatch index, and the Turns, keyed by ids that sort by dispatch)
// keep their pages mostly full (bbolt's default split leaves them half
// empty).
func TestAppendOnlyBucketsAreFull(t *testing.T) {
	l := scenario(7, 6000)
	s, _ := openStore(t)
	for i := 0; i < len(l.recs); i += 8 {
		mustApply(t, s, l.recs[i:min(i+8, len(l.recs))])
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, name := range appendOnly {
			st := tx.Bucket(name).Stats()
			if st.LeafPageN < 10 {
				if string(name) == string(bktFeed) {
					t.Fatalf("feed has %d leaf pages: too few to tell", st.LeafPageN)
				}
				continue // too small to tell
			}
			if fill := float64(st.LeafInuse) / float64(st.LeafAlloc); fill < 0.70 {
				t.Errorf("%s: %d leaf pages %.0f%% full, want at least 70%%", name, st.LeafPageN, 100*fill)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
