package kernel

import "errors"

// ErrUnavailable is what a Ledger returns (wrapped) when it could not take
// an append right now: the storage is full or failing, or the server did not
// answer in time. The change may or may not be stored; the client should
// retry later with the same Idempotency-Key, which makes the retry safe.
// httpapi answers it with 503, never 500.
var ErrUnavailable = errors.New("kernel: the ledger is unavailable")
