package ledger

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/kernel"
)

// Pipelined appends.
//
// An append waits for the server's answer, and the engine holds a project's
// lock while it waits, so one project's commands went one round trip at a
// time. A Store that is the only writer of its stream (an embedded server
// with no listener) knows the ledger_seq the server will give its next
// message: one more than the last, as long as the server takes every
// message it sends. AppendAsync sends the message with that expectation on
// the whole stream ("the stream's last sequence is seq-1") beside the
// project's own, and returns seq without waiting: the engine decides the
// project's next command on the state it leaves and lets the next command
// take the lock, while the server's answer comes.
//
// The stream-wide expectation makes a wrong guess harmless: the server
// stores the message at seq or refuses it, never elsewhere. A refusal (an
// expectation, a full disk) leaves every message sent after it refused as
// well, since the stream did not grow as they expected; the Store then
// forgets its guess and appends in sequence until its pipeline is empty
// and an answered append tells it the stream's head again. A caller whose
// append was refused must not trust the state it decided on (the engine
// loads it again from the ledger).
//
// Every append of the Store goes through the pipeline's lock while it is
// on, so that the order in which messages reach the connection is the
// order of the ledger_seqs guessed.
type pipeline struct {
	mu       sync.Mutex
	next     uint64      // the ledger_seq of the next message sent; 0: not known
	inflight int         // pipelined appends not answered yet
	off      atomic.Bool // another writer of the stream appeared: append in sequence from now on (set under mu)

	// head is the highest ledger_seq known stored: read by Head, or
	// answered to an append of this Store; headKnown is set by either.
	head      atomic.Uint64
	headKnown atomic.Bool
}

// turnOff makes every append from now on wait for its answer.
func (p *pipeline) turnOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.off.Store(true)
	p.next = 0
}

// stored notes that the stream holds a message at seq (or, for a head
// read, that its last is seq).
func (p *pipeline) stored(seq uint64) {
	raise(&p.head, seq)
	p.headKnown.Store(true)
}

// KnownHead returns the stream's last ledger_seq without asking the server,
// where the Store is the stream's only writer (Pipelined): the head it read
// last (Head), raised by every append the server answered since, since no
// message reaches the stream but those it sends. An append sent and not yet
// answered is not counted: the head is the stream's as of the last answer.
// It returns false elsewhere, and before the Store has read the head or had
// an append answered.
func (s *Store) KnownHead() (uint64, bool) {
	p := s.pipe
	if p == nil || p.off.Load() || !p.headKnown.Load() {
		return 0, false
	}
	return p.head.Load(), true
}

// pending is an append sent and not necessarily answered (AppendAsync).
type pending struct {
	done chan struct{}
	err  error // set before done is closed
}

func (p *pending) result() error { return p.err }

var answeredCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Pipelined reports whether AppendAsync may return before the server
// answers.
func (s *Store) Pipelined() bool {
	return s.pipe != nil && !s.pipe.off.Load()
}

// AppendAsync is Append that returns once the event is sent, where the
// Store is the only writer of its stream (Pipelined): seq is the ledger_seq
// the event gets if the server stores it, answered is closed once the
// server has answered, and result then returns nil when it stored the
// event at seq, an error for which errors.Is(err, ErrConflict) holds when
// it refused it (nothing stored; every append sent after it is refused
// too), or another error when its fate is not known. Elsewhere, and while
// the Store does not know the stream's head, it appends in sequence and
// returns answered. An error returned (rather than from result) means
// nothing was sent.
func (s *Store) AppendAsync(ctx context.Context, project string, expectLast uint64, e kernel.Event) (seq uint64, answered <-chan struct{}, result func() error, err error) {
	if p := s.pipe; p != nil {
		p.mu.Lock()
		if p.next != 0 && !p.off.Load() {
			defer p.mu.Unlock()
			return s.sendPipelined(project, expectLast, e)
		}
		p.mu.Unlock()
	}
	seq, err = s.Append(ctx, project, expectLast, e)
	if err != nil {
		return 0, nil, nil, err
	}
	return seq, answeredCh, func() error { return nil }, nil
}

