package projection

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrDamaged is what Check reports (wrapped, with the reason) for a
// projection file that is truncated, has unreadable pages or fails bbolt's
// consistency check, and what a read that hit a damaged page returns. The
// projections are derived from the ledger, so the cure is a rebuild:
// OpenHealing does it on open.
var ErrDamaged = errors.New("projection: damaged projection file")

// ErrInUse is what Check, OpenHealing, MoveAside and Open report (wrapped,
// with the path) for a projection file whose lock another process holds: a
// running serve or replay. The file may be perfectly sound, so it is never
// taken for damage and never moved aside; the caller should refuse to start
// and say so.
var ErrInUse = errors.New("projection: the projection file is in use by another process")

// bbolt's on-disk meta page (go.etcd.io/bbolt internal/common): a 16-byte
// page header, then magic, version, page size, flags (4 bytes each), the root
// bucket (root pgid, sequence), the freelist pgid, the high-water pgid, the
// txid and an FNV-64a checksum of everything before it. Integers are in the
// machine's byte order, little-endian on every platform we build for.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSumLen     = 56 // bytes of the meta covered by its checksum
	metaLen        = metaSumLen + 8
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

const noFreelist = ^uint64(0)

// readMeta reads and validates the meta page at off.
func readMeta(f *os.File, off int64) (boltMeta, error) {
	var b [pageHeaderSize + metaLen]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return boltMeta{}, fmt.Errorf("meta page at %d: %w", off, err)
	}
	m := b[pageHeaderSize:]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, fmt.Errorf("meta page at %d: not a bbolt file (bad magic)", off)
	}
	if le.Uint32(m[4:]) != boltVersion {
		return boltMeta{}, fmt.Errorf("meta page at %d: bbolt version %d", off, le.Uint32(m[4:]))
	}
	h := fnv.New64a()
	h.Write(m[:metaSumLen])
	if h.Sum64() != le.Uint64(m[metaSumLen:]) {
		return boltMeta{}, fmt.Errorf("meta page at %d: checksum mismatch", off)
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, nil
}

// Check checks the projection file at path without trusting it: first its
// structure, read with plain reads and never through bbolt's memory map (a
// truncated file would kill the process with SIGBUS there): a valid meta
// page, a file long enough for every page the meta counts, and a sound
// header on every page in use (scanPages); then, on a file that was not
// closed cleanly, bbolt's own consistency check of every reachable page,
// with any panic of bbolt's caught (checkPages). It returns nil for a sound
// file or none at all, an error wrapping
// ErrInUse when another process holds the file's lock (it is then not
// checked: a live file may be half-written), and an error wrapping
// ErrDamaged that says what is wrong otherwise. It holds a shared lock on
// the file while it checks, so no writer can start meanwhile.
//
// bbolt keeps no checksum of pages, so a changed byte inside a stored value
// passes bbolt's check; it fails Check when the file was closed cleanly,
// whose pages in use were then summed (pagesum.go).
func Check(path string) error {
	f, err := openForCheck(path)
	if f == nil {
		return err
	}
	defer f.Close()
	return check(f, path)
}

// openForCheck opens the file at path and takes a shared lock on it without
// waiting. It returns a nil file and a nil error when there is no file, and
// an error wrapping ErrInUse when another process holds it.
func openForCheck(path string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("projection: check %s: %w", path, err)
	}
	if err := lockNB(f, path, false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// check checks the file f, open at path and locked by the caller.
func check(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("projection: check %s: %w", path, err)
	}
	m, sum, err := checkStructure(f, fi.Size())
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
	}
	summed, err := checkPageSum(path, m, sum)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
	}
	if err := checkPages(path, summed); errors.Is(err, ErrInUse) {
		return err
	} else if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
	}
	return nil
}

