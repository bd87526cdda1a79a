package monitor

import (
	"path/filepath"

	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkRecord measures storing one run (one bbolt transaction each).
func BenchmarkRecord(b *testing.B) {
	s, err := openStore(filepath.Join(b.TempDir(), "m.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	at := t0
	for i := 0; b.Loop(); i++ {
		at = at.Add(time.Second)
		if _, _, _, err := s.record(Run{QueryID: "q", Trigger: TriggerSchedule, StartedAt: at, Passed: i%10 != 0, Reason: "r"}, at); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOverview90Days measures the widest overview over 90 days of a
// query run every minute (about 130k runs).
func BenchmarkOverview90Days(b *testing.B) {
	c := newClock()
	cfg := DefaultConfig()
	cfg.DataPath = filepath.Join(b.TempDir(), "m.db")
	cfg.Now = c.Now
	m, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	err = m.store.db.Update(func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		for i := range 90 * 24 * 60 {
			at := t0.Add(-time.Duration(90*24*60-i) * time.Minute)
			if err := putJSON(runs, runKey(at, uint64(i+1)), Run{ID: uint64(i + 1), QueryID: "q", StartedAt: at, Passed: i%7 != 0}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := m.Overview(MaxStatsDays); err != nil {
			b.Fatal(err)
		}
	}
}
