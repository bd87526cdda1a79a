package projection

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// Compaction. bbolt reuses the pages a deletion frees but never gives them
// back to the file system, so a file that retention trimmed keeps its size.
// Compact copies a closed projection file into a new one, every page full,
// and swaps it in; serve does it at start when at least a given share of the
// file is free pages (CompactIfFree), never while serving: a copy of a live
// file would have to hold the fold back for as long as it runs.

// CompactResult is what a compaction found and did.
type CompactResult struct {
	Compacted   bool    `json:"compacted"`
	BytesBefore int64   `json:"bytes_before"`
	BytesAfter  int64   `json:"bytes_after"`
	FreeShare   float64 `json:"free_share"` // of the file's pages, before
}

// FreeShare opens the closed projection file at path and returns the share
// of its pages that are free, and its size. It changes nothing, but opens
// the file for writing: bbolt reads the free list only then.
func FreeShare(path string) (float64, int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 1})
	if err != nil {
		return 0, 0, fmt.Errorf("projection: free share of %s: %w", path, err)
	}
	defer db.Close()
	var share float64
	err = db.View(func(tx *bolt.Tx) error {
		pages := tx.Size() / int64(db.Info().PageSize)
		st := db.Stats()
		if pages > 0 {
			share = float64(st.FreePageN+st.PendingPageN) / float64(pages)
		}
		return nil
	})
	return share, fi.Size(), err
}

// CompactIfFree compacts the closed projection file at path when at least
// minShare of its pages are free (a minShare of 0 or less: never). A file
// that fails its check (Check) is left as it is, for the healing open to
// deal with. The copy is synced and renamed over the file, and the
// directory synced, so a crash leaves the old file or the new one.
func CompactIfFree(path string, minShare float64) (CompactResult, error) {
	var res CompactResult
	if minShare <= 0 {
		return res, nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err := Check(path); err != nil {
		return res, nil // damaged or in use: not ours to copy
	}
	share, size, err := FreeShare(path)
	res.FreeShare, res.BytesBefore, res.BytesAfter = share, size, size
	if err != nil || share < minShare {
		return res, err
	}
	if res.BytesAfter, err = Compact(path); err != nil {
		return res, err
	}
	res.Compacted = true
	return res, nil
}

// Compact copies the closed projection file at path into a new file with
// every page full and renames it over path. It returns the new size.
func Compact(path string) (int64, error) {
	next := path + ".compact"
	os.Remove(next)
	src, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 1})
	if err != nil {
		return 0, fmt.Errorf("projection: compact %s: %w", path, err)
	}
	defer src.Close()
	dst, err := bolt.Open(next, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		return 0, fmt.Errorf("projection: compact %s: %w", path, err)
	}
	err = bolt.Compact(dst, src, 64<<20)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(next)
		return 0, fmt.Errorf("projection: compact %s: %w", path, err)
	}
	src.Close()
	if err := Install(next, path); err != nil {
		return 0, err
	}
	if err := writePageSum(path); err != nil { // the compacted file is closed cleanly
		return 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
