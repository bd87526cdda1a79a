//go:build !unix

package ledger

import (
	"fmt"
	"os"
)

// lockDir only creates dir where flock is not available: two processes on
// the same data directory are not detected there.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("ledger: data directory: %w", err)
	}
	return nil, nil
}
