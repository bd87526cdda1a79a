package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/kernel"
)

// readInactive is how long the server keeps the consumer of a
// read (ReadProject, ReadAll) once nobody pulls from it. Reads delete their
// consumer when they end; this is the backstop when the delete cannot happen
// (the process died). Longer than any pause of a slow fn, or the server would
// drop the consumer under the reader, which would then recreate it.
const readInactive = time.Minute

// The pull requests of reads: a short heartbeat, so that a lost consumer is
// noticed within about a second.
const (
	pullExpiry    = 3 * time.Second
	pullHeartbeat = 500 * time.Millisecond
)

// directReads is how many events ReadProject gets one by one before it sets
// up a consumer for the rest.
const directReads = 4

// ReadProject calls fn with every event of project whose ledger_seq is
// greater than after, in order, and returns the last ledger_seq it handed to
// fn (after when there was none). It reads up to the project's last event at
// the time of the call. If fn returns an error, ReadProject stops and returns
// it with the last ledger_seq fn accepted. An event that cannot be decoded is
// an error.
func (s *Store) ReadProject(ctx context.Context, project string, after uint64, fn func(kernel.Recorded) error) (uint64, error) {
	if err := checkProject(project); err != nil {
		return after, err
	}
	last, err := s.LastSeq(ctx, project)
	if err != nil || last <= after {
		return after, err
	}
	filter := s.projectFilter(project)
	seen := after
	// A catch-up after a conflict is usually an event or two: get them one by
	// one (one round trip each) rather than set up a consumer.
	for range directReads {
		var m *jetstream.RawStreamMsg
		err := s.retry(ctx, "read "+project, func(ctx context.Context, _ bool) error {
			var err error
			m, err = s.stream.GetMsg(ctx, seen+1, jetstream.WithGetMsgSubject(filter))
			return err
		})
		if err != nil {
			return seen, fmt.Errorf("ledger: read %s after ledger_seq %d: %w", project, seen, err)
		}
		if !strings.HasPrefix(m.Subject, filter[:len(filter)-1]) {
			// A server that ignored next_by_subj would hand over any message.
			return seen, fmt.Errorf("ledger: read %s after ledger_seq %d: the server returned %s", project, seen, m.Subject)
		}
		r, err := s.decode(m.Sequence, m.Subject, m.Data)
		if err != nil {
			return seen, err
		}
		if err := fn(r); err != nil {
			return seen, err
		}
		seen = r.Seq
		if seen >= last {
			return seen, nil
		}
	}
	err = s.consume(ctx, filter, seen, last, readInactive, func(batch []kernel.Recorded) error {
		for _, r := range batch {
			if err := fn(r); err != nil {
				return err
			}
			seen = r.Seq
		}
		return nil
	})
	return seen, err
}

// ReadAll hands fn, in order and in batches of at most Config.BatchSize,
// every event with after < ledger_seq <= head, where head is the stream's last
// ledger_seq when ReadAll starts; fn also gets head, to show progress.
// ReadAll returns head. If fn returns an error, ReadAll stops and returns it.
func (s *Store) ReadAll(ctx context.Context, after uint64, fn func(batch []kernel.Recorded, head uint64) error) (uint64, error) {
	head, err := s.Head(ctx)
	if err != nil || head <= after {
		return head, err
	}
	err = s.consume(ctx, "", after, head, readInactive, func(batch []kernel.Recorded) error {
		return fn(batch, head)
	})
	return head, err
}

// Follow hands fn, in order, every event of the stream from ledger_seq
// after+1 on, in batches of as many as are ready up to Config.BatchSize, and
// keeps following new events until ctx is done; it then returns ctx.Err(). If
// fn returns an error, Follow stops and returns it. fn runs on the calling
// goroutine, one batch at a time, and may keep the batch. Follow calls fn
// with an empty batch when it has caught up: it has handed over every event
// it holds, and no append of this Store is on its way (or none came within
// Config.FollowLinger).
func (s *Store) Follow(ctx context.Context, after uint64, fn func(batch []kernel.Recorded) error) error {
	return s.consume(ctx, "", after, 0, 0, fn)
}

// raw is one message as delivered, not yet decoded, or why its metadata
// could not be read.
type raw struct {
	seq     uint64
	subject string
	data    []byte
	err     error
	event   *kernel.Event // the event itself when this Store appended it (Store.sent)
}

