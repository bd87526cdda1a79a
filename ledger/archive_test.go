package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

// appendRecords appends n records of Turn t1 of project p1 and returns every
// event as the stream holds it.
func appendRecords(t *testing.T, s *ledger.Store, n int) []kernel.Recorded {
	t.Helper()
	var last uint64
	for i := 1; i <= n; i++ {
		last = mustAppend(t, s, "p1", last, record("p1", "t1", uint64(i)))
	}
	var all []kernel.Recorded
	if _, err := s.ReadAll(context.Background(), 0, func(b []kernel.Recorded, _ uint64) error {
		all = append(all, b...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return all
}

// openMemory opens a Store on a stream in memory of a new server, made to
// allow purges or not.
func openMemory(t *testing.T, allowPurge bool) *ledger.Store {
	t.Helper()
	cfg := ledger.DefaultConfig()
	cfg.Storage, cfg.AllowPurge = ledger.MemoryStorage, allowPurge
	s, err := ledger.Open(context.Background(), natstest.Connect(t, natstest.Start(t)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// archiveKinds make an empty archive of each kind: a directory, and a
// bucket of a NATS object store (on another server than the stream's).
var archiveKinds = map[string]func(t *testing.T) *ledger.Archive{
	"directory": func(t *testing.T) *ledger.Archive {
		a, err := ledger.OpenArchive(filepath.Join(t.TempDir(), "archive"))
		if err != nil {
			t.Fatal(err)
		}
		return a
	},
	"object store": func(t *testing.T) *ledger.Archive {
		js, err := jetstream.New(natstest.Connect(t, natstest.Start(t)))
		if err != nil {
			t.Fatal(err)
		}
		a, err := ledger.OpenObjectArchive(context.Background(), js, "tl-archive", 1)
		if err != nil {
			t.Fatal(err)
		}
		return a
	},
}

func TestArchiveThenPurgeKeepsEveryEventOnce(t *testing.T) {
	for kind, newArchive := range archiveKinds {
		t.Run(kind, func(t *testing.T) { archiveThenPurge(t, newArchive(t)) })
	}
}

func archiveThenPurge(t *testing.T, a *ledger.Archive) {
	ctx := context.Background()
	s := openMemory(t, true)
	all := appendRecords(t, s, 25)
	// Up to ledger_seq 20, in segments of 8, stopping before turn_seq 18.
	last, err := s.ArchiveTo(ctx, a, 20, 8, func(r kernel.Recorded) bool {
		return r.Event.Data.(*kernel.TurnRecordAppended).TurnSeq >= 18
	})
	if err != nil || last != 17 {
		t.Fatalf("ArchiveTo(20, stop at 18) = %d, %v; want 17", last, err)
	}
	segs, err := a.Segments()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, seg := range segs {
		names = append(names, seg.Name)
		if seg.Bytes <= 0 {
			t.Errorf("segment %s has %d bytes", seg.Name, seg.Bytes)
		}
		if n, err := a.Verify(seg); err != nil {
			t.Errorf("Verify(%s) = %d, %v", seg.Name, n, err)
		}
	}
	want := []string{ledger.SegmentName(1, 8), ledger.SegmentName(9, 16), ledger.SegmentName(17, 17)}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("segments (-want +got):\n%s", diff)
	}
	// A second run continues where the first ended; nothing is repeated.
	if last, err = s.ArchiveTo(ctx, a, 20, 8, nil); err != nil || last != 20 {
		t.Fatalf("ArchiveTo(20) again = %d, %v; want 20", last, err)
	}
	if err := s.PurgeBelow(ctx, 21); err != nil {
		t.Fatal(err)
	}
	if first, err := s.FirstSeq(ctx); err != nil || first != 21 {
		t.Fatalf("FirstSeq after PurgeBelow(21) = %d, %v; want 21", first, err)
	}
	// The archive and what is left of the stream are every event, once.
	var got []kernel.Recorded
	if _, err := a.Read(ctx, 0, 5, func(b []kernel.Recorded) error { got = append(got, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadAll(ctx, 20, func(b []kernel.Recorded, _ uint64) error { got = append(got, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("archive + stream (-want +got):\n%s", diff)
	}
	// The engine's catch-up reads the project past the horizon.
	if rs, _ := readProject(t, s, "p1", 22); len(rs) != 3 {
		t.Errorf("ReadProject after 22 = %d events, want 3", len(rs))
	}
}

func TestArchiveRefusesAGapBeforeTheStream(t *testing.T) {
	ctx := context.Background()
	s := openMemory(t, true)
	appendRecords(t, s, 5)
	if err := s.PurgeBelow(ctx, 4); err != nil {
		t.Fatal(err)
	}
	a, err := ledger.OpenArchive(t.TempDir()) // not the one the stream was purged into
	if err != nil {
		t.Fatal(err)
	}
	if last, err := s.ArchiveTo(ctx, a, 5, 10, nil); err == nil {
		t.Errorf("ArchiveTo on an archive that ends before the stream = %d, nil; want an error", last)
	}
}

func TestPurgeDeniedOnAnAppendOnlyStream(t *testing.T) {
	ctx := context.Background()
	s := openMemory(t, false)
	appendRecords(t, s, 3)
	if err := s.PurgeBelow(ctx, 3); !errors.Is(err, ledger.ErrPurgeDenied) {
		t.Errorf("PurgeBelow on a deny_purge stream = %v, want ErrPurgeDenied", err)
	}
	if first, _ := s.FirstSeq(ctx); first != 1 {
		t.Errorf("FirstSeq = %d, want 1 (nothing purged)", first)
	}
}

func TestArchiveVerifyFindsDamageAndOpenCleansACrash(t *testing.T) {
	dir := t.TempDir()
	a, err := ledger.OpenArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := kernel.MarshalEvent(record("p1", "t1", 1))
	if err != nil {
		t.Fatal(err)
	}
	seg, err := a.WriteSegment([]ledger.ArchiveLine{{LedgerSeq: 1, Subject: "tl.p1.turn", Event: data}, {LedgerSeq: 2, Subject: "tl.p1.turn", Event: data}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := a.Verify(seg); err != nil || n != 2 {
		t.Fatalf("Verify = %d, %v; want 2, nil", n, err)
	}
	// Below the last: refused.
	if _, err := a.WriteSegment([]ledger.ArchiveLine{{LedgerSeq: 2, Subject: "tl.p1.turn", Event: data}}); err == nil {
		t.Error("WriteSegment at ledger_seq 2 after 2 = nil, want an error")
	}
	path := filepath.Join(dir, seg.Name)
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0xff
	os.WriteFile(path, b, 0o600)
	if _, err := a.Verify(seg); !errors.Is(err, ledger.ErrArchiveDamaged) {
		t.Errorf("Verify of a flipped byte = %v, want ErrArchiveDamaged", err)
	}
	// What a crash while writing leaves: a temporary file and a lone checksum.
	os.WriteFile(filepath.Join(dir, ledger.SegmentName(3, 4)+".tmp"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, ledger.SegmentName(3, 4)+".sha256"), []byte("x"), 0o600)
	if _, err := ledger.OpenArchive(dir); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if diff := cmp.Diff([]string{seg.Name, seg.Name + ".sha256"}, left); diff != "" {
		t.Errorf("files after OpenArchive (-want +got):\n%s", diff)
	}
}

func TestArchivedReadsCrossFromTheArchiveToTheStream(t *testing.T) {
	ctx := context.Background()
	s := openMemory(t, true)
	var last uint64
	for i := 1; i <= 6; i++ {
		last = mustAppend(t, s, "p1", last, record("p1", "t1", uint64(i)))
		mustAppend(t, s, "p2", lastSeq(t, s, "p2"), heartbeat("p2", "a"))
	}
	all := appendRecords(t, s, 0)
	a, err := ledger.OpenArchive(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.WithArchive(s, a)
	if err := l.PurgeBelow(ctx, 5); err == nil {
		t.Fatal("PurgeBelow(5) before archiving = nil, want an error")
	}
	if _, err := s.ArchiveTo(ctx, a, 7, 3, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.PurgeBelow(ctx, 8); err != nil {
		t.Fatal(err)
	}
	var got []kernel.Recorded
	if _, err := l.ReadAll(ctx, 0, func(b []kernel.Recorded, _ uint64) error { got = append(got, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("ReadAll over archive and stream (-want +got):\n%s", diff)
	}
	var p1 []kernel.Recorded
	for _, r := range all {
		if r.Event.ProjectID == "p1" && r.Seq > 2 {
			p1 = append(p1, r)
		}
	}
	got = nil
	if _, err := l.ReadProject(ctx, "p1", 2, func(r kernel.Recorded) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p1, got); diff != "" {
		t.Errorf("ReadProject(p1, 2) over archive and stream (-want +got):\n%s", diff)
	}
	got = nil
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = l.Follow(fctx, 0, func(b []kernel.Recorded) error {
		got = append(got, b...)
		if len(got) >= len(all) {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow = %v, want it canceled", err)
	}
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("Follow over archive and stream (-want +got):\n%s", diff)
	}
}

// A project whose every event lies below the horizon keeps its last one in
// the stream: the per-project expectation of its next append still holds.
func TestPurgeKeepsEachSubjectsLastEvent(t *testing.T) {
	ctx := context.Background()
	s := openMemory(t, true)
	var p1 uint64
	for i := 1; i <= 3; i++ {
		p1 = mustAppend(t, s, "p1", p1, record("p1", "t1", uint64(i)))
	}
	p2 := mustAppend(t, s, "p2", 0, record("p2", "t2", 1))
	p2 = mustAppend(t, s, "p2", p2, record("p2", "t2", 2))
	for i := 4; i <= 6; i++ {
		p1 = mustAppend(t, s, "p1", p1, record("p1", "t1", uint64(i)))
	}
	a, err := ledger.OpenArchive(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ArchiveTo(ctx, a, 7, 100, nil); err != nil {
		t.Fatal(err)
	}
	l := ledger.WithArchive(s, a)
	if err := l.PurgeBelow(ctx, 8); err != nil {
		t.Fatal(err)
	}
	// Left: p2's last (5) and p1's 8.
	if n, err := s.Messages(ctx); err != nil || n != 2 {
		t.Errorf("Messages after PurgeBelow(8) = %d, %v; want 2 (the last of each subject)", n, err)
	}
	if last := lastSeq(t, s, "p2"); last != p2 {
		t.Errorf("LastSeq(p2) = %d, want %d (kept)", last, p2)
	}
	if _, err := s.Append(ctx, "p2", p2, record("p2", "t2", 3)); err != nil {
		t.Errorf("Append(p2, expecting %d) after the purge = %v", p2, err)
	}
	var got []uint64
	if _, err := l.ReadProject(ctx, "p2", 0, func(r kernel.Recorded) error { got = append(got, r.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{4, 5, 9}, got); diff != "" {
		t.Errorf("ReadProject(p2) over archive and stream (-want +got):\n%s", diff)
	}
}

// TestObjectArchiveOutlivesItsWriter: an archive in an object store bucket
// is read back by another connection (another instance) as written; a
// damaged object fails Verify; a checksum left without its segment by a
// crash is removed when the archive is next opened for writing.
func TestObjectArchiveOutlivesItsWriter(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	a, err := ledger.OpenObjectArchive(ctx, js, "tl-archive", 1)
	if err != nil {
		t.Fatal(err)
	}
	s := openMemory(t, true)
	all := appendRecords(t, s, 12)
	if _, err := s.ArchiveTo(ctx, a, 12, 5, nil); err != nil {
		t.Fatal(err)
	}
	if a.Where() != "nats://tl-archive" {
		t.Errorf("Where() = %q, want nats://tl-archive", a.Where())
	}

	js2, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ledger.ReadObjectArchive(ctx, js2, "tl-archive")
	if err != nil {
		t.Fatal(err)
	}
	var got []kernel.Recorded
	if _, err := b.Read(ctx, 0, 100, func(rs []kernel.Recorded) error { got = append(got, rs...); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("the archive read by another connection (-want +got):\n%s", diff)
	}

	obs, err := js2.ObjectStore(ctx, "tl-archive")
	if err != nil {
		t.Fatal(err)
	}
	segs, err := b.Segments()
	if err != nil || len(segs) != 3 {
		t.Fatalf("Segments() = %v, %v; want 3", segs, err)
	}
	data, err := obs.GetBytes(ctx, segs[1].Name)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if _, err := obs.PutBytes(ctx, segs[1].Name, data); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(segs[1]); !errors.Is(err, ledger.ErrArchiveDamaged) {
		t.Errorf("Verify(a changed object) = %v, want ErrArchiveDamaged", err)
	}

	orphan := ledger.SegmentName(13, 20) + ".sha256"
	if _, err := obs.PutString(ctx, orphan, "0  x\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.OpenObjectArchive(ctx, js2, "tl-archive", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.GetInfo(ctx, orphan); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("a checksum without its segment after reopening: %v, want it removed", err)
	}
}
