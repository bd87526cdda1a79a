package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// TestArchiveVerifyFindsAMissingSegment writes three segments, removes the
// middle one, and expects `turnledger archive verify` to name the missing
// ledger_seqs and exit 1; ls still lists the two left.
func TestArchiveVerifyFindsAMissingSegment(t *testing.T) {
	dir := t.TempDir()
	a, err := ledger.OpenArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := kernel.MarshalEvent(kernel.Event{Type: kernel.EvAgentHeartbeat, V: 1, ProjectID: "p1", Aggregate: kernel.AggAgent, ID: "a",
		At: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), Actor: kernel.Actor{Kind: "admin"}, Data: &kernel.AgentHeartbeat{}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for first := uint64(1); first <= 5; first += 2 {
		seg, err := a.WriteSegment([]ledger.ArchiveLine{{LedgerSeq: first, Subject: "tl.p1.agent", Event: ev}, {LedgerSeq: first + 1, Subject: "tl.p1.agent", Event: ev}})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, seg.Name)
	}
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"archive", "verify", "--dir", dir}, &out, &out); code != 0 || !strings.Contains(out.String(), "3 segments, 6 events: ok") {
		t.Fatalf("archive verify of a whole archive = %d:\n%s", code, out.String())
	}
	os.Remove(filepath.Join(dir, names[1]))
	out.Reset()
	if code := Main(t.Context(), []string{"archive", "verify", "--dir", dir}, &out, &out); code != 1 || !strings.Contains(out.String(), "ledger_seq 3 to 4 are in no segment") {
		t.Errorf("archive verify without its middle segment = %d:\n%s\nwant exit 1 naming ledger_seq 3 to 4", code, out.String())
	}
	out.Reset()
	if code := Main(t.Context(), []string{"archive", "ls", "--dir", dir}, &out, &out); code != 0 || !strings.Contains(out.String(), "2 segments") {
		t.Errorf("archive ls = %d:\n%s", code, out.String())
	}
}
