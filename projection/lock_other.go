//go:build !unix

package projection

// Locked cannot ask the lock on this platform: it reports false, and the
// caller relies on bbolt's own lock when it opens the file.
func Locked(path string) (bool, error) { return false, nil }
