package bench

import (
	"math"
	"runtime/debug"
	"testing"
)

// The feed scenario holds the bench process's collector off while it reads
// pages, and gives the settings back after: left off, the phases after it
// would grow the process up to the memory limit.
func TestQuietGCGivesTheSettingsBack(t *testing.T) {
	pct := debug.SetGCPercent(100)
	defer debug.SetGCPercent(pct)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(limit)

	undo := quietGC()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent while quiet = %d, want -1 (off)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 512<<20 {
		t.Errorf("memory limit while quiet = %d, want 512 MiB", got)
	}
	undo()
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Errorf("GC percent after = %d, want 100 as before", got)
	}
	debug.SetGCPercent(100)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit after = %d, want none as before", got)
	}
}
