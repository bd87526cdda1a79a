package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/turnledger/turnledger/internal/natstest"
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
	names := writeSegments(t, a)
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

// TestArchiveCommandsReadABucket: ls, verify and cat of an archive in a NATS
// object store bucket, named nats://<bucket> with --nats-url.
func TestArchiveCommandsReadABucket(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	a, err := ledger.OpenObjectArchive(t.Context(), js, "tl-archive", 1)
	if err != nil {
		t.Fatal(err)
	}
	writeSegments(t, a)
	var out bytes.Buffer
	args := []string{"--dir", "nats://tl-archive", "--nats-url", srv.ClientURL()}
	if code := Main(t.Context(), append([]string{"archive", "verify"}, args...), &out, &out); code != 0 || !strings.Contains(out.String(), "3 segments, 6 events: ok") {
		t.Errorf("archive verify of a bucket = %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := Main(t.Context(), append([]string{"archive", "ls"}, args...), &out, &out); code != 0 || !strings.Contains(out.String(), "3 segments") {
		t.Errorf("archive ls of a bucket = %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := Main(t.Context(), append([]string{"archive", "cat", "--after", "4"}, args...), &out, &out); code != 0 || strings.Count(out.String(), "\n") != 2 || !strings.Contains(out.String(), `"ledger_seq":5`) {
		t.Errorf("archive cat --after 4 of a bucket = %d:\n%s\nwant the events 5 and 6", code, out.String())
	}
	out.Reset()
	if code := Main(t.Context(), []string{"archive", "ls", "--dir", "nats://no-such-bucket", "--nats-url", srv.ClientURL()}, &out, &out); code == 0 {
		t.Errorf("archive ls of a missing bucket = %d:\n%s\nwant a failure", code, out.String())
	}
}

// writeSegments writes three segments of two events each (ledger_seq 1 to
// 6) and returns their names.
func writeSegments(t *testing.T, a *ledger.Archive) []string {
	t.Helper()
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
	return names
}
