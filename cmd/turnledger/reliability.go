package main

import (
	"fmt"

	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

// projectionSyncFlag parses --projection-sync.
func projectionSyncFlag(dst *string) func(string) error {
	return func(v string) error {
		switch v {
		case serve.ProjectionSyncClose, serve.ProjectionSyncCommit:
			*dst = v
			return nil
		}
		return fmt.Errorf("must be %q or %q", serve.ProjectionSyncClose, serve.ProjectionSyncCommit)
	}
}

// syncFlag parses --sync.
func syncFlag(dst *ledger.Sync) func(string) error {
	return func(v string) error {
		switch s := ledger.Sync(v); s {
		case ledger.SyncAlways, ledger.SyncInterval:
			*dst = s
			return nil
		}
		return fmt.Errorf("must be %q or %q", ledger.SyncAlways, ledger.SyncInterval)
	}
}
