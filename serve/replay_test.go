package serve

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/turnledger/turnledger/projection"
)

// TestCheckLiveStopsTheRebuildOnlyWhenItCannotTell: replay checks the live
// projection file beside the rebuild. No file, or a damaged one (which the
// rebuild replaces, keeping it aside), lets the rebuild go on; a file the
// check cannot read or that a serve holds stops it, with the refusal
// replay answers.
func TestCheckLiveStopsTheRebuildOnlyWhenItCannotTell(t *testing.T) {
	dir := t.TempDir()
	damagedFile := filepath.Join(dir, "damaged.db")
	if err := os.WriteFile(damagedFile, []byte("not a bbolt file, but long enough to hold a meta page or two"), 0o600); err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(dir, "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(dir, "held.db")
	st, err := projection.Open(held, projection.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	for _, tc := range []struct {
		name, path       string
		damaged, refused bool
		inUse, stopped   bool
	}{
		{"no file", filepath.Join(dir, "none.db"), false, false, false, false},
		{"a damaged file", damagedFile, true, false, false, false},
		{"a path that cannot be opened", filepath.Join(notADir, "projections.db"), false, true, false, true},
		{"a file a serve holds", held, false, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stopped atomic.Bool
			damaged, refused := checkLive(tc.path, func() { stopped.Store(true) }).result(dir)
			if got := damaged != nil; got != tc.damaged || (got && !errors.Is(damaged, projection.ErrDamaged)) {
				t.Errorf("damaged = %v, want damage %v", damaged, tc.damaged)
			}
			if got := refused != nil; got != tc.refused {
				t.Errorf("refused = %v, want a refusal %v", refused, tc.refused)
			}
			if tc.inUse && (refused == nil || !strings.Contains(refused.Error(), "is in use (is turnledger serve or replay running")) {
				t.Errorf("refused = %v, want it to say the file is in use", refused)
			}
			if stopped.Load() != tc.stopped {
				t.Errorf("the rebuild stopped = %v, want %v", stopped.Load(), tc.stopped)
			}
		})
	}
}
