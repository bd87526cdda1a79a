//go:build !unix

package projection

import "os"

// Locked cannot ask the lock on this platform: it reports false, and the
// caller relies on bbolt's own lock when it opens the file.
func Locked(path string) (bool, error) { return false, nil }

// lockNB cannot lock on this platform; bbolt's own lock, taken when the
// file is opened, is the only guard.
func lockNB(f *os.File, path string, exclusive bool) error { return nil }
