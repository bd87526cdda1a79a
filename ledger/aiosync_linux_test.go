package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGroupCommitFsyncsThroughAIO: on a Linux kernel that offers
// asynchronous I/O the group commit's fsyncs go through it, and appends are
// made durable through it as through a plain fsync.
func TestGroupCommitFsyncsThroughAIO(t *testing.T) {
	offered := false
	if a, err := newAIOSyncer(); err == nil {
		offered = true
		a.close()
	}
	s := openGroup(t)
	if offered && s.group.aio == nil {
		t.Fatal("the group commit fsyncs plainly on a kernel that offers asynchronous I/O")
	}
	ctx := context.Background()
	var last uint64
	for i := range 3 {
		seq, err := s.Append(ctx, "p1", last, heartbeat(fmt.Sprintf("a%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Durable(ctx, seq); err != nil || s.DurableSeq() < seq {
			t.Fatalf("Durable(%d) = %v with DurableSeq %d", seq, err, s.DurableSeq())
		}
		last = seq
	}
	if offered && s.group.aio == nil {
		t.Error("the group commit stopped using asynchronous I/O after fsyncs that succeeded")
	}
}

// TestGroupSyncOfMoreFilesThanOneSubmission: an fsync of more block files
// than one asynchronous submission takes returns once every one is synced,
// without error, round after round.
func TestGroupSyncOfMoreFilesThanOneSubmission(t *testing.T) {
	g := &groupSync{files: map[int]*os.File{}}
	g.aio, _ = newAIOSyncer() // nil where the kernel has none: plain fsyncs
	defer g.close()
	dir := t.TempDir()
	var files []*os.File
	for i := range aioMaxFiles + 7 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d.blk", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("written"); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	for round := range 3 {
		if err := g.syncFiles(files); err != nil {
			t.Fatalf("round %d: fsync of %d files = %v", round, len(files), err)
		}
	}
}

// TestAnFsyncTheKernelRefusesIsAnError: a file that cannot be fsynced (a
// pipe, which io_submit refuses as a whole) fails the group commit's fsync,
// never counts as synced, and the commit fsyncs plainly from then on.
func TestAnFsyncTheKernelRefusesIsAnError(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	g := &groupSync{files: map[int]*os.File{}}
	g.aio, _ = newAIOSyncer()
	defer g.close()
	for round := range 2 {
		err := g.syncFiles([]*os.File{w})
		if err == nil || !strings.Contains(err.Error(), "fsync") {
			t.Errorf("round %d: fsync of a pipe = %v, want an fsync error", round, err)
		}
		if g.aio != nil {
			t.Errorf("round %d: after the kernel refused an asynchronous fsync, the group commit still submits them", round)
		}
	}
}

// TestGroupSyncFallsBackWhenAIOFails: when the kernel takes no submission
// of the group commit's AIO (here its completions' eventfd is gone), the
// fsync is made plainly, succeeds, and AIO is not used again.
func TestGroupSyncFallsBackWhenAIOFails(t *testing.T) {
	g := &groupSync{files: map[int]*os.File{}}
	g.aio, _ = newAIOSyncer() // nil where the kernel has none: plain already
	defer g.close()
	if g.aio != nil {
		g.aio.ev.Close() // io_submit now refuses the completions' descriptor
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "1.blk"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := g.syncFiles([]*os.File{f}); err != nil {
		t.Fatalf("fsync with the AIO context unusable = %v, want a plain fsync's nil", err)
	}
	if g.aio != nil {
		t.Error("the group commit still submits to an AIO context the kernel refused")
	}
}
