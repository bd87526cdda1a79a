package projection

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

// filledFile writes a projection file of a long scenario, closes it, and
// returns its path and the scenario.
func filledFile(t *testing.T) (string, *events) {
	t.Helper()
	l := scenario(7, 1500)
	path := filepath.Join(t.TempDir(), "projections.db")
	s, err := Open(path, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, l.recs)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path, l
}

// damage functions: each spoils the file at path the way a crash, a bad disk
// or a stray write might.
var damages = map[string]func(t *testing.T, path string){
	"truncated in the middle": func(t *testing.T, path string) {
		fi, _ := os.Stat(path)
		if err := os.Truncate(path, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	},
	"middle zeroed": func(t *testing.T, path string) { overwrite(t, path, func(n int) []byte { return make([]byte, n) }) },
	"middle randomised": func(t *testing.T, path string) {
		rng := rand.New(rand.NewPCG(1, 2))
		overwrite(t, path, func(n int) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			return b
		})
	},
	"all random bytes": func(t *testing.T, path string) {
		rng := rand.New(rand.NewPCG(3, 4))
		b := make([]byte, 256<<10)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	},
	"empty": func(t *testing.T, path string) {
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
	},
	"a stray write inside a page in use": func(t *testing.T, path string) {
		// 32 bytes in the middle of a leaf page past the middle of the file,
		// its header left alone: bbolt's check and the page headers pass.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := readMeta(f, 0)
		if m1, err1 := readMeta(f, int64(m.pageSize)); err != nil || err1 == nil && m1.txid > m.txid {
			m, err = m1, err1
		}
		if err != nil {
			t.Fatal(err)
		}
		free, err := readFreelist(f, m)
		if err != nil {
			t.Fatal(err)
		}
		ps := int64(m.pageSize)
		h := make([]byte, pageHeaderSize)
		for id := m.pgid / 2; id < m.pgid; id++ {
			f.ReadAt(h, int64(id)*ps)
			if free[id] || binary.LittleEndian.Uint64(h) != id || binary.LittleEndian.Uint16(h[8:]) != leafPage {
				continue
			}
			if _, err := f.WriteAt(bytes.Repeat([]byte{0x5a}, 32), int64(id)*ps+ps/2); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatal("no leaf page in use in the second half of the file")
	},
	"first meta page zeroed": func(t *testing.T, path string) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(make([]byte, 4096), 0); err != nil {
			t.Fatal(err)
		}
		// and the second's checksum spoiled
		if _, err := f.WriteAt([]byte{1, 2, 3}, 4096+16+8); err != nil {
			t.Fatal(err)
		}
	},
}

// overwrite replaces the middle third of the file (past the meta pages)
// with fill's bytes.
func overwrite(t *testing.T, path string, fill func(n int) []byte) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off, n := fi.Size()/3, int(fi.Size()/3)
	if _, err := f.WriteAt(fill(n), off); err != nil {
		t.Fatal(err)
	}
}

func TestCheckFindsDamageAndOpenHealingRebuilds(t *testing.T) {
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			path, l := filledFile(t)
			if err := Check(path); err != nil {
				t.Fatalf("Check(sound file) = %v, want nil", err)
			}
			damage(t, path)
			err := Check(path)
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("Check(damaged file) = %v, want ErrDamaged", err)
			}
			s, healed, err := OpenHealing(path, testConfig())
			if err != nil {
				t.Fatalf("OpenHealing = %v", err)
			}
			defer s.Close()
			if healed == nil || !strings.HasPrefix(healed.MovedTo, path+".damaged-") || healed.Reason == "" {
				t.Fatalf("OpenHealing healed = %+v, want the file moved aside with a reason", healed)
			}
			if _, err := os.Stat(healed.MovedTo); err != nil {
				t.Errorf("moved-aside file: %v", err)
			}
			if s.Checkpoint() != 0 {
				t.Errorf("healed store checkpoint = %d, want 0 (to be rebuilt)", s.Checkpoint())
			}
			mustApply(t, s, l.recs)
			if diff := cmp.Diff(mustDump(t, applied(t, l)), mustDump(t, s)); diff != "" {
				t.Errorf("rebuilt store differs from a fresh fold (-fresh +rebuilt):\n%s", diff)
			}
		})
	}
}

