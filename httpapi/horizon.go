package httpapi

import "github.com/turnledger/turnledger/projection"

// Feeds below the retention horizon. A feed read (page or event stream)
// whose after_ledger_seq lies below the horizon - 1 answers 410 with a
// GoneError that names the horizon, never a page that silently skips the
// events that are only in the archive now; an event stream that finds
// itself below the horizon sends a comment saying so, the same error as an
// "error" event, and ends.

// GoneError is the body of a 410.
type GoneError struct {
	Error            string `json:"error"`
	Message          string `json:"message"`
	HorizonLedgerSeq uint64 `json:"horizon_ledger_seq"`
}

func goneBody(ge *projection.GoneError) GoneError {
	return GoneError{Error: "GoneError", Message: ge.Error(), HorizonLedgerSeq: ge.Horizon}
}
