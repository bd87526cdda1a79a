package main

import (
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

// projectionSyncFlag parses --projection-sync.
func projectionSyncFlag(dst *string) func(string) error {
	return func(v string) (err error) { *dst, err = serve.ParseProjectionSync(v); return err }
}

// syncFlag parses --sync.
func syncFlag(dst *ledger.Sync) func(string) error {
	return func(v string) (err error) { *dst, err = serve.ParseSync(v); return err }
}
