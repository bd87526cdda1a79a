package projection

import "fmt"

// Health is the projector's state against the ledger's head, for readiness
// and the diagnostics of projection pages.
type Health struct {
	AppliedSeq uint64 `json:"applied_seq"`
	Lag        uint64 `json:"lag"`
	Failing    bool   `json:"failing"`
	LastError  string `json:"last_error,omitempty"`
	// Rebuilding: the projection file was found damaged at start, moved
	// aside, and is being rebuilt from the ledger (serve is not ready).
	Rebuilding bool `json:"rebuilding,omitempty"`
}

// Health reports the projector against the ledger's head.
func (p *Projector) Health(head uint64) Health {
	st := p.Status()
	h := Health{AppliedSeq: st.Checkpoint, Failing: st.Failing, LastError: st.LastError}
	if head > st.Checkpoint {
		h.Lag = head - st.Checkpoint
	}
	return h
}

// Problem is one thing a reader of the projections should know: a code and
// a message.
type Problem struct {
	Code    string
	Message string
}

// Problems returns what is wrong with the projections: projection_failing
// when the projector cannot follow the ledger, projection_lag when it is
// behind the head.
func (h Health) Problems() []Problem {
	var out []Problem
	if h.Failing {
		out = append(out, Problem{Code: "projection_failing", Message: "the projector cannot follow the ledger: " + h.LastError})
	}
	if h.Lag > 0 {
		out = append(out, Problem{Code: "projection_lag", Message: fmt.Sprintf("projections are %d events behind the ledger (applied %d, head %d)", h.Lag, h.AppliedSeq, h.AppliedSeq+h.Lag)})
	}
	return out
}
