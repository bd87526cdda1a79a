package projection

import (
	"fmt"
	"os"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// A snapshot is most of a long project's write model in bytes (tens of MiB
// at a million events), read once when the project loads. Read through
// bbolt's mapping, its pages would stay resident in serve for as long as
// the file is mapped, counted in its RSS beside the heap the snapshot was
// decoded into. So LoadSnapshot reads those bytes from the file with a plain
// read into memory of its own, which is garbage once the write model is
// decoded: bbolt finds the value (touching only the page that holds its key),
// and the read takes the same bytes from the same file, unchanged while the
// read transaction pins them.

// fileBytes returns a copy of v, a value a read transaction of tx returned,
// read from the file rather than through the mapping. It returns v itself
// (mapped) when v does not lie inside the part of the mapping tx covers: it
// never guesses where other bytes are.
func fileBytes(tx *bolt.Tx, v []byte) ([]byte, error) {
	if len(v) < minFileRead {
		return v, nil
	}
	base := tx.DB().Info().Data
	at := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	if at < base || at-base > uintptr(tx.Size()) || uintptr(len(v)) > uintptr(tx.Size())-(at-base) {
		return v, nil // not in the mapped file: read as it is
	}
	f, err := os.Open(tx.DB().Path())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, len(v))
	if _, err := f.ReadAt(buf, int64(at-base)); err != nil {
		return nil, fmt.Errorf("read the snapshot from the file: %w", err)
	}
	return buf, nil
}

// minFileRead is the size from which a snapshot is read from the file: a
// smaller one costs its pages little and the read more than it saves.
const minFileRead = 1 << 20