func TestOpenHealingKeepsASoundFile(t *testing.T) {
	path, l := filledFile(t)
	s, healed, err := OpenHealing(path, testConfig())
	if err != nil || healed != nil {
		t.Fatalf("OpenHealing(sound) = %+v, %v; want no healing", healed, err)
	}
	defer s.Close()
	if s.Checkpoint() != l.recs[len(l.recs)-1].Seq {
		t.Errorf("checkpoint = %d, want %d", s.Checkpoint(), l.recs[len(l.recs)-1].Seq)
	}
	if err := Check(filepath.Join(t.TempDir(), "missing.db")); err != nil {
		t.Errorf("Check(missing file) = %v, want nil (a new file is made)", err)
	}
}

func TestOpenHealingMovesAsideAnotherSchema(t *testing.T) {
	s, path := openStore(t)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktMeta).Put(keySchema, putU64(SchemaVersion+1))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, healed, err := OpenHealing(path, testConfig())
	if err != nil || healed == nil {
		t.Fatalf("OpenHealing(other schema) = %+v, %v; want it moved aside", healed, err)
	}
	s2.Close()
}

// TestReadOfDamagedPageFailsTheStore: damage under a running store makes a
// read fail with ErrDamaged (not a panic) and marks the store.
func TestReadOfDamagedPageFailsTheStore(t *testing.T) {
	path, _ := filledFile(t)
	s, err := Open(path, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.ReadFailure() != "" {
		t.Fatalf("ReadFailure of a sound store = %q", s.ReadFailure())
	}
	damages["middle zeroed"](t, path)
	var failed error
	for _, read := range []func() error{
		func() error { _, err := s.Turns(proj, TurnFilter{}, MaxLimit); return err },
		func() error { _, err := s.ProjectFeed(proj, 0, MaxLimit); return err },
		func() error { _, err := s.Dump(); return err },
	} {
		if err := read(); err != nil {
			failed = err
		}
	}
	if !errors.Is(failed, ErrDamaged) {
		t.Fatalf("reads over zeroed pages = %v, want ErrDamaged", failed)
	}
	if s.ReadFailure() == "" {
		t.Errorf("ReadFailure() = \"\" after a damaged read, want the reason")
	}
}

func TestLockedAsksTheLock(t *testing.T) {
	s, path := openStore(t)
	if locked, err := Locked(path); err != nil || !locked {
		t.Errorf("Locked(open file) = %v, %v; want true", locked, err)
	}
	s.Close()
	if locked, err := Locked(path); err != nil || locked {
		t.Errorf("Locked(closed file) = %v, %v; want false", locked, err)
	}
	if locked, err := Locked(path + ".missing"); err != nil || locked {
		t.Errorf("Locked(missing file) = %v, %v; want false", locked, err)
	}
}

// TestALockedFileIsInUseNeverDamaged: a file another process holds (here a
// second open of it, which flock tells apart just the same) is reported in
// use by Check, OpenHealing, MoveAside and Open, and is never moved aside —
// whether it is sound, or damaged under the running store.
func TestALockedFileIsInUseNeverDamaged(t *testing.T) {
	path, l := filledFile(t)
	s, err := Open(path, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.OpenTimeout = 10 * time.Millisecond
	check := func(what string) {
		t.Helper()
		if err := Check(path); !errors.Is(err, ErrInUse) || errors.Is(err, ErrDamaged) {
			t.Errorf("%s: Check(held file) = %v, want ErrInUse and not ErrDamaged", what, err)
		}
		if s2, healed, err := OpenHealing(path, cfg); !errors.Is(err, ErrInUse) || healed != nil {
			if s2 != nil {
				s2.Close()
			}
			t.Errorf("%s: OpenHealing(held file) = %+v, %v; want ErrInUse and nothing healed", what, healed, err)
		}
		if aside, err := MoveAside(path, time.Now()); !errors.Is(err, ErrInUse) {
			t.Errorf("%s: MoveAside(held file) = %q, %v; want ErrInUse", what, aside, err)
		}
		if s2, err := Open(path, cfg); !errors.Is(err, ErrInUse) {
			if s2 != nil {
				s2.Close()
			}
			t.Errorf("%s: Open(held file) = %v, want ErrInUse", what, err)
		}
		after, err := os.Stat(path)
		if err != nil || !os.SameFile(before, after) {
			t.Errorf("%s: the held file was replaced or moved (Stat = %v)", what, err)
		}
		if aside, _ := filepath.Glob(path + ".damaged-*"); len(aside) != 0 {
			t.Errorf("%s: files moved aside: %v, want none", what, aside)
		}
	}
	check("sound")
	if cp := s.Checkpoint(); cp != l.recs[len(l.recs)-1].Seq {
		t.Errorf("the holder's checkpoint = %d, want %d", cp, l.recs[len(l.recs)-1].Seq)
	}
	damages["truncated in the middle"](t, path)
	check("damaged under its holder")

	// Once the holder is gone, the damage is found and healed.
	s.Close()
	s2, healed, err := OpenHealing(path, testConfig())
	if err != nil || healed == nil {
		t.Fatalf("OpenHealing(released damaged file) = %+v, %v; want it moved aside", healed, err)
	}
	s2.Close()
}

// The check on open reads every page in use (scanPages); a file closed
// cleanly is compared with the sum of its pages taken at close (pagesum.go),
// and bbolt's own check of every page's contents runs on any other: one not
// closed cleanly, or one closed cleanly with no sum to compare (its mark of
// a clean close is then only its own word). A leaf page whose header is
// intact but whose first two keys are swapped shows each: a file closed
// cleanly fails on its sum, and without a sum on bbolt's check; one left by
// a crashed process fails bbolt's check (the keys out of order).
func TestCheckOfPagesRunsOnAFileNotClosedCleanly(t *testing.T) {
	le := binary.LittleEndian
	swapKeys := func(t *testing.T, path string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := readMeta(f, 0)
		if err != nil {
			t.Fatal(err)
		}
		if m1, err := readMeta(f, int64(m.pageSize)); err == nil && m1.txid > m.txid {
			m = m1
		}
		free, err := readFreelist(f, m)
		if err != nil {
			t.Fatal(err)
		}
		page := make([]byte, m.pageSize)
		for id := uint64(2); id < m.pgid; id++ {
			if free[id] {
				continue
			}
			off := int64(id) * int64(m.pageSize)
			f.ReadAt(page, off)
			if le.Uint64(page) != id || le.Uint16(page[8:]) != leafPage || le.Uint32(page[12:]) != 0 || le.Uint16(page[10:]) < 2 {
				continue
			}
			// Leaf elements: flags, pos, ksize, vsize (4 bytes each); a
			// key is pos bytes after its element.
			e0, e1 := page[pageHeaderSize:], page[pageHeaderSize+16:]
			k0, k1 := pageHeaderSize+int(le.Uint32(e0[4:])), pageHeaderSize+16+int(le.Uint32(e1[4:]))
			n := int(le.Uint32(e0[8:]))
			if n != int(le.Uint32(e1[8:])) || k1+n > len(page) || string(page[k0:k0+n]) == string(page[k1:k1+n]) {
				continue
			}
			a := append([]byte(nil), page[k0:k0+n]...)
			copy(page[k0:k0+n], page[k1:k1+n])
			copy(page[k1:k1+n], a)
			if _, err := f.WriteAt(page, off); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatal("no leaf page in use with two keys of one length")
	}

	path, _ := filledFile(t)
	swapKeys(t, path)
	if err := Check(path); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "changed since it was closed cleanly") {
		t.Errorf("Check(file closed cleanly, two keys swapped) = %v, want ErrDamaged from the sum of its pages", err)
	}
	if err := os.Remove(path + sumSuffix); err != nil {
		t.Fatal(err)
	}
	if err := Check(path); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "needs to be > (found <) than previous element") {
		t.Errorf("Check(file closed cleanly without a sum, two keys swapped) = %v, want ErrDamaged from bbolt's check (keys out of order)", err)
	}

	// A file written without fsync whose process died: it keeps its mark.
	path = filepath.Join(t.TempDir(), "projections.db")
	cfg := testConfig()
	if cfg.Boot = BootID(); cfg.Boot == "" {
		cfg.Boot = "a-boot"
	}
	s, err := Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, scenario(7, 1500).recs)
	if err := s.db.Close(); err != nil { // the process dies: no Close, no fsync, the mark stays
		t.Fatal(err)
	}
	if err := Check(path); err != nil {
		t.Fatalf("Check(sound file not closed cleanly) = %v, want nil", err)
	}
	swapKeys(t, path)
	if err := Check(path); !errors.Is(err, ErrDamaged) {
		t.Errorf("Check(file not closed cleanly, two keys swapped) = %v, want ErrDamaged from bbolt's check", err)
	}
}

