package kernel_test

import (
	"bytes"
	"testing"

	"github.com/turnledger/turnledger/kernel"
)

// FuzzUnmarshalEvent: any bytes from the ledger decode to an event or an
// error, never a panic; an event that decodes and encodes again decodes to
// the same encoding (the codec is stable).
func FuzzUnmarshalEvent(f *testing.F) {
	f.Add([]byte(`{"type":"turn.dispatched","v":1,"project_id":"p","aggregate":"turn","id":"t","at":"2026-11-21T12:00:00Z","actor":{"kind":"admin"},"data":{"requested_by":{"project_id":"p","agent_id":"a"},"target_agent":{"project_id":"p","agent_id":"b"},"input":{},"turn_kind":"k"},"idem":{"ref":"r","request":"q"}}`))
	f.Add([]byte(`{"type":"turn.claimed","v":1,"project_id":"p","aggregate":"turn","id":"t","data":{"claim_id":"c","agent_id":"a","token_hash":"h","expires_at":"2026-11-21T12:00:00Z"}}`))
	f.Add([]byte(`{"type":"turn.teleported","v":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := kernel.UnmarshalEvent(b)
		if err != nil {
			return
		}
		once, err := kernel.MarshalEvent(e)
		if err != nil {
			return // a decodable event with ids that may not enter the ledger
		}
		e2, err := kernel.UnmarshalEvent(once)
		if err != nil {
			t.Fatalf("UnmarshalEvent(MarshalEvent(%q)) = %v", b, err)
		}
		twice, err := kernel.MarshalEvent(e2)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("re-encoding is not stable:\n%s\n%s (%v)", once, twice, err)
		}
	})
}

// FuzzParseWorkMemoryReport: any body decodes to a report or a validation
// error, never a panic or another kind.
func FuzzParseWorkMemoryReport(f *testing.F) {
	f.Add([]byte(`{"kind":"agent_work_memory_report_manifest.v1","records":[{"meta":1}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := kernel.ParseWorkMemoryReport(b); err != nil && kernel.ErrorKind(err) == kernel.Internal {
			t.Fatalf("ParseWorkMemoryReport(%q) = %v, an internal error", b, err)
		}
	})
}
