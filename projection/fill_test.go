package projection

import (
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestAppendOnlyBucketsAreFull: folded in many small batches, as serve
// folds, the buckets whose keys only grow at the end of their range keep
// their pages nearly full (bbolt's default split leaves them half empty).
func TestAppendOnlyBucketsAreFull(t *testing.T) {
	l := scenario(7, 6000)
	s, _ := openStore(t)
	for i := 0; i < len(l.recs); i += 8 {
		mustApply(t, s, l.recs[i:min(i+8, len(l.recs))])
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		st := tx.Bucket(bktFeed).Stats()
		if st.LeafPageN < 20 {
			t.Fatalf("feed has %d leaf pages: too few to tell", st.LeafPageN)
		}
		if fill := float64(st.LeafInuse) / float64(st.LeafAlloc); fill < 0.85 {
			t.Errorf("feed pages are %.0f%% full, want at least 85%%", 100*fill)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