// TestThePageSumDescribesOnlyTheFileAsClosed: a sum is written at a clean
// close; opening the file for writing removes it, and a file reopened,
// written and closed again is summed anew, so a sound file never fails on a
// sum of an older state; a file moved aside takes its sum with it.
func TestThePageSumDescribesOnlyTheFileAsClosed(t *testing.T) {
	path, _ := filledFile(t)
	old, err := os.ReadFile(path + sumSuffix)
	if err != nil {
		t.Fatalf("no sum after a clean close: %v", err)
	}
	s, err := Open(path, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + sumSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sum is still there once the file is open for writing: %v", err)
	}
	if err := s.update(func(tx *bolt.Tx) error { return tx.Bucket(bktMeta).Put([]byte("test"), make([]byte, 9000)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Check(path); err != nil {
		t.Errorf("Check(file written again and closed) = %v, want nil", err)
	}
	if err := os.WriteFile(path+sumSuffix, old, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Check(path); err != nil {
		t.Errorf("Check(file with the sum of its older state) = %v, want nil (a sum of another txid is ignored)", err)
	}
	aside, err := MoveAside(path, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(aside + sumSuffix); err != nil {
		t.Errorf("the sum did not go aside with its file: %v", err)
	}
	if _, err := os.Stat(path + sumSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a sum is left where the file was: %v", err)
	}
}

// TestOpenOfADamagedFileIsAnErrorNotAPanic: bbolt panics on a key of no
// bytes in the page of the bucket names; Open answers ErrDamaged instead,
// and, with no page sum to vouch for the file, Check finds the damage too
// (bbolt's check runs), so that OpenHealing moves the file aside and starts
// afresh.
func TestOpenOfADamagedFileIsAnErrorNotAPanic(t *testing.T) {
	path, _ := filledFile(t)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := readMeta(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m1, err := readMeta(f, int64(m.pageSize)); err == nil && m1.txid > m.txid {
		m = m1
	}
	page := make([]byte, m.pageSize)
	off := int64(m.root) * int64(m.pageSize)
	if _, err := f.ReadAt(page, off); err != nil {
		t.Fatal(err)
	}
	// The first element's key size: after flags and pos on a leaf page,
	// after pos on a branch page.
	ksize := pageHeaderSize + 8
	if binary.LittleEndian.Uint16(page[8:]) == branchPage {
		ksize = pageHeaderSize + 4
	}
	binary.LittleEndian.PutUint32(page[ksize:], 0)
	if _, err := f.WriteAt(page, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Remove(path + sumSuffix); err != nil {
		t.Fatal(err)
	}

	if st, err := Open(path, testConfig()); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "zero-length") {
		if st != nil {
			st.Close()
		}
		t.Fatalf("Open(a key of no bytes) = %v, want ErrDamaged naming bbolt's complaint", err)
	}
	if err := Check(path); !errors.Is(err, ErrDamaged) {
		t.Errorf("Check(a key of no bytes, no page sum) = %v, want ErrDamaged", err)
	}
	st, healed, err := OpenHealing(path, testConfig())
	if err != nil || healed == nil {
		t.Fatalf("OpenHealing(a key of no bytes) = %+v, %v; want the file moved aside", healed, err)
	}
	defer st.Close()
	if got := st.Checkpoint(); got != 0 {
		t.Errorf("the fresh file's checkpoint = %d, want 0 (rebuilt from the ledger)", got)
	}
}
