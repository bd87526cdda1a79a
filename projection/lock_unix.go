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

// lockNB takes a shared or an exclusive flock on f, open at path, or turns
// the one f holds into the other, without waiting. Another process's
// conflicting lock is an error wrapping ErrInUse.
func lockNB(f *os.File, path string, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("%w: %s", ErrInUse, path)
	} else if err != nil {
		return fmt.Errorf("projection: lock %s: %w", path, err)
	}
	return nil
}
