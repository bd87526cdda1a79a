package ledger

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/turnledger/turnledger/kernel"
)

// Archives below the retention horizon.
//
// An archive is a directory (or a NATS object store bucket: the same names,
// the same bytes) of immutable segments, each holding the events
// of one range of ledger_seq, written before the stream is purged below a
// horizon so that nothing the ledger ever took is lost. The format is meant
// for other tools too (docs/retention.md):
//
//	<first>-<last>.jsonl.zst         the events, first and last as 20-digit zero-padded ledger_seqs
//	<first>-<last>.jsonl.zst.sha256  "<hex sha-256 of the .zst file>  <its name>\n" (sha256sum -c reads it)
//
// Decompressed (zstd), a segment is JSON Lines, one event a line in
// increasing ledger_seq order, the first line's ledger_seq being first and
// the last line's last:
//
//	{"ledger_seq":12,"subject":"tl.demo.turn","event":{...the event as the stream holds it...}}
//
// A segment is written to a temporary name, synced, its checksum file put in
// place, then renamed: a segment file under its final name is whole. A crash
// leaves at most a temporary file or a checksum without its segment, both
// removed when the archive is next opened. Segments follow one another:
// the next one's first ledger_seq is above the previous one's last, so the
// archive covers ledger_seq 1 up to the last segment's last (the stream has
// no gaps but those of events never stored).

// ArchiveLine is one line of a segment.
type ArchiveLine struct {
	LedgerSeq uint64          `json:"ledger_seq"`
	Subject   string          `json:"subject"`
	Event     json.RawMessage `json:"event"`
}

// Segment describes one segment of an archive.
type Segment struct {
	Name  string `json:"name"`
	First uint64 `json:"first_ledger_seq"`
	Last  uint64 `json:"last_ledger_seq"`
	Bytes int64  `json:"bytes"`
}

// Archive is a store of segments: a directory, or a NATS object store bucket
// (archivestore.go), whose objects are named and hold what the files would.
// It is safe for concurrent reads; one writer at a time (the retention run)
// appends segments.
type Archive struct {
	store archiveStore
}

// segmentName is the pattern of a segment's file name.
var segmentName = regexp.MustCompile(`^(\d{20})-(\d{20})\.jsonl\.zst$`)

const (
	segmentExt  = ".jsonl.zst"
	checksumExt = ".sha256"
	tmpExt      = ".tmp"
)

// ErrArchiveDamaged is wrapped by the errors of Verify and Read for a
// segment that does not match its checksum or its name, or that cannot be
// decoded.
var ErrArchiveDamaged = errors.New("ledger: archive segment damaged")

// OpenArchive opens (making when missing) the archive in dir, and removes
// what a crash while writing a segment left behind: temporary files and
// checksums without their segment.
func OpenArchive(dir string) (*Archive, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: archive: %w", err)
	}
	a := &Archive{store: dirStore{dir}}
	return a, a.clean()
}

// ReadArchive opens the archive in dir for reading only: it changes
// nothing (a tool may read an archive a serve is writing).
func ReadArchive(dir string) (*Archive, error) {
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("ledger: archive: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("ledger: archive: %s is not a directory", dir)
	}
	return &Archive{store: dirStore{dir}}, nil
}

// clean removes what a crash while writing a segment left behind.
func (a *Archive) clean() error {
	objs, err := a.store.list()
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, o := range objs {
		have[o.name] = true
	}
	for _, o := range objs {
		switch {
		case strings.HasSuffix(o.name, tmpExt):
			a.store.remove(o.name)
		case strings.HasSuffix(o.name, segmentExt+checksumExt) && !have[strings.TrimSuffix(o.name, checksumExt)]:
			a.store.remove(o.name)
		}
	}
	return nil
}

// Where says where the archive is: its directory, or nats://<bucket>.
func (a *Archive) Where() string { return a.store.where() }

// Segments lists the segments in order of ledger_seq.
func (a *Archive) Segments() ([]Segment, error) {
	objs, err := a.store.list()
	if err != nil {
		return nil, err
	}
	var segs []Segment
	for _, o := range objs {
		m := segmentName.FindStringSubmatch(o.name)
		if m == nil {
			continue
		}
		first, _ := strconv.ParseUint(m[1], 10, 64)
		last, _ := strconv.ParseUint(m[2], 10, 64)
		segs = append(segs, Segment{Name: o.name, First: first, Last: last, Bytes: o.size})
	}
	slices.SortFunc(segs, func(x, y Segment) int {
		if x.First < y.First {
			return -1
		} else if x.First > y.First {
			return 1
		}
		return 0
	})
	return segs, nil
}

// Last is the last ledger_seq archived, 0 when the archive is empty.
func (a *Archive) Last() (uint64, error) {
	segs, err := a.Segments()
	if err != nil || len(segs) == 0 {
		return 0, err
	}
	return segs[len(segs)-1].Last, nil
}

// Size is the bytes of every segment.
func (a *Archive) Size() (int64, error) {
	segs, err := a.Segments()
	var n int64
	for _, s := range segs {
		n += s.Bytes
	}
	return n, err
}

// SegmentName is the file name of the segment of first..last.
func SegmentName(first, last uint64) string {
	return fmt.Sprintf("%020d-%020d%s", first, last, segmentExt)
}

