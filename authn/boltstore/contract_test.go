package boltstore_test

import (
	"testing"

	"github.com/turnledger/turnledger/authn/storetest"
)

// TestContract runs the store contract shared with the PostgreSQL store.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return open(t, nil) })
}
