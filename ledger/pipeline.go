package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

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
//
// The server's answers come to a subscription of the pipeline's own, whose
// handler answers the append waiting for them: one hand-over from the
// connection to the command rather than three (the jetstream package's
// asynchronous publish hands an answer to its subscription's goroutine,
// which hands it to a future, which a goroutine per append would wait on).
type pipeline struct {
	mu       sync.Mutex
	next     uint64 // the ledger_seq of the next message sent; 0: not known
	inflight int    // pipelined appends not answered yet
	off      bool   // another writer of the stream appeared: append in sequence from now on

	inbox   string              // the answers' subjects: inbox + the ledger_seq guessed
	sub     *nats.Subscription  // of inbox + "*"; nil until the first pipelined append
	waiting map[uint64]*pending // by the ledger_seq guessed
}

// turnOff makes every append from now on wait for its answer.
func (p *pipeline) turnOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.off, p.next = true, 0
}

// pending is an append sent and not necessarily answered (AppendAsync).
type pending struct {
	done chan struct{}
	err  error // set before done is closed

	project    string
	expectLast uint64      // the project's expectation it was sent with
	nonce      string      // of its message (Store.sent)
	timeout    *time.Timer // answers it unknown when the server does not
}

func (p *pending) result() error { return p.err }

var answeredCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Pipelined reports whether AppendAsync may return before the server
// answers.
func (s *Store) Pipelined() bool {
	if s.pipe == nil {
		return false
	}
	s.pipe.mu.Lock()
	defer s.pipe.mu.Unlock()
	return !s.pipe.off
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
		if p.next != 0 && !p.off {
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
	if err := s.listenForAnswers(); err != nil {
		return 0, nil, nil, unavailableAppend(project, err)
	}
	msg, n, err := s.message(project, e, "the event")
	if err != nil {
		return 0, nil, nil, err
	}
	seq := p.next
	msg.Reply = p.inbox + strconv.FormatUint(seq, 10)
	msg.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(seq-1, 10))
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expectLast, 10))
	msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, s.projectFilter(project))
	s.sent.add(n, e)
	if err := s.nc.PublishMsg(msg); err != nil {
		s.sent.answered(n, false)
		p.next = 0
		return 0, nil, nil, unavailableAppend(project, err)
	}
	pend := &pending{done: make(chan struct{}), project: project, expectLast: expectLast, nonce: n}
	// An append whose answer never comes (a server gone) is answered as
	// unknown after RetryFor, as an append in sequence gives up.
	pend.timeout = time.AfterFunc(max(s.cfg.RetryFor, s.cfg.AttemptTimeout), func() { s.answer(seq, nil) })
	p.waiting[seq] = pend
	p.next++
	p.inflight++
	return seq, pend.done, pend.result, nil
}

// listenForAnswers subscribes to the pipeline's answers, once. Run under
// s.pipe.mu.
func (s *Store) listenForAnswers() error {
	p := s.pipe
	if p.sub != nil {
		return nil
	}
	inbox := s.nc.NewInbox() + "."
	sub, err := s.nc.Subscribe(inbox+"*", func(m *nats.Msg) {
		if seq, err := strconv.ParseUint(strings.TrimPrefix(m.Subject, inbox), 10, 64); err == nil {
			s.answer(seq, m)
		}
	})
	if err != nil {
		return err
	}
	// Answers are few and small; dropping one would leave its append
	// unknown until the timeout.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		sub.Unsubscribe()
		return err
	}
	p.inbox, p.sub, p.waiting = inbox, sub, map[uint64]*pending{}
	return nil
}

// answer answers the pipelined append sent as ledger_seq seq with the
// server's answer m, or as unknown when m is nil (no answer in time). An
// answer for no append waiting (one late after its timeout) is dropped.
func (s *Store) answer(seq uint64, m *nats.Msg) {
	p := s.pipe
	p.mu.Lock()
	pend := p.waiting[seq]
	if pend == nil {
		p.mu.Unlock()
		return
	}
	delete(p.waiting, seq)
	p.inflight--
	pend.timeout.Stop()
	err := unavailableAppend(pend.project, errNoAnswer)
	if m != nil {
		err = judgeAnswer(m, seq, pend.project, pend.expectLast)
	}
	if err != nil {
		p.next = 0 // every message sent after it is refused too
	}
	p.mu.Unlock()
	s.sent.answered(pend.nonce, err == nil)
	if err == nil {
		s.acked(seq)
	}
	pend.err = err
	close(pend.done)
}

// judgeAnswer reads the server's answer to a pipelined append sent as
// ledger_seq seq: nil when it stored it there.
func judgeAnswer(m *nats.Msg, seq uint64, project string, expectLast uint64) error {
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		return unavailableAppend(project, jetstream.ErrNoStreamResponse)
	}
	var a struct {
		Error     *jetstream.APIError `json:"error"`
		Stream    string              `json:"stream"`
		Seq       uint64              `json:"seq"`
		Duplicate bool                `json:"duplicate"`
	}
	switch err := json.Unmarshal(m.Data, &a); {
	case err != nil || a.Error == nil && a.Stream == "":
		return unavailableAppend(project, jetstream.ErrInvalidJSAck)
	case a.Error != nil && isWrongLastSeq(a.Error):
		return conflict(project, expectLast)
	case a.Error != nil:
		return unavailableAppend(project, a.Error)
	case a.Seq != seq || a.Duplicate:
		// The stream-wide expectation rules this out; should a server not
		// keep it, say so rather than answer wrongly.
		return unavailableAppend(project, errWrongGuess)
	}
	return nil
}

// errNoAnswer is a pipelined append the server did not answer in time.
var errNoAnswer = errors.New("ledger: no answer from the server in time; the append may or may not be stored")

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
	case p.next == 0 && p.inflight == 0 && !p.off:
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
