package projection

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// crash closes the store's file the way a killed process leaves it: no
// Close of the Store, so no final sync and no removal of the mark.
func crash(t *testing.T, s *Store) {
	t.Helper()
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// writtenUnder makes a projection file at path with a registration, written
// without fsync under boot, and returns the store and the events.
func writtenUnder(t *testing.T, path, boot string) (*Store, *events) {
	t.Helper()
	l := newEvents()
	l.register("w", "worker", 2, "summarize")
	s, err := openBoot(t, path, boot)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, l.recs)
	return s, l
}

func openBoot(t *testing.T, path, boot string) (*Store, error) {
	t.Helper()
	cfg := testConfig()
	cfg.NoSync = false
	cfg.Boot = boot
	return Open(path, cfg)
}

// TestUnsyncedFileSurvivesAProcessCrash: a file written without fsync whose
// process died (same boot) opens with everything it committed.
func TestUnsyncedFileSurvivesAProcessCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "projections.db")
	l := newEvents()
	l.register("w", "worker", 2, "summarize")
	l.dispatch("t1", "w", "w", "summarize")
	s, err := openBoot(t, path, "boot-a")
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, l.recs)
	want := mustDump(t, s)
	crash(t, s)

	s, err = openBoot(t, path, "boot-a")
	if err != nil {
		t.Fatalf("Open after a process crash, same boot = %v, want the file", err)
	}
	defer s.Close()
	if got := s.Checkpoint(); got != uint64(len(l.recs)) {
		t.Errorf("Checkpoint() = %d, want %d", got, len(l.recs))
	}
	if diff := cmp.Diff(want, mustDump(t, s)); diff != "" {
		t.Errorf("file after a process crash differs (-before +after):\n%s", diff)
	}
}

// TestUnsyncedFileAfterAMachineCrashIsRebuilt: a file still marked with the
// boot it was written under is refused under another boot (ErrDamaged), and
// OpenHealing moves it aside and opens an empty one, to be rebuilt.
func TestUnsyncedFileAfterAMachineCrashIsRebuilt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "projections.db")
	s, _ := writtenUnder(t, path, "boot-a")
	crash(t, s)

	for _, boot := range []string{"boot-b", ""} { // "" reads this machine's boot id, never "boot-a"
		if s, err := openBoot(t, path, boot); !errors.Is(err, ErrDamaged) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("Open(boot %q) of a file left unsynced under boot-a = %v, want ErrDamaged", boot, err)
		}
	}
	cfg := testConfig()
	cfg.NoSync, cfg.Boot = false, "boot-b"
	s, healed, err := OpenHealing(path, cfg)
	if err != nil {
		t.Fatalf("OpenHealing = %v", err)
	}
	defer s.Close()
	if healed == nil {
		t.Fatal("OpenHealing did not heal a file left unsynced by a machine crash")
	}
	if _, err := os.Stat(healed.MovedTo); err != nil {
		t.Errorf("the damaged file is not at %s: %v", healed.MovedTo, err)
	}
	if got := s.Checkpoint(); got != 0 {
		t.Errorf("Checkpoint() of the new file = %d, want 0 (rebuilt from the ledger)", got)
	}
}

// TestUnsyncedFileClosedCleanlyOpensUnderAnyBoot: Close syncs and removes the
// mark, so the next boot, or a Store that syncs every commit, opens it.
func TestUnsyncedFileClosedCleanlyOpensUnderAnyBoot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "projections.db")
	s, l := writtenUnder(t, path, "boot-a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, boot := range []string{"boot-b", ""} {
		s, err := openBoot(t, path, boot)
		if err != nil {
			t.Fatalf("Open(boot %q) after a clean close = %v", boot, err)
		}
		if got := s.Checkpoint(); got != uint64(len(l.recs)) {
			t.Errorf("Open(boot %q): Checkpoint() = %d, want %d", boot, got, len(l.recs))
		}
		s.Close()
	}
}