// minPerDecoder is the fewest messages worth a decoding goroutine of their
// own: smaller batches are decoded on the calling goroutine.
const minPerDecoder = 64

// errLostConsumer is a read whose consumer went away with its server, or
// skipped a message: the read starts again after the last event handed over.
var errLostConsumer = errors.New("ledger: the stream consumer was lost")

// consume reads the stream (filtered on filter, unless empty) from ledger_seq
// after+1 and hands fn batches of decoded events. It returns nil once it has
// handed over the event at ledger_seq until (until == 0: never; it follows
// until ctx is done and returns ctx.Err()).
//
// When the consumer is lost (its server went away: two missed heartbeats; or
// a message was skipped) the read starts again with a new consumer after the
// last event handed over. It gives up with kernel.Unavailable once it has
// handed over nothing for Config.RetryFor.
func (s *Store) consume(ctx context.Context, filter string, after, until uint64, inactive time.Duration, fn func([]kernel.Recorded) error) error {
	progressAt := time.Now()
	for {
		last, err := s.consumeOnce(ctx, filter, after, until, inactive, fn)
		if last > after {
			after, progressAt = last, time.Now()
		}
		if !errors.Is(err, errLostConsumer) && !unavailable(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(progressAt) > s.cfg.RetryFor {
			return fmt.Errorf("%w: %w", kernel.Errorf(kernel.Unavailable,
				"the ledger's NATS JetStream delivered nothing for %v; retry later", s.cfg.RetryFor), err)
		}
		t := time.NewTimer(minBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// consumerName is a fresh name for a read's consumer.
func consumerName() string {
	var b [12]byte
	rand.Read(b[:])
	return "tl_read_" + hex.EncodeToString(b[:])
}

// consumeOnce is one consumer's part of consume: it returns the last
// ledger_seq handed to fn (after when none) and why it stopped.
//
// The consumer is ephemeral, in memory, with one replica and no acks (what
// the client's ordered consumer makes), created with a short bound per
// attempt; the client's own ordered consumer recreates a lost consumer with
// a 10s bound, which would stall a read for that long whenever the request
// meets a server that is going away. The client's delivery goroutine only
// queues messages; this one takes as many as are ready (up to BatchSize),
// decodes them on up to GOMAXPROCS goroutines, and hands them to fn in order.
// Decoding the kernel's JSON is the largest part of a read's cost.
func (s *Store) consumeOnce(ctx context.Context, filter string, after, until uint64, inactive time.Duration, fn func([]kernel.Recorded) error) (uint64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if inactive <= 0 {
		inactive = readInactive
	}
	ccfg := jetstream.ConsumerConfig{
		Name:              consumerName(),
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       after + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: inactive,
		Replicas:          1,
		MemoryStorage:     true,
	}
	if filter != "" {
		ccfg.FilterSubjects = []string{filter}
	}
	var cons jetstream.Consumer
	err := s.retry(ctx, "create a consumer", func(ctx context.Context, again bool) error {
		if again {
			// The last attempt failed, perhaps unanswered. Ask for a
			// consumer of another name: the meta leader may have placed the
			// last one on a server that has crashed and not been marked
			// offline yet, and then it waits for that server's answer and
			// ignores every request for the same name (as after a SIGKILL of
			// the stream leader's server: creates of the same name time out
			// until RetryFor runs out, long after the stream has a leader
			// again).
			// The old one, if it exists, is deleted, or its inactive
			// threshold removes it.
			s.deleteConsumer(ctx, ccfg.Name, false)
			ccfg.Name = consumerName()
		}
		var err error
		cons, err = s.js.CreateConsumer(ctx, s.cfg.Stream, ccfg)
		return err
	})
	if err != nil {
		return after, fmt.Errorf("ledger: consumer: %w", err)
	}
	size := s.cfg.BatchSize
	queue := make(chan raw, size)
	lost := make(chan struct{})
	var (
		mu       sync.Mutex
		lastErr  error
		lostOnce sync.Once
		nextCons uint64 = 1 // the consumer sequence expected next
	)
	markLost := func() { lostOnce.Do(func() { close(lost) }) }
	cc, err := cons.Consume(func(m jetstream.Msg) {
		r := raw{subject: m.Subject(), data: m.Data()}
		if until == 0 {
			if e, ok := s.sent.take(m.Headers().Get(HeaderNonce)); ok {
				r.event = &e
			}
		}
		if md, err := m.Metadata(); err != nil {
			r.err = fmt.Errorf("ledger: message metadata: %w", err)
		} else {
			r.seq = md.Sequence.Stream
			if md.Sequence.Consumer != nextCons {
				markLost() // a message was skipped: start again
				return
			}
			nextCons++
		}
		select {
		case queue <- r:
		case <-ctx.Done():
		}
	},
		jetstream.PullMaxMessages(max(size, 500)),
		// A consumer whose server went away is noticed by two missed
		// heartbeats and made again on another server.
		jetstream.PullExpiry(pullExpiry),
		jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			mu.Lock()
			lastErr = err
			mu.Unlock()
			if errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
				markLost()
			}
		}),
	)
	if err != nil {
		s.deleteConsumer(ctx, ccfg.Name, false)
		return after, fmt.Errorf("ledger: consume: %w", err)
	}
	wasLost := false
	defer func() {
		cancel() // unblocks the delivery goroutine first
		cc.Stop()
		// The server counts ephemeral consumers against its limit (1000 per
		// stream by default) until they have been idle for
		// InactiveThreshold: delete this one now.
		s.deleteConsumer(ctx, ccfg.Name, !wasLost)
	}()
	closed := cc.Closed()

	last := after
	// owed: fn has events and has not been told since that Follow caught up
	// (Follow only: until == 0).
	owed := false
	caughtUp := func() error {
		owed = false
		return fn(nil)
	}
	idle := time.NewTimer(0) // reset while an append of this Store is on its way
	idle.Stop()
	defer idle.Stop()
	for {
		var raws []raw
		var idleC <-chan time.Time
		if owed && len(queue) == 0 {
			if d := s.cfg.FollowLinger; d > 0 && s.sent.waiting() {
				idle.Reset(d)
				idleC = idle.C
			} else if err := caughtUp(); err != nil {
				return last, err
			}
		}
		select {
		case <-idleC:
			// An append of this Store is unanswered and its event has not
			// come: no longer worth waiting for.
			if err := caughtUp(); err != nil {
				return last, err
			}
			continue
		case <-ctx.Done():
			return last, ctx.Err()
		case <-lost:
			wasLost = true
			mu.Lock()
			err := lastErr
			mu.Unlock()
			return last, fmt.Errorf("%w after ledger_seq %d (%v)", errLostConsumer, last, err)
		case <-closed:
			mu.Lock()
			err := lastErr
			mu.Unlock()
			if err == nil {
				err = errors.New("consumer closed")
			}
			return last, fmt.Errorf("ledger: reading the stream after ledger_seq %d: %w", last, err)
		case r := <-queue:
			raws = make([]raw, 0, min(size, len(queue)+1))
			raws = append(raws, r)
		}
	drain:
		for len(raws) < size && (until == 0 || raws[len(raws)-1].seq < until) {
			select {
			case r := <-queue:
				raws = append(raws, r)
			default:
				break drain
			}
		}
		// A message that cannot be decoded ends the read after the good
		// ones before it.
		batch, bad := s.decodeAll(raws)
		for len(batch) > 0 {
			n := len(batch)
			if until == 0 {
				// Follow hands over only durable events, so that nothing
				// read from the projections can be lost to a power loss (all
				// of them at once unless the Store commits in groups).
				var err error
				if n, err = s.durablePart(ctx, batch); err != nil {
					return last, err
				}
			}
			if err := fn(batch[:n]); err != nil {
				return last, err
			}
			last = batch[n-1].Seq
			owed = until == 0
			batch = batch[n:]
		}
		if bad != nil {
			return last, bad
		}
		if until != 0 && last >= until {
			return last, nil
		}
	}
}

// durablePart returns how many events at the start of batch are durable
// (at least one), waiting for the first to be when none is yet. The events
// an fsync already covers are handed over at once rather than behind the
// fsync that the batch's last one waits for: a command's answer waits for
// its event's fold, and a batch of a busy project often ends in events an
// fsync began too early to cover.
func (s *Store) durablePart(ctx context.Context, batch []kernel.Recorded) (int, error) {
	if s.group == nil {
		return len(batch), nil
	}
	for {
		synced := s.group.synced.Load()
		if n := sort.Search(len(batch), func(i int) bool { return batch[i].Seq > synced }); n > 0 {
			return n, nil
		}
		if err := s.Durable(ctx, batch[0].Seq); err != nil {
			return 0, err
		}
	}
}

// sent holds, by nonce, the events this Store appended that Follow has not
// received yet: Follow takes an event from here instead of decoding its
// message again (the event as the engine decided it; nothing changes an
// event once appended), and does not tell fn it caught up while one of them
// is unanswered (Config.FollowLinger). An
// append that failed is removed. Without a Follow to take them the answered
// ones would pile up: past maxSent they are dropped, and Follow decodes.
type sent struct {
	mu         sync.Mutex
	m          map[string]*sentEvent
	unanswered int
}

type sentEvent struct {
	e        kernel.Event
	answered bool
}

// maxSent bounds the events kept for Follow: many times the appends of a
// busy project between an answer and the message's delivery.
const maxSent = 4096

// add keeps e, appended with nonce n, as unanswered.
func (u *sent) add(n string, e kernel.Event) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]*sentEvent{}
	}
	if len(u.m) >= maxSent {
		for k, v := range u.m {
			if v.answered {
				delete(u.m, k)
			}
		}
	}
	u.m[n] = &sentEvent{e: e}
	u.unanswered++
}

