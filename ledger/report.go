package ledger

import "context"

// Report is the ledger's part of readiness: the server it talks to, the
// stream, the expectation mode and the head.
type Report struct {
	Kind        string `json:"kind"` // "embedded" or "external": the caller's to say
	URL         string `json:"url,omitempty"`
	Server      string `json:"server_version"`
	Stream      string `json:"stream"`
	Expectation string `json:"expectation"` // "project" or "stream"
	LedgerHead  uint64 `json:"ledger_head"`
	Error       string `json:"error,omitempty"`
}

// Report reads the head and describes the ledger. A head that cannot be read
// is in Error; the rest is filled all the same.
func (s *Store) Report(ctx context.Context) Report {
	r := Report{Server: s.nc.ConnectedServerVersion(), Stream: s.cfg.Stream, Expectation: string(s.mode)}
	head, err := s.Head(ctx)
	if err != nil {
		r.Error = err.Error()
	}
	r.LedgerHead = head
	return r
}
