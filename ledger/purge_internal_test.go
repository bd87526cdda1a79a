package ledger

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
)

// A purge in steps leaves what one purge would: every event from the
// horizon on, and the last of each subject below it.
func TestPurgeInStepsKeepsTheHorizonOn(t *testing.T) {
	defer func(n uint64) { purgeStep = n }(purgeStep)
	purgeStep = 3
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.Storage, cfg.AllowPurge = MemoryStorage, true
	s := openOn(t, natstest.Start(t), cfg)
	var p1, p2 uint64
	var err error
	for i := range 20 {
		if p1, err = s.Append(ctx, "p1", p1, heartbeat("a")); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			e := heartbeat("b")
			e.ProjectID = "p2"
			if p2, err = s.Append(ctx, "p2", p2, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.PurgeBelow(ctx, 17); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	if _, err := s.ReadAll(ctx, 0, func(b []kernel.Recorded, _ uint64) error {
		for _, r := range b {
			seqs = append(seqs, r.Seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []uint64{p2} // p2's last, then p1 from the horizon on
	for seq := uint64(17); seq <= p1; seq++ {
		want = append(want, seq)
	}
	if diff := cmp.Diff(want, seqs); diff != "" {
		t.Errorf("the stream after PurgeBelow(17) in steps of 3 (-want +got):\n%s", diff)
	}
}
