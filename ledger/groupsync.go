package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/turnledger/turnledger/kernel"
)

// Group commit.
//
// With SyncAlways, nats-server fsyncs every message before it acknowledges
// it, one after another: a project's appends, and so its commands, cost an
// fsync each, however many wait. An atomic batch shares one fsync among its
// messages, but the server also stages every batch in a file store of its
// own, made and removed per batch, which costs more than the fsync saved
// (docs/speed.md has the figures).
//
// So under EmbeddedConfig.GroupCommit the embedded server runs without
// SyncAlways, and the Store makes appends durable itself, many at a time, as
// a database's group commit does: the server writes each message to its
// block file before it acknowledges it (a single-replica file stream
// flushes in place), and an fsync of the stream's block files then makes
// every message written before it began durable. Durable(ctx, seq) returns
// once an fsync that began after the event at seq was acknowledged has
// ended; the callers that arrive while one runs share the next. fsync
// works on the file, not on the descriptor, so the Store's own descriptors
// serve. The engine answers a command only after Durable, so an
// acknowledged command survives a power loss as with SyncAlways, while the
// commands waiting at once share one fsync.
//
// The files are found where nats-server keeps a stream of the global
// account: <store>/jetstream/$G/streams/<stream>/msgs/<index>.blk. Open
// checks that the directory is there, and an fsync that finds no block
// file while events have been acknowledged fails rather than sync nothing,
// so a server that lays its files out otherwise is an error, never a
// silent loss of durability.
//
// On Linux the fsyncs are submitted through the kernel's asynchronous I/O
// and waited for in the runtime's poller (aiosync_linux.go): a plain fsync
// holds a thread and, for a while, one of the runtime's processors, which
// on a small machine the commands waiting for it need. Where the kernel
// refuses asynchronous fsync, the Store fsyncs plainly.

// groupSync fsyncs the block files of one stream of an embedded server, for
// every caller waiting at once.
type groupSync struct {
	dir string // the stream's msgs directory

	// synced is the highest ledger_seq known durable: the highest a caller
	// of wait had met when the last successful fsync began (the server
	// writes messages in order, so every one below it was written too).
	synced atomic.Uint64
	// seen is the highest ledger_seq known written: acknowledged to an
	// append of this Store, or asked to be made durable by a caller of wait.
	seen atomic.Uint64

	mu     sync.Mutex
	cur    *syncRound // the fsync in flight; nil when none
	next   *syncRound // the callers that arrived since it began; nil when none
	joined uint64     // callers that waited for a round, ever
	rounds uint64     // rounds begun, ever

	fmu    sync.Mutex       // held by a round's fsync and by close
	files  map[int]*os.File // open block files, by index
	top    int              // the highest block index synced so far
	closed bool
	aio    *aioSyncer // fsyncs without holding a thread (aiosync_linux.go); nil: plain fsync
}

type syncRound struct {
	done chan struct{}
	err  error
	// covers is seen as the round's fsync was about to begin (0 until
	// then): every event at or below it was written before the fsync.
	// Guarded by groupSync.mu.
	covers uint64
}

// newGroupSync fsyncs the stream's files under the embedded server's store
// directory (the global account: the embedded server has no others). The
// stream must exist: its directory is checked.
func newGroupSync(storeDir, stream string) (*groupSync, error) {
	dir := filepath.Join(storeDir, "jetstream", "$G", "streams", stream, "msgs")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("ledger: group commit: the embedded server keeps stream %s elsewhere than %s (%v): the group commit cannot make its appends durable", stream, dir, err)
	}
	g := &groupSync{dir: dir, files: map[int]*os.File{}}
	g.aio, _ = newAIOSyncer() // nil where the kernel has no AIO: plain fsyncs
	return g, nil
}

