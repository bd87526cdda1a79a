package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/kernel"
)

// ErrConflict is returned (wrapped) by Append when the project's last
// ledger_seq is not the expected one: another writer got there first. Catch
// up with ReadProject and decide again.
// It wraps kernel.ErrStale, so the engine knows to catch up and retry.
var ErrConflict = fmt.Errorf("ledger: wrong last sequence: %w", kernel.ErrStale)

// ErrInvalidID is returned (wrapped) when a project, aggregate or id is not a
// safe token (kernel.ValidID). Nothing is read or written.
var ErrInvalidID = errors.New("ledger: unsafe id")

// headerAllowance is what the headers of an event message may take of the
// server's max_payload.
const headerAllowance = 1024

// Message headers set on every event, so a consumer can route without
// decoding the body.
const (
	HeaderType    = "Tl-Type"    // the event's type, e.g. "turn.claimed"
	HeaderVersion = "Tl-Version" // the event's schema version, e.g. "1"
	HeaderID      = "Tl-Id"      // the aggregate's id, e.g. "turn_01…"
	HeaderNonce   = "Tl-Nonce"   // random per Append: tells a retried publish's own message from any other
)

// Server versions that matter.
const (
	minServer     = "2.9.0"  // the jetstream client package's floor
	projectServer = "2.11.0" // Nats-Expected-Last-Subject-Sequence-Subject
	batchServer   = "2.12.0" // atomic batch publish (AppendBatch)
)

// Store is the event store on one JetStream stream. It is safe for concurrent
// use.
type Store struct {
	cfg     Config
	mode    Expectation // ExpectProject or ExpectStream, never ExpectAuto
	version string      // of the server the connection reached at Open
	js      jetstream.JetStream
	stream  jetstream.Stream
	nc      *nats.Conn

	// sent holds the events of this Store's appends that Follow has not
	// received yet: Follow takes them instead of decoding their messages,
	// and tells fn it caught up only when none is unanswered
	// (Config.FollowLinger).
	sent sent

	mu    sync.Mutex // ExpectStream mode: serializes appends, guards heads
	heads heads

	// group makes appends durable in groups (groupsync.go); nil when the
	// server syncs as its configuration says.
	group *groupSync

	// pipe guesses the ledger_seq of the next message where the Store is
	// its stream's only writer (pipeline.go); nil elsewhere.
	pipe *pipeline

	// refused is, per project, the expectation of its last append refused
	// for a wrong last sequence (deleted on a success).
	refused sync.Map
}

// Open checks the server version, creates the stream if there is none (with
// cfg's storage and replicas) and returns a Store on nc. An existing stream
// is used as it is, never changed; one that the ledger cannot work on
// (events could be dropped, or the subjects are not covered) is refused with
// an error that says what to change. The caller keeps ownership of nc.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, errors.New("ledger: no NATS connection")
	}
	version := nc.ConnectedServerVersion()
	mode, err := resolveMode(cfg.Expect, version)
	if err != nil {
		return nil, err
	}
	// A pipelined append whose answer never comes (a server gone) is
	// answered as unknown after RetryFor, as an append in sequence gives up.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(max(cfg.RetryFor, cfg.AttemptTimeout)))
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	st, err := openStream(ctx, js, cfg, versionAtLeast(version, batchServer))
	if err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, mode: mode, version: version, js: js, stream: st, nc: nc}, nil
}

// resolveMode picks the expectation mode for a server of version v.
func resolveMode(want Expectation, v string) (Expectation, error) {
	if !versionAtLeast(v, minServer) {
		return "", fmt.Errorf("ledger: nats-server %q is too old: %s or later is needed (%s or later for per-project expectations)", v, minServer, projectServer)
	}
	perProject := versionAtLeast(v, projectServer)
	switch want {
	case ExpectProject:
		if !perProject {
			return "", fmt.Errorf("ledger: nats-server %s lacks per-project expectations: %s or later is needed, or use expectation %q", v, projectServer, ExpectStream)
		}
		return ExpectProject, nil
	case ExpectStream:
		return ExpectStream, nil
	default:
		if perProject {
			return ExpectProject, nil
		}
		return ExpectStream, nil
	}
}

