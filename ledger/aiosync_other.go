//go:build !linux

package ledger

import (
	"errors"
	"os"
)

// aioSyncer is Linux's: elsewhere the group commit fsyncs plainly.
type aioSyncer struct{}

var (
	errAIOUnsupported = errors.New("ledger: asynchronous fsync is Linux's")
	errAIOBroken      = errors.New("ledger: asynchronous fsync lost track of its completions")
)

func newAIOSyncer() (*aioSyncer, error) { return nil, errAIOUnsupported }

func (*aioSyncer) sync([]*os.File) error { return errAIOUnsupported }

func (*aioSyncer) close() {}