// wait returns once the message at ledger_seq seq, which the server has
// acknowledged, is durable: at once when an fsync that began after its
// acknowledgement has ended, otherwise when the one in flight ends if it
// began after that, or else when one that begins after the call ends (with
// its error); or when ctx ends.
func (g *groupSync) wait(ctx context.Context, seq uint64) error {
	if seq <= g.synced.Load() {
		return nil
	}
	raise(&g.seen, seq)
	g.mu.Lock()
	g.joined++
	var r *syncRound
	switch {
	case g.cur != nil && g.cur.covers >= seq:
		// The fsync in flight began after seq was written (the projector,
		// say, receives an event after the fsync that covers it began).
		r = g.cur
	case g.cur == nil:
		r = &syncRound{done: make(chan struct{})}
		g.cur = r
		g.rounds++
		go g.run(r)
	case g.next == nil:
		r = &syncRound{done: make(chan struct{})}
		g.next = r
	default:
		r = g.next
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run runs round r and then the rounds that queued behind it, one after
// another.
func (g *groupSync) run(r *syncRound) {
	for r != nil {
		// Every message up to what is known written was written before
		// this fsync begins.
		g.mu.Lock()
		covers := g.seen.Load()
		r.covers = covers
		g.mu.Unlock()
		if r.err = g.fsync(); r.err == nil {
			raise(&g.synced, covers)
		}
		close(r.done)
		g.mu.Lock()
		g.cur, g.next = g.next, nil
		if r = g.cur; r != nil {
			g.rounds++
		}
		g.mu.Unlock()
	}
}

// fsync fsyncs every block file from the highest one synced last time on
// (a block written to before the server moved on to the next has unsynced
// writes too), and the directory when it holds a block not synced before.
func (g *groupSync) fsync() error {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	if g.closed {
		return errors.New("ledger: group commit: the embedded server is closed")
	}
	ents, err := os.ReadDir(g.dir)
	if err != nil {
		return fmt.Errorf("ledger: group commit: %w", err)
	}
	top, grew := g.top, false
	var blocks []*os.File
	for _, ent := range ents {
		name := ent.Name()
		if !strings.HasSuffix(name, ".blk") {
			continue
		}
		i, err := strconv.Atoi(strings.TrimSuffix(name, ".blk"))
		if err != nil || i < g.top {
			continue
		}
		f := g.files[i]
		if f == nil {
			if f, err = os.Open(filepath.Join(g.dir, name)); errors.Is(err, os.ErrNotExist) {
				continue // removed since the listing (an empty block)
			} else if err != nil {
				return fmt.Errorf("ledger: group commit: %w", err)
			}
			g.files[i] = f
		}
		blocks = append(blocks, f)
		if i > top {
			top, grew = i, true
		}
	}
	if len(blocks) == 0 && g.seen.Load() > 0 {
		return fmt.Errorf("ledger: group commit: no block file in %s, where the embedded server keeps the stream's messages", g.dir)
	}
	if err := g.syncFiles(blocks); err != nil {
		return fmt.Errorf("ledger: group commit: %w", err)
	}
	if grew || g.top == 0 {
		d, err := os.Open(g.dir)
		if err != nil {
			return fmt.Errorf("ledger: group commit: %w", err)
		}
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("ledger: group commit: fsync %s: %w", g.dir, err)
		}
	}
	for i, f := range g.files {
		if i < top {
			f.Close()
			delete(g.files, i)
		}
	}
	g.top = top
	return nil
}

// syncFiles fsyncs the files, all at once through AIO where the kernel
// takes it, else one after another. AIO refused by the kernel is given up
// for plain fsyncs at once; AIO that failed in itself (its completions not
// all taken) is given up after failing this fsync.
func (g *groupSync) syncFiles(files []*os.File) error {
	if g.aio != nil {
		err := g.aio.sync(files)
		switch {
		case errors.Is(err, errAIOUnsupported):
			g.aio.close()
			g.aio = nil
		case errors.Is(err, errAIOBroken):
			g.aio.close()
			g.aio = nil
			return err
		default:
			return err
		}
	}
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", filepath.Base(f.Name()), err)
		}
	}
	return nil
}

// acked notes that the server acknowledged an append at ledger_seq seq:
// it is written, so the next fsync to begin covers it, and the stream's
// head is at least seq (KnownHead).
func (s *Store) acked(seq uint64) {
	if s.group != nil {
		raise(&s.group.seen, seq)
	}
	if s.pipe != nil {
		s.pipe.stored(seq)
	}
}

// raise sets a to v if v is higher.
func raise(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// close closes the block files held open.
func (g *groupSync) close() {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	g.closed = true
	if g.aio != nil {
		g.aio.close()
		g.aio = nil
	}
	for i, f := range g.files {
		f.Close()
		delete(g.files, i)
	}
}

// Durable returns once the event at ledger_seq seq (acknowledged by the
// server: appended, or read) is durable as the configured sync mode
// promises. On a Store opened with Embedded.Open under GroupCommit it waits
// for a shared fsync (groupsync.go); otherwise the server has synced as its
// configuration says before it acknowledged the event, and Durable returns
// at once. An error means the event may not survive a power loss: a client
// should retry with its Idempotency-Key.
func (s *Store) Durable(ctx context.Context, seq uint64) error {
	if s.group == nil || seq == 0 {
		return nil
	}
	if err := s.group.wait(ctx, seq); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%w: %w", kernel.Errorf(kernel.Unavailable, "the ledger could not make the change durable (fsync failed); retry later with the same Idempotency-Key"), err)
	}
	return nil
}

// DurableSeq is the highest ledger_seq known durable by the group commit
// (every event at or below it survives a power loss), 0 when the Store does
// not commit in groups (the server then syncs as configured before it
// acknowledges).
func (s *Store) DurableSeq() uint64 {
	if s.group == nil {
		return 0
	}
	return s.group.synced.Load()
}

// Fsyncs is how many group fsyncs the Store has made (0 when it does not
// commit in groups): appends over fsyncs is the size of a group.
func (s *Store) Fsyncs() uint64 {
	if s.group == nil {
		return 0
	}
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return s.group.rounds
}
