package projection

import (
	"bufio"
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// mappedKiB is how much of the file at path this process has resident
// through its mappings, from /proc/self/smaps.
func mappedKiB(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) > 0 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && fields[len(fields)-1] == path
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("smaps line %q: %v", line, err)
			}
			total += kib
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// TestLoadedSnapshotLeavesNoPagesResident: a project's snapshot, read whole
// when its write model loads, comes back byte for byte, and leaves none of
// its pages resident in the process's mapping of the file afterwards (read
// through the mapping, all 8 MiB of it stayed in serve's RSS).
func TestLoadedSnapshotLeavesNoPagesResident(t *testing.T) {
	s, path := openStore(t)
	want := make([]byte, 8<<20)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(want)
	if err := s.SaveSnapshot("p1", 7, want); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(path, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := mappedKiB(t, path)
	var seq uint64
	var sum [32]byte
	if err := s.LoadSnapshot("p1", func(q uint64, data []byte) error {
		seq, sum = q, sha256.Sum256(data) // reads every byte
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seq != 7 || sum != sha256.Sum256(want) {
		t.Fatalf("LoadSnapshot = seq %d, the bytes equal: %v; want 7 and the saved bytes", seq, sum == sha256.Sum256(want))
	}
	if after := mappedKiB(t, path); after-before > 1024 {
		t.Errorf("the file's mapping has %d KiB resident after the snapshot was read (%d before); want under 1 MiB more", after, before)
	}
}