// answered marks the append of n answered: kept for Follow when stored,
// dropped when not.
func (u *sent) answered(n string, stored bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.m[n]
	if !ok || v.answered {
		return
	}
	v.answered = true
	u.unanswered--
	if !stored {
		delete(u.m, n)
	}
}

// take removes and returns the event appended with nonce n, if kept.
func (u *sent) take(n string) (kernel.Event, bool) {
	if n == "" {
		return kernel.Event{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.m[n]
	if !ok {
		return kernel.Event{}, false
	}
	delete(u.m, n)
	if !v.answered {
		v.answered = true // its message is here: no more to wait for
		u.unanswered--
	}
	return v.e, true
}

// waiting reports whether an append is unanswered and its event not
// received.
func (u *sent) waiting() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.unanswered > 0
}

// deleteConsumer deletes a read's consumer, bounded, waiting for the answer
// only when wait is set: a consumer lost with its server may not be answered
// for, and its inactive threshold removes it anyway.
func (s *Store) deleteConsumer(ctx context.Context, name string, wait bool) {
	del := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = s.js.DeleteConsumer(dctx, s.cfg.Stream, name)
	}
	if wait {
		del()
	} else {
		go del()
	}
}

// decodeAll decodes raws in order, on several goroutines when there are
// enough of them. It returns the events before the first message that cannot
// be decoded, and why that one cannot.
func (s *Store) decodeAll(raws []raw) ([]kernel.Recorded, error) {
	out := make([]kernel.Recorded, len(raws))
	// firstBad[w] is the index of the first bad message of part w.
	workers := max(1, min(runtime.GOMAXPROCS(0), len(raws)/minPerDecoder))
	part := (len(raws) + workers - 1) / workers
	firstBad := make([]int, workers)
	errs := make([]error, workers)
	decodePart := func(w int) {
		firstBad[w] = -1
		for i := w * part; i < min((w+1)*part, len(raws)); i++ {
			r := raws[i]
			err := r.err
			switch {
			case err != nil:
			case r.event != nil:
				out[i] = kernel.Recorded{Seq: r.seq, Event: *r.event}
			default:
				out[i], err = s.decode(r.seq, r.subject, r.data)
			}
			if err != nil {
				firstBad[w], errs[w] = i, err
				return
			}
		}
	}
	if workers == 1 {
		decodePart(0)
	} else {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() { decodePart(w) })
		}
		wg.Wait()
	}
	for w := range workers {
		if firstBad[w] >= 0 {
			return out[:firstBad[w]], errs[w]
		}
	}
	return out, nil
}

// decode turns the message at ledger_seq seq into a recorded event. An
// unknown type, a newer version or an event on a subject other than its own
// is an error.
func (s *Store) decode(seq uint64, subject string, data []byte) (kernel.Recorded, error) {
	e, err := kernel.UnmarshalEvent(data)
	if err != nil {
		return kernel.Recorded{}, fmt.Errorf("ledger: event at ledger_seq %d: %w", seq, err)
	}
	if want := s.subject(e); subject != want {
		return kernel.Recorded{}, fmt.Errorf("ledger: event at ledger_seq %d is on subject %s, not %s", seq, subject, want)
	}
	return kernel.Recorded{Seq: seq, Event: e}, nil
}
