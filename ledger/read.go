package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/kernel"
)

// readInactive is how long the server keeps the ordered consumer of a bounded
// read (ReadProject, ReadAll) once nobody pulls from it. Reads delete their
// consumer when they end; this is the backstop when the delete cannot happen
// (the process died). Longer than any pause of a slow fn, or the server would
// drop the consumer under the reader, which would then recreate it.
const readInactive = time.Minute

// directReads is how many events ReadProject gets one by one before it sets
// up an ordered consumer for the rest.
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
		m, err := s.stream.GetMsg(ctx, seen+1, jetstream.WithGetMsgSubject(filter))
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
// goroutine, one batch at a time, and may keep the batch.
func (s *Store) Follow(ctx context.Context, after uint64, fn func(batch []kernel.Recorded) error) error {
	return s.consume(ctx, "", after, 0, 0, fn)
}

// item is one decoded message, or why it could not be decoded.
type item struct {
	rec kernel.Recorded
	err error
}

// consume reads the stream (filtered on filter, unless empty) from ledger_seq
// after+1 with an ordered consumer and hands fn batches of decoded events. It
// returns nil once it has handed over the event at ledger_seq until (until ==
// 0: never; it follows until ctx is done and returns ctx.Err()).
//
// Messages are decoded on the client's delivery goroutine and queued to this
// one, so decoding overlaps with fn.
func (s *Store) consume(ctx context.Context, filter string, after, until uint64, inactive time.Duration, fn func([]kernel.Recorded) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ccfg := jetstream.OrderedConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       after + 1,
		InactiveThreshold: inactive,
	}
	if filter != "" {
		ccfg.FilterSubjects = []string{filter}
	}
	cons, err := s.stream.OrderedConsumer(ctx, ccfg)
	if err != nil {
		return fmt.Errorf("ledger: ordered consumer: %w", err)
	}
	size := s.cfg.BatchSize
	items := make(chan item, size)
	var (
		mu      sync.Mutex
		lastErr error
	)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var it item
		if md, err := m.Metadata(); err != nil {
			it.err = fmt.Errorf("ledger: message metadata: %w", err)
		} else {
			it.rec, it.err = s.decode(md.Sequence.Stream, m.Subject(), m.Data())
		}
		select {
		case items <- it:
		case <-ctx.Done():
		}
	},
		jetstream.PullMaxMessages(max(size, 500)),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			mu.Lock()
			lastErr = err
			mu.Unlock()
		}),
	)
	if err != nil {
		return fmt.Errorf("ledger: consume: %w", err)
	}
	defer func() {
		cancel() // unblocks the delivery goroutine first
		cc.Stop()
		// Ordered consumers are ephemeral, but the server counts them against
		// its limit (1000 per stream by default) until they have been idle for
		// InactiveThreshold: delete this one now.
		if info := cons.CachedInfo(); info != nil {
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = s.js.DeleteConsumer(dctx, s.cfg.Stream, info.Name)
			dcancel()
		}
	}()
	closed := cc.Closed()

	var last uint64
	for {
		var batch []kernel.Recorded
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-closed:
			mu.Lock()
			err := lastErr
			mu.Unlock()
			if err == nil {
				err = errors.New("consumer closed")
			}
			return fmt.Errorf("ledger: reading the stream after ledger_seq %d: %w", last, err)
		case it := <-items:
			if it.err != nil {
				return it.err
			}
			batch = make([]kernel.Recorded, 0, min(size, len(items)+1))
			batch = append(batch, it.rec)
			last = it.rec.Seq
		}
		var bad error // a message that cannot be decoded ends the read after the good ones before it
	drain:
		for len(batch) < size && (until == 0 || last < until) {
			select {
			case it := <-items:
				if it.err != nil {
					bad = it.err
					break drain
				}
				batch = append(batch, it.rec)
				last = it.rec.Seq
			default:
				break drain
			}
		}
		if err := fn(batch); err != nil {
			return err
		}
		if bad != nil {
			return bad
		}
		if until != 0 && last >= until {
			return nil
		}
	}
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
