package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGroupCommitFsyncsThroughAIO: on Linux the group commit's fsyncs go
// through the kernel's asynchronous I/O, and appends are made durable
// through it as through a plain fsync.
func TestGroupCommitFsyncsThroughAIO(t *testing.T) {
	s := openGroup(t)
	if s.group.aio == nil {
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
	if s.group.aio == nil {
		t.Error("the group commit stopped using asynchronous I/O after fsyncs that succeeded")
	}
}

// TestAIOSyncsMoreFilesThanOneSubmission: a sync of more files than one
// submission takes returns once every one is synced, without error.
func TestAIOSyncsMoreFilesThanOneSubmission(t *testing.T) {
	a, err := newAIOSyncer()
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
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
		if err := a.sync(files); err != nil {
			t.Fatalf("round %d: sync of %d files = %v", round, len(files), err)
		}
	}
}

// TestAnFsyncTheKernelRefusesIsAnError: a file that cannot be fsynced (a
// pipe) fails the group commit's fsync whether asynchronous I/O is on or
// has been turned off, never counts as synced.
func TestAnFsyncTheKernelRefusesIsAnError(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	a, err := newAIOSyncer()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.sync([]*os.File{w}); !errors.Is(err, errAIOUnsupported) {
		t.Errorf("asynchronous fsync of a pipe = %v, want %v", err, errAIOUnsupported)
	}
	a.close()

	g := &groupSync{files: map[int]*os.File{}}
	g.aio, err = newAIOSyncer()
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	for _, via := range []string{"asynchronous I/O", "plain fsync"} {
		err := g.syncFiles([]*os.File{w})
		if err == nil || !strings.Contains(err.Error(), "fsync") {
			t.Errorf("fsync of a pipe through %s = %v, want an fsync error", via, err)
		}
		if g.aio != nil {
			t.Errorf("after the kernel refused an asynchronous fsync (%s), the group commit still submits them", via)
		}
	}
}
