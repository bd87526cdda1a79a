package projection

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkCheck measures what the check on open costs serve's start: the
// structural check and bbolt's consistency check of a projection file
// folded from 100k events.
//
//	go test ./projection -run '^$' -bench BenchmarkCheck -benchtime 5x
func BenchmarkCheck(b *testing.B) {
	l := scenario(11, 100_000)
	path := filepath.Join(b.TempDir(), "projections.db")
	s, err := Open(path, testConfig())
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(l.recs); i += 1000 {
		mustApply(b, s, l.recs[i:min(i+1000, len(l.recs))])
	}
	s.Close()
	if fi, err := os.Stat(path); err == nil {
		b.Logf("%s: %.1f MiB", path, float64(fi.Size())/(1<<20))
	}
	b.ResetTimer()
	for b.Loop() {
		if err := Check(path); err != nil {
			b.Fatal(err)
		}
	}
}
