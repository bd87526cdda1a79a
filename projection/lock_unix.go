//go:build unix

package projection

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Locked reports whether another process holds the projection file at path
// open (bbolt takes an exclusive flock on it). It asks the lock, never opens
// the file as a database, so a damaged file cannot hurt the asker.
func Locked(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("projection: lock check %s: %w", path, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return true, nil
		}
		return false, fmt.Errorf("projection: lock check %s: %w", path, err)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, nil
}