// sendPipelined sends e as the message at ledger_seq p.next. Run under
// s.pipe.mu, with the head known.
func (s *Store) sendPipelined(project string, expectLast uint64, e kernel.Event) (uint64, <-chan struct{}, func() error, error) {
	p := s.pipe
	msg, n, err := s.message(project, e, "the event")
	if err != nil {
		return 0, nil, nil, err
	}
	seq := p.next
	s.sent.add(n, e)
	fut, err := s.js.PublishMsgAsync(msg,
		jetstream.WithExpectLastSequence(seq-1),
		jetstream.WithExpectLastSequenceForSubject(expectLast, s.projectFilter(project)))
	if err != nil {
		s.sent.answered(n, false)
		p.next = 0
		return 0, nil, nil, unavailableAppend(project, err)
	}
	p.next++
	p.inflight++
	pend := &pending{done: make(chan struct{})}
	go func() {
		var err error
		select {
		case ack := <-fut.Ok():
			if ack.Sequence != seq || ack.Duplicate {
				// The stream-wide expectation rules this out; should a
				// server not keep it, say so rather than answer wrongly.
				err = unavailableAppend(project, errWrongGuess)
			}
		case perr := <-fut.Err():
			if isWrongLastSeq(perr) {
				err = conflict(project, expectLast)
			} else {
				err = unavailableAppend(project, perr)
			}
		}
		s.sent.answered(n, err == nil)
		if err == nil {
			s.acked(seq)
		}
		p.mu.Lock()
		p.inflight--
		if err != nil {
			p.next = 0 // every message sent after it is refused too
		}
		p.mu.Unlock()
		pend.err = err
		close(pend.done)
	}()
	return seq, pend.done, pend.result, nil
}

// errWrongGuess is an answer at another ledger_seq than the pipeline's
// stream-wide expectation allowed.
var errWrongGuess = errors.New("ledger: the server stored a pipelined append at another ledger_seq than expected")

// sequenced runs fn, an append in sequence that sends n messages, under the
// pipeline's lock while it is on, and keeps the guess of the next ledger_seq
// in step: last is the ledger_seq of its last message (0 when it failed).
func (s *Store) sequenced(fn func() (last uint64, n int)) {
	p := s.pipe
	if p == nil {
		fn()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, n := fn()
	switch {
	case last == 0:
		p.next = 0
	case p.next != 0 && last == p.next+uint64(n)-1:
		p.next = last + 1
	case p.next == 0 && p.inflight == 0 && !p.off.Load():
		// Nothing of the pipeline is on its way: the stream's head is this
		// append's (the Store being its only writer).
		p.next = last + 1
	default:
		p.next = 0
	}
}

// message is e as the message an append sends, and its nonce, after the
// checks every append makes of it; which names it in the error of a payload
// too large ("the event", or "an event" of a batch).
func (s *Store) message(project string, e kernel.Event, which string) (*nats.Msg, string, error) {
	if err := checkProject(project); err != nil {
		return nil, "", err
	}
	if e.ProjectID != project {
		return nil, "", errProjectMismatch(e.ProjectID, project)
	}
	if !kernel.ValidID(e.Aggregate) || !kernel.ValidID(e.ID) {
		return nil, "", errInvalidIDs(e)
	}
	data, err := kernel.MarshalEvent(e)
	if err != nil {
		return nil, "", err
	}
	// The server refuses a message over its max_payload; say so as the
	// client's error (the request is too large), not as an outage.
	if limit := s.nc.MaxPayload() - headerAllowance; int64(len(data)) > limit {
		return nil, "", kernel.Errorf(kernel.Validation, "%s is %d bytes encoded; the ledger takes at most %d: send smaller payloads", which, len(data), limit)
	}
	n := nonce()
	return &nats.Msg{
		Subject: s.subject(e),
		Data:    data,
		Header: nats.Header{
			HeaderType:    []string{e.Type},
			HeaderVersion: []string{strconv.Itoa(e.V)},
			HeaderID:      []string{e.ID},
			HeaderNonce:   []string{n},
		},
	}, n, nil
}