// checkStructure checks the structure of f, size bytes long, and returns
// its current meta and the checksum of its pages in use (scanPages).
func checkStructure(f *os.File, size int64) (boltMeta, uint32, error) {
	if size == 0 {
		return boltMeta{}, 0, errors.New("the file is empty")
	}
	// The first meta page is at 0; the second one page size further. Should
	// the first be damaged, look for the second at the usual page sizes.
	var metas []boltMeta
	var errs []error
	m0, err := readMeta(f, 0)
	if err == nil {
		metas = append(metas, m0)
	} else {
		errs = append(errs, err)
	}
	sizes := []int64{int64(m0.pageSize)}
	if m0.pageSize == 0 {
		sizes = []int64{4096, 8192, 16384, 65536}
	}
	for _, ps := range sizes {
		if m1, err := readMeta(f, ps); err == nil {
			metas = append(metas, m1)
			break
		} else {
			errs = append(errs, err)
		}
	}
	if len(metas) == 0 {
		return boltMeta{}, 0, errors.Join(errs...)
	}
	m := metas[0]
	for _, o := range metas[1:] {
		if o.txid > m.txid {
			m = o
		}
	}
	if m.pageSize < 512 || m.pageSize&(m.pageSize-1) != 0 {
		return m, 0, fmt.Errorf("page size %d", m.pageSize)
	}
	if need := int64(m.pgid) * int64(m.pageSize); size < need {
		return m, 0, fmt.Errorf("truncated: %d bytes, but its %d pages need %d", size, m.pgid, need)
	}
	if m.root >= m.pgid || (m.freelist != noFreelist && m.freelist >= m.pgid) {
		return m, 0, fmt.Errorf("root page %d or freelist page %d above the high-water mark %d", m.root, m.freelist, m.pgid)
	}
	sum, err := scanPages(f, m)
	return m, sum, err
}

// bbolt's page flags.
const (
	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
)

// scanPages reads every page below the high-water mark with plain reads, in
// large chunks (no short file in the middle: a sparse or failing disk
// answers here, not in the mmap), and checks the header of every page in
// use: a page that bbolt's free list does not hold starts with its own id
// and a known kind, and is followed by the overflow pages its header counts.
// A zeroed or overwritten stretch of the file fails here. It returns the
// CRC-32C of the bytes of every page in use, in page order (the meta
// pages and free pages left out), which checkPageSum compares with the one
// taken when the file was closed cleanly. This check runs on every start
// and costs a fraction of bbolt's own check (BenchmarkCheck), which runs
// only on a file that was not closed cleanly (checkPages).
func scanPages(f *os.File, m boltMeta) (uint32, error) {
	free, err := readFreelist(f, m)
	if err != nil {
		return 0, err
	}
	ps := int64(m.pageSize)
	const chunkPages = 256
	buf := make([]byte, chunkPages*ps)
	var base uint64 = ^uint64(0) // the first page in buf
	var inBuf uint64
	page := func(id uint64) ([]byte, error) {
		if id < base || id >= base+inBuf {
			n, err := f.ReadAt(buf, int64(id)*ps)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("page %d unreadable: %w", id, err)
			}
			base, inBuf = id, uint64(n)/uint64(ps)
			if inBuf == 0 {
				return nil, fmt.Errorf("page %d unreadable: the file ends", id)
			}
		}
		off := (id - base) * uint64(ps)
		return buf[off : off+uint64(ps)], nil
	}
	le := binary.LittleEndian
	var sum uint32
	for id := uint64(2); id < m.pgid; { // 0 and 1 are the meta pages, checked already
		if free[id] {
			id++
			continue
		}
		p, err := page(id)
		if err != nil {
			return 0, err
		}
		got, flags, overflow := le.Uint64(p[0:]), le.Uint16(p[8:]), le.Uint32(p[12:])
		if got != id {
			return 0, fmt.Errorf("page %d in use identifies itself as page %d", id, got)
		}
		if flags != branchPage && flags != leafPage && flags != freelistPage {
			return 0, fmt.Errorf("page %d in use has flags %#x", id, flags)
		}
		if id+1+uint64(overflow) > m.pgid {
			return 0, fmt.Errorf("page %d runs %d pages past the high-water mark %d", id, overflow, m.pgid)
		}
		sum = crc32.Update(sum, castagnoli, p)
		// Overflow pages are read and summed too.
		for o := id + 1; o <= id+uint64(overflow); o++ {
			p, err := page(o)
			if err != nil {
				return 0, err
			}
			sum = crc32.Update(sum, castagnoli, p)
		}
		id += 1 + uint64(overflow)
	}
	return sum, nil
}