// WriteSegment writes lines, in increasing ledger_seq order and above the
// archive's last, as one segment, durably: the segment is synced, then its
// checksum, then renamed into place and the directory synced.
func (a *Archive) WriteSegment(lines []ArchiveLine) (Segment, error) {
	if len(lines) == 0 {
		return Segment{}, errors.New("ledger: archive: an empty segment")
	}
	last, err := a.Last()
	if err != nil {
		return Segment{}, err
	}
	prev := last
	for _, l := range lines {
		if l.LedgerSeq <= prev {
			return Segment{}, fmt.Errorf("ledger: archive: ledger_seq %d after %d", l.LedgerSeq, prev)
		}
		prev = l.LedgerSeq
	}
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return Segment{}, fmt.Errorf("ledger: archive: %w", err)
		}
	}
	zw, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return Segment{}, err
	}
	data := zw.EncodeAll(raw.Bytes(), nil)
	zw.Close()
	sum := sha256.Sum256(data)
	seg := Segment{Name: SegmentName(lines[0].LedgerSeq, lines[len(lines)-1].LedgerSeq), First: lines[0].LedgerSeq, Last: lines[len(lines)-1].LedgerSeq, Bytes: int64(len(data))}
	// The checksum first: a segment under its name always has one.
	if err := a.store.put(seg.Name+checksumExt, []byte(hex.EncodeToString(sum[:])+"  "+seg.Name+"\n")); err != nil {
		return Segment{}, err
	}
	if err := a.store.put(seg.Name, data); err != nil {
		return Segment{}, err
	}
	return seg, nil
}

// open reads a segment's file, checks it against its checksum file, and
// returns its decompressed lines' reader.
func (a *Archive) open(seg Segment) (io.ReadCloser, error) {
	data, err := a.store.get(seg.Name)
	if err != nil {
		return nil, fmt.Errorf("ledger: archive: %w", err)
	}
	want, err := a.store.get(seg.Name + checksumExt)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: its checksum: %w", ErrArchiveDamaged, seg.Name, err)
	}
	sum := sha256.Sum256(data)
	hexSum, name, _ := strings.Cut(strings.TrimSpace(string(want)), "  ")
	if hexSum != hex.EncodeToString(sum[:]) || name != seg.Name {
		return nil, fmt.Errorf("%w: %s: its sha-256 is %x, its checksum file says %q", ErrArchiveDamaged, seg.Name, sum, strings.TrimSpace(string(want)))
	}
	zr, err := zstd.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrArchiveDamaged, seg.Name, err)
	}
	return zr.IOReadCloser(), nil
}

// scan calls fn with every line of seg, checked: in increasing ledger_seq
// order within the segment's range, its first and last those of its name.
func (a *Archive) scan(seg Segment, fn func(ArchiveLine) error) (int, error) {
	r, err := a.open(seg)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	n := 0
	var prev uint64
	for sc.Scan() {
		var l ArchiveLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return n, fmt.Errorf("%w: %s line %d: %w", ErrArchiveDamaged, seg.Name, n+1, err)
		}
		if (n == 0 && l.LedgerSeq != seg.First) || l.LedgerSeq <= prev || l.LedgerSeq > seg.Last {
			return n, fmt.Errorf("%w: %s line %d: ledger_seq %d out of place", ErrArchiveDamaged, seg.Name, n+1, l.LedgerSeq)
		}
		prev = l.LedgerSeq
		n++
		if err := fn(l); err != nil {
			return n, err
		}
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("%w: %s: %w", ErrArchiveDamaged, seg.Name, err)
	}
	if prev != seg.Last {
		return n, fmt.Errorf("%w: %s ends at ledger_seq %d", ErrArchiveDamaged, seg.Name, prev)
	}
	return n, nil
}

// Verify checks a segment against its checksum and its name, and that every
// line is an event the kernel can decode, on the subject it names. It
// returns how many events the segment holds.
func (a *Archive) Verify(seg Segment) (int, error) {
	return a.scan(seg, func(l ArchiveLine) error {
		e, err := kernel.UnmarshalEvent(l.Event)
		if err != nil {
			return fmt.Errorf("%w: %s ledger_seq %d: %w", ErrArchiveDamaged, seg.Name, l.LedgerSeq, err)
		}
		if !strings.HasSuffix(l.Subject, "."+e.ProjectID+"."+e.Aggregate) {
			return fmt.Errorf("%w: %s ledger_seq %d: subject %s is not that of project %s, %s", ErrArchiveDamaged, seg.Name, l.LedgerSeq, l.Subject, e.ProjectID, e.Aggregate)
		}
		return nil
	})
}

// Lines calls fn with every line of every segment after ledger_seq after,
// in order, each segment checked against its checksum first.
func (a *Archive) Lines(after uint64, fn func(ArchiveLine) error) error {
	segs, err := a.Segments()
	if err != nil {
		return err
	}
	for _, seg := range segs {
		if seg.Last <= after {
			continue
		}
		if _, err := a.scan(seg, func(l ArchiveLine) error {
			if l.LedgerSeq <= after {
				return nil
			}
			return fn(l)
		}); err != nil {
			return err
		}
	}
	return nil
}

// Read hands fn the archived events after ledger_seq after, decoded, in
// order and in batches of at most batch; it returns the last ledger_seq
// handed over (after when none).
func (a *Archive) Read(ctx context.Context, after uint64, batch int, fn func([]kernel.Recorded) error) (uint64, error) {
	batch = max(batch, 1)
	var buf []kernel.Recorded
	last := after
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if err := fn(buf); err != nil {
			return err
		}
		last = buf[len(buf)-1].Seq
		buf = nil
		return ctx.Err()
	}
	err := a.Lines(after, func(l ArchiveLine) error {
		e, err := kernel.UnmarshalEvent(l.Event)
		if err != nil {
			return fmt.Errorf("%w: ledger_seq %d: %w", ErrArchiveDamaged, l.LedgerSeq, err)
		}
		buf = append(buf, kernel.Recorded{Seq: l.LedgerSeq, Event: e})
		if len(buf) >= batch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return last, err
}
