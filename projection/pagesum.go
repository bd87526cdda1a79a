package projection

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// The checksum of a file closed cleanly.
//
// bbolt keeps no checksum of its pages, and its consistency check follows
// the tree's structure only: a stray write or a bad disk sector that
// changes the inside of a page in use (a stored value, the keys of a leaf)
// and leaves its header alone passes both bbolt's check and scanPages, and
// is met by some later read, or never. So when a Store closes cleanly, it
// writes beside the file (path + ".sum") the CRC-32C of every page in use,
// with the txid and the page count of the meta it was taken at. Check, which
// reads every page in use anyway (scanPages), compares: a file whose meta
// is the one summed and whose pages differ is damaged. Open removes the
// sum before it writes anything, so a sum describes only a file that has
// not been opened for writing since; a sum of another txid (a file written
// without closing cleanly: its damage is bbolt's check's to find,
// checkPages) is ignored, as is a missing or unreadable one. Damage in free
// pages is harmless and not looked at.
//
// The sum costs one more read of the file when a Store closes, and nothing
// on open beyond the read scanPages already makes.

const sumSuffix = ".sum"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// pageSum is the content of a sum file.
type pageSum struct {
	TxID   uint64 `json:"txid"`
	PgID   uint64 `json:"pgid"`
	CRC32C uint32 `json:"crc32c"`
}

// writePageSum sums the pages in use of the file at path, closed cleanly,
// and writes the sum beside it, durably (a temporary file renamed).
func writePageSum(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	m, sum, err := checkStructure(f, fi.Size())
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
	}
	b, _ := json.Marshal(pageSum{TxID: m.txid, PgID: m.pgid, CRC32C: sum})
	tmp := path + sumSuffix + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	if t, err := os.Open(tmp); err == nil {
		t.Sync()
		t.Close()
	}
	if err := os.Rename(tmp, path+sumSuffix); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// removePageSum removes the sum of the file at path: it is about to be
// written.
func removePageSum(path string) error {
	if err := os.Remove(path + sumSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("projection: remove %s: %w", path+sumSuffix, err)
	}
	return nil
}

// checkPageSum compares sum, the checksum of the pages in use of the file
// at path as its meta m describes them, with the sum written when it was
// closed cleanly, if there is one of that meta; summed reports that there
// was one and it matched.
func checkPageSum(path string, m boltMeta, sum uint32) (summed bool, err error) {
	b, err := os.ReadFile(path + sumSuffix)
	if err != nil {
		return false, nil
	}
	var want pageSum
	if json.Unmarshal(b, &want) != nil || want.TxID != m.txid || want.PgID != m.pgid {
		return false, nil
	}
	if sum != want.CRC32C {
		return false, fmt.Errorf("its pages in use changed since it was closed cleanly (CRC-32C %08x, was %08x at txid %d)", sum, want.CRC32C, want.TxID)
	}
	return true, nil
}