// readFreelist reads the page ids of bbolt's free list (free and pending
// pages, as bbolt writes it) with plain reads.
func readFreelist(f *os.File, m boltMeta) (map[uint64]bool, error) {
	free := map[uint64]bool{}
	if m.freelist == noFreelist {
		return nil, errors.New("no free list is stored: the pages in use cannot be told")
	}
	ps := int64(m.pageSize)
	h := make([]byte, pageHeaderSize+8)
	if _, err := f.ReadAt(h, int64(m.freelist)*ps); err != nil {
		return nil, fmt.Errorf("free list page %d unreadable: %w", m.freelist, err)
	}
	le := binary.LittleEndian
	if id, flags := le.Uint64(h[0:]), le.Uint16(h[8:]); id != m.freelist || flags != freelistPage {
		return nil, fmt.Errorf("free list page %d identifies itself as page %d with flags %#x", m.freelist, id, flags)
	}
	count, overflow := uint64(le.Uint16(h[10:])), le.Uint32(h[12:])
	start := int64(pageHeaderSize)
	if count == 0xFFFF { // the real count is the first element
		count = le.Uint64(h[pageHeaderSize:])
		start += 8
	}
	size := int64(1+overflow) * ps
	if start+int64(count)*8 > size || m.freelist+1+uint64(overflow) > m.pgid {
		return nil, fmt.Errorf("free list page %d counts %d ids, more than its %d pages hold", m.freelist, count, 1+overflow)
	}
	b := make([]byte, count*8)
	if _, err := f.ReadAt(b, int64(m.freelist)*ps+start); err != nil {
		return nil, fmt.Errorf("free list page %d unreadable: %w", m.freelist, err)
	}
	for i := uint64(0); i < count; i++ {
		id := le.Uint64(b[i*8:])
		if id < 2 || id >= m.pgid {
			return nil, fmt.Errorf("free list holds page %d, outside 2..%d", id, m.pgid-1)
		}
		free[id] = true
	}
	return free, nil
}

// checkPages runs bbolt's consistency check, opening the file read-only,
// on a file that was not closed cleanly: one that still carries the mark
// of a Store writing it without fsync (durability.go: the process died, or
// the Store found the file damaged and kept the mark). A file closed
// cleanly is left to scanPages when summed: its pages in use matched the
// sum taken when it was closed, so nothing changed since. Without that
// sum (none, or one of another txid: a file from before sums, a sum file
// lost) the mark of a clean close is only the file's word, which a damaged
// file may carry, so bbolt's check runs then too. bbolt panics on some
// damage (a zeroed page "self identifies as 0", a key of no bytes): the
// panic is the verdict. The caller holds a shared lock, which bbolt's own
// shared lock joins; should bbolt still time out on the lock, the file is in
// use, not damaged.
func checkPages(path string, summed bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bbolt panicked: %v", r)
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return fmt.Errorf("%w: %s", ErrInUse, path)
	} else if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bktMeta); summed && meta != nil && meta.Get(keyUnsynced) == nil && meta.Get(keyCheckpoint) != nil {
			return nil // closed cleanly, and its pages are as they were then
		}
		var errs []error
		for e := range tx.Check() {
			if len(errs) < 5 {
				errs = append(errs, e)
			}
		}
		return errors.Join(errs...)
	})
}

// MoveAside renames the file at path to path.damaged-<time> (UTC, to the
// second; -2, -3… after it when one of that second is there already), its
// page sum along with it, and returns the new name. It renames only a file
// it holds the exclusive lock of: one another process has open is left
// where it is, with an error wrapping ErrInUse.
func MoveAside(path string, now time.Time) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("projection: move aside %s: %w", path, err)
	}
	defer f.Close()
	return moveAside(f, path, now)
}