// versionAtLeast reports whether the server version v ("2.15.2",
// "2.11.0-RC.1") is at least min ("2.11.0"). An unreadable version is not.
func versionAtLeast(v, min string) bool {
	a, ok1 := parseVersion(v)
	b, ok2 := parseVersion(min)
	if !ok1 || !ok2 {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// Mode reports the expectation mode in use: ExpectProject or ExpectStream.
func (s *Store) Mode() Expectation { return s.mode }

// ServerVersion is the version of the NATS server the connection reached at
// Open, e.g. "2.15.2".
func (s *Store) ServerVersion() string { return s.version }

// Config returns the configuration the Store was opened with.
func (s *Store) Config() Config { return s.cfg }

// projectFilter is the subject filter of every event of project.
func (s *Store) projectFilter(project string) string {
	return s.cfg.Prefix + "." + project + ".>"
}

// subject is where e goes: "<prefix>.<project>.<aggregate>". The aggregate's
// id is not a subject token: JetStream checks the per-project expectation
// (and answers LastSeq) by matching "<prefix>.<project>.>" against every
// subject of the project, so a subject per Turn would make each append cost
// O(Turns in the project). With a subject per aggregate kind a project has at
// most a handful, and appends cost the same on a project of ten Turns or ten
// million. The id travels in the Tl-Id header and in the body.
func (s *Store) subject(e kernel.Event) string {
	return s.cfg.Prefix + "." + e.ProjectID + "." + e.Aggregate
}

func checkProject(project string) error {
	if !kernel.ValidID(project) {
		return fmt.Errorf("%w: project %q", ErrInvalidID, project)
	}
	return nil
}

// Append writes e as the next event of project, on the condition that the
// last ledger_seq of the project is expectLast (0: the project has no events
// yet). It returns the event's ledger_seq. When the condition fails it returns
// an error for which errors.Is(err, ErrConflict) holds, and writes nothing.
//
// e.ProjectID must be project; the project, e.Aggregate and e.ID must be safe
// tokens (ErrInvalidID otherwise).
func (s *Store) Append(ctx context.Context, project string, expectLast uint64, e kernel.Event) (uint64, error) {
	msg, n, err := s.message(project, e, "the event")
	if err != nil {
		return 0, err
	}
	s.sent.add(n, e)
	var seq uint64
	s.sequenced(func() (uint64, int) {
		if s.mode == ExpectProject {
			seq, err = s.publish(ctx, project, expectLast, msg, true, jetstream.WithExpectLastSequenceForSubject(expectLast, s.projectFilter(project)))
			if err != nil {
				if isWrongLastSeq(err) {
					err = conflict(project, expectLast)
				} else {
					// A full or failing disk, a lost leader, a timeout: an
					// outage the client may retry (with its Idempotency-Key),
					// not a bug.
					err = unavailableAppend(project, err)
				}
			}
		} else {
			seq, err = s.appendStreamWide(ctx, project, expectLast, msg)
		}
		if err != nil {
			return 0, 1
		}
		return seq, 1
	})
	// An append that timed out may still have been stored; its event is
	// then decoded from its message.
	s.sent.answered(n, err == nil)
	if err != nil {
		return 0, err
	}
	s.acked(seq)
	return seq, nil
}

func errProjectMismatch(got, want string) error {
	return fmt.Errorf("ledger: event of project %q appended to project %q", got, want)
}

func errInvalidIDs(e kernel.Event) error {
	return fmt.Errorf("%w: aggregate %q id %q", ErrInvalidID, e.Aggregate, e.ID)
}

// MaxBatch is the most events AppendBatch takes at once (nats-server's
// default bound of an atomic batch).
const MaxBatch = 1000

// ErrNoBatch is returned by AppendBatch when the stream cannot take atomic
// batches: a nats-server older than 2.12, or per-project expectations off.
var ErrNoBatch = errors.New("ledger: atomic batches need nats-server 2.12 or later with per-project expectations")

// AppendBatch writes events, all or none, as the next events of project, on
// the condition that the last ledger_seq of the project is expectLast. It
// returns their ledger_seqs, which follow one another. A failed condition
// is an error for which errors.Is(err, ErrConflict) holds. The batch is one
// JetStream atomic batch: its messages are staged and committed together,
// so a crash stores all of them or none.
func (s *Store) AppendBatch(ctx context.Context, project string, expectLast uint64, events []kernel.Event) ([]uint64, error) {
	switch {
	case len(events) == 1:
		seq, err := s.Append(ctx, project, expectLast, events[0])
		if err != nil {
			return nil, err
		}
		return []uint64{seq}, nil
	case len(events) == 0:
		return nil, nil
	case len(events) > MaxBatch:
		return nil, kernel.Errorf(kernel.Validation, "%d events in one change; the ledger takes at most %d at once", len(events), MaxBatch)
	case s.mode != ExpectProject || !versionAtLeast(s.version, batchServer):
		return nil, kernel.Errorf(kernel.Unavailable, "%v (the server is %s)", ErrNoBatch, s.version)
	}
	msgs := make([]*nats.Msg, len(events))
	for i, e := range events {
		m, _, err := s.message(project, e, "an event")
		if err != nil {
			return nil, err
		}
		h := m.Header
		h.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if i == 0 {
			h.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(expectLast, 10))
			h.Set("Nats-Expected-Last-Subject-Sequence-Subject", s.projectFilter(project))
		}
		if i == len(events)-1 {
			h.Set("Nats-Batch-Commit", "1")
		}
		msgs[i] = m
	}
	var last uint64
	var err error
	s.sequenced(func() (uint64, int) {
		err = s.appendBatch(ctx, project, expectLast, msgs, &last)
		if err != nil {
			return 0, len(msgs)
		}
		return last, len(msgs)
	})
	if errors.Is(err, ErrConflict) {
		return nil, err
	}
	if err != nil {
		// The batch may or may not be stored: the engine catches up and
		// finds out; a client retries with its Idempotency-Key.
		return nil, unavailableAppend(project, err)
	}
	seqs := make([]uint64, len(events))
	for i := range seqs {
		seqs[i] = last - uint64(len(events)-1-i)
	}
	s.refused.Delete(project)
	s.acked(last)
	return seqs, nil
}

// appendBatch sends msgs as one atomic batch (AppendBatch) and sets *last
// to the ledger_seq of the last.
func (s *Store) appendBatch(ctx context.Context, project string, expectLast uint64, msgs []*nats.Msg, last *uint64) error {
	return s.retry(ctx, "atomic batch to "+project, func(ctx context.Context, again bool) error {
		if again {
			// An earlier attempt went unanswered: it may be stored. Its
			// first message, if it was, is the project's next event.
			m, err := s.stream.GetMsg(ctx, expectLast+1, jetstream.WithGetMsgSubject(s.projectFilter(project)))
			switch {
			case err == nil && sameMsg(m, msgs[0]):
				*last = m.Sequence + uint64(len(msgs)-1)
				return nil
			case err == nil:
				return conflict(project, expectLast)
			case !errors.Is(err, jetstream.ErrMsgNotFound):
				return err
			}
		}
		// Each attempt is a batch of its own: the server drops an
		// abandoned one.
		id := "b" + nonce()
		for _, m := range msgs {
			m.Header.Set("Nats-Batch-Id", id)
		}
		for _, m := range msgs[:len(msgs)-1] {
			if err := s.nc.PublishMsg(m); err != nil {
				return err
			}
		}
		timeout := s.cfg.AttemptTimeout
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		reply, err := s.nc.RequestMsg(msgs[len(msgs)-1], timeout)
		if err != nil {
			return err
		}
		var ack struct {
			Error *struct {
				Code        int                 `json:"code"`
				ErrCode     jetstream.ErrorCode `json:"err_code"`
				Description string              `json:"description"`
			} `json:"error"`
			Seq   uint64 `json:"seq"`
			Batch string `json:"batch"`
			Count uint64 `json:"count"`
		}
		if err := json.Unmarshal(reply.Data, &ack); err != nil {
			return fmt.Errorf("ledger: the answer to an atomic batch: %w", err)
		}
		if e := ack.Error; e != nil {
			if e.ErrCode == jetstream.JSErrCodeStreamWrongLastSequence || e.ErrCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant {
				return conflict(project, expectLast)
			}
			if strings.Contains(e.Description, "disabled") {
				return kernel.Errorf(kernel.Unavailable, "the ledger's stream does not take atomic batches (made before they were asked for): allow them with `nats stream edit %s --allow-batch` (allow_atomic: true), then retry", s.cfg.Stream)
			}
			return fmt.Errorf("ledger: atomic batch of %d: %s (error %d)", len(msgs), e.Description, e.ErrCode)
		}
		if ack.Batch != id || ack.Count != uint64(len(msgs)) || ack.Seq < uint64(len(msgs)) {
			return fmt.Errorf("ledger: atomic batch %s answered for batch %q of %d at %d", id, ack.Batch, ack.Count, ack.Seq)
		}
		*last = ack.Seq
		return nil
	})
}

// appendStreamWide is Append for servers without per-project expectations:
// publish with "the stream's last sequence is H" for a head H at which the
// project's last ledger_seq is known to be expectLast. When the stream moved
// only because another project (or another process) wrote, look again and
// retry; when the project itself moved, it is a conflict.
//
// Appends of one Store are serialized here: they all contend on the stream
// head anyway, and a writer that must read twice before it publishes would
// otherwise lose every race to one that need not.
func (s *Store) appendStreamWide(ctx context.Context, project string, expectLast uint64, msg *nats.Msg) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 0; ; attempt++ {
		head, known := s.heads.at(project)
		if known && head.last > expectLast {
			return 0, conflict(project, expectLast)
		}
		// A head of 0 is always read afresh: the message id that guards the
		// first event is only remembered for the duplicate window.
		if !known || head.last != expectLast || head.stream == 0 {
			// Read the head first, then the project's last: if the publish
			// then succeeds at head h, nothing came after h, so the project's
			// last ledger_seq at h is the one read.
			h, err := s.Head(ctx)
			if err != nil {
				return 0, err
			}
			p, err := s.LastSeq(ctx, project)
			if err != nil {
				return 0, err
			}
			if p != expectLast {
				return 0, conflict(project, expectLast)
			}
			if p > h {
				// An event came between the two reads; look again.
				s.heads.forget()
				continue
			}
			s.heads.learn(h, project, p)
			head.stream = h
		}
		opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequence(head.stream)}
		if head.stream == 0 {
			// Older servers read an expected last sequence of 0 as no
			// expectation at all. The first event of the stream also
			// carries a fixed message id, so that of two racing first
			// writes the server keeps one and reports the other a duplicate.
			opts = append(opts, jetstream.WithMsgID(s.firstMsgID()))
		}
		seq, err := s.publish(ctx, project, expectLast, msg, false, opts...)
		if errors.Is(err, errDuplicate) {
			s.heads.forget()
			return 0, conflict(project, expectLast)
		}
		if err == nil {
			s.heads.learn(seq, project, seq)
			return seq, nil
		}
		if !isWrongLastSeq(err) {
			return 0, unavailableAppend(project, err)
		}
		// Another process wrote: what we knew is stale.
		s.heads.forget()
		if attempt >= s.cfg.StreamConflictRetries {
			return 0, fmt.Errorf("%w: project %s: the stream head kept moving (%d tries)", ErrConflict, project, attempt+1)
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
}

// maxKnownProjects bounds the projects heads remembers.
const maxKnownProjects = 10_000

// heads is what a Store in ExpectStream mode knows: when the stream's last
// sequence was stream, the last ledger_seq of each project in last was the
// one given. It stays exact while only this Store writes; any sign of
// another writer makes it forget.
type heads struct {
	stream uint64
	last   map[string]uint64
}

// headAt is the stream head and a project's last ledger_seq at that head.
type headAt struct {
	stream, last uint64
}

func (k *heads) at(project string) (headAt, bool) {
	last, ok := k.last[project]
	return headAt{stream: k.stream, last: last}, ok
}

// learn records that at stream head h, project's last ledger_seq is last.
// Appending at h = stream+1 keeps what is known of the other projects; any
// other head starts afresh.
func (k *heads) learn(h uint64, project string, last uint64) {
	extends := k.last != nil && (h == k.stream || (h == k.stream+1 && last == h))
	if !extends || len(k.last) >= maxKnownProjects {
		k.last = map[string]uint64{}
	}
	k.stream = h
	k.last[project] = last
}

func (k *heads) forget() { k.last = nil }

// firstMsgID is the message id of the first event of the stream in
// ExpectStream mode.
func (s *Store) firstMsgID() string { return s.cfg.Stream + ".first-event" }

func conflict(project string, expectLast uint64) error {
	return fmt.Errorf("%w: project %s is not at ledger_seq %d", ErrConflict, project, expectLast)
}

// isWrongLastSeq reports whether err is JetStream's "wrong last sequence":
// 10071, or 10164 on replicated streams.
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// LastSeq returns the last ledger_seq on the project's subjects, 0 when the
// project has no events. It costs one round trip.
func (s *Store) LastSeq(ctx context.Context, project string) (uint64, error) {
	if err := checkProject(project); err != nil {
		return 0, err
	}
	var m *jetstream.RawStreamMsg
	err := s.retry(ctx, "last seq of "+project, func(ctx context.Context, _ bool) error {
		var err error
		m, err = s.stream.GetLastMsgForSubject(ctx, s.projectFilter(project))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: last seq of %s: %w", project, err)
	}
	return m.Sequence, nil
}

// Event returns the event at ledger_seq seq. It costs one round trip.
func (s *Store) Event(ctx context.Context, seq uint64) (kernel.Recorded, error) {
	var m *jetstream.RawStreamMsg
	err := s.retry(ctx, fmt.Sprintf("event at %d", seq), func(ctx context.Context, _ bool) error {
		var err error
		m, err = s.stream.GetMsg(ctx, seq)
		return err
	})
	if err != nil {
		return kernel.Recorded{}, fmt.Errorf("ledger: event at ledger_seq %d: %w", seq, err)
	}
	return s.decode(m.Sequence, m.Subject, m.Data)
}

// Head returns the last ledger_seq of the whole stream, 0 when it is empty.
func (s *Store) Head(ctx context.Context) (uint64, error) {
	info, err := s.info(ctx)
	if err != nil {
		return 0, err
	}
	if s.pipe != nil {
		s.pipe.stored(info.State.LastSeq)
	}
	return info.State.LastSeq, nil
}

// unavailableAppend makes a failed append a kernel.Unavailable error (503
// with Retry-After), unless it is one already (retry gave up): the change may
// or may not be stored, and a retry with the same Idempotency-Key is safe.
func unavailableAppend(project string, err error) error {
	if kernel.ErrorKind(err) == kernel.Unavailable {
		return err
	}
	return fmt.Errorf("%w: %w", kernel.Errorf(kernel.Unavailable,
		"the ledger cannot take the change to %s right now (storage full or failing, or the server is not answering); retry later with the same Idempotency-Key", project), err)
}