// moveAside is MoveAside of the file f, open at path: it takes (or turns a
// shared lock into) the exclusive lock of f without waiting, checks that
// path still names f, and renames it while it holds the lock.
func moveAside(f *os.File, path string, now time.Time) (string, error) {
	if err := lockNB(f, path, true); err != nil {
		return "", err
	}
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("projection: move aside %s: %w", path, err)
	}
	if pi, err := os.Stat(path); err != nil || !os.SameFile(fi, pi) {
		// Another process moved it first (and perhaps made a new one).
		return "", fmt.Errorf("%w: %s was replaced while it was checked", ErrInUse, path)
	}
	aside := path + ".damaged-" + now.UTC().Format("20060102T150405Z")
	for i := 2; ; i++ { // never over an earlier one of the same second
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = path + ".damaged-" + now.UTC().Format("20060102T150405Z") + "-" + strconv.Itoa(i)
	}
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("projection: move aside %s: %w", path, err)
	}
	os.Rename(path+sumSuffix, aside+sumSuffix) // kept beside the file it describes; none is fine
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return aside, nil
}

// Healed says what OpenHealing did with a damaged file.
type Healed struct {
	MovedTo string // where the damaged file went
	Reason  string // what Check (or Open) found
}

// OpenHealing checks the projection file at path and opens it. A damaged
// file (one left unsynced by a crash of the machine too: durability.go), or
// one of another layout (ErrSchema), is moved aside (MoveAside) and
// an empty one is opened in its place: a Projector then rebuilds it from the
// ledger. healed is nil when the file was sound. A file another process
// holds (a running serve or replay) is neither checked nor moved: the error
// wraps ErrInUse.
func OpenHealing(path string, cfg Config) (st *Store, healed *Healed, err error) {
	aside, reason, err := healFile(path, cfg.Now())
	if err != nil {
		return nil, nil, err
	}
	st, err = Open(path, cfg)
	if errors.Is(err, ErrSchema) || errors.Is(err, ErrDamaged) { // ErrDamaged: left unsynced by a crash of the machine (durability.go)
		reason = err.Error()
		if aside, err = MoveAside(path, cfg.Now()); err != nil {
			return nil, nil, err
		}
		st, err = Open(path, cfg)
	}
	if err != nil {
		return nil, nil, err
	}
	if aside != "" {
		healed = &Healed{MovedTo: aside, Reason: reason}
	}
	return st, healed, nil
}

// healFile checks the file at path under a shared lock and, when it is
// damaged, moves it aside under an exclusive one taken on the same open
// file: between the verdict and the rename no other process can have opened
// it. It returns where the file went and why ("" and "" for a sound file or
// none).
func healFile(path string, now time.Time) (aside, reason string, err error) {
	f, err := openForCheck(path)
	if f == nil {
		return "", "", err
	}
	defer f.Close()
	err = check(f, path)
	if !errors.Is(err, ErrDamaged) {
		return "", "", err
	}
	reason = err.Error()
	aside, err = moveAside(f, path, now)
	return aside, reason, err
}

// view runs fn in a read transaction. A panic inside it (bbolt meeting a
// damaged page) is caught: the store is marked damaged (ReadFailure) and the
// read returns an error wrapping ErrDamaged instead of killing the request.
func (s *Store) view(fn func(tx *bolt.Tx) error) (err error) {
	defer s.caught(&err)
	return s.db.View(fn)
}

// update is db.Update for writes outside the fold (snapshots), with its
// panics turned into errors as view does; a store already found damaged is
// not written to.
func (s *Store) update(fn func(tx *bolt.Tx) error) (err error) {
	if f := s.ReadFailure(); f != "" {
		return fmt.Errorf("%w: %s", ErrDamaged, f)
	}
	defer s.caught(&err)
	return s.db.Update(fn)
}

// caught turns a panic of bbolt into an error wrapping ErrDamaged in *err and
// marks the store damaged. Use it deferred.
func (s *Store) caught(err *error) {
	r := recover()
	if r == nil {
		return
	}
	*err = fmt.Errorf("%w: bbolt panicked: %v", ErrDamaged, r)
	s.mu.Lock()
	if s.readFailure == "" {
		s.readFailure = (*err).Error()
	}
	s.mu.Unlock()
}

// ReadFailure returns why a read found the file damaged since it was opened
// ("" when none did). The file then needs a rebuild: restart serve, which
// heals it on open, or run turnledger replay.
func (s *Store) ReadFailure() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readFailure
}
