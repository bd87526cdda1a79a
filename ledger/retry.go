package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/kernel"
)

// JetStream API error codes that mean "not now": the stream or the cluster
// is between leaders and will answer again shortly.
const (
	codeClusterNotAvailable  jetstream.ErrorCode = 10008 // JetStream system temporarily unavailable
	codeStreamOffline        jetstream.ErrorCode = 10118 // stream is offline
	codeStreamOfflineReason  jetstream.ErrorCode = 10194 // stream is offline: {reason}
	codeLastSeqPerSubjectNot jetstream.ErrorCode = 10163 // expected last sequence per subject temporarily unavailable
)

// Backoff between attempts that failed at once (no responders, "temporarily
// unavailable"); attempts that timed out have waited already.
const (
	minBackoff = 25 * time.Millisecond
	maxBackoff = 250 * time.Millisecond
)

// unavailable reports whether err means that JetStream could not answer now
// but may shortly: an attempt that timed out (a stream without a leader
// does not answer at all), nobody listening (a reconnect, a server that is
// going away), or an API error that says "temporarily".
func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, errPending) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case codeClusterNotAvailable, codeStreamOffline, codeStreamOfflineReason, codeLastSeqPerSubjectNot:
			return true
		}
	}
	return false
}

// retry calls op with a context bounded by Config.AttemptTimeout until it
// succeeds, fails for a reason other than unavailability, or Config.RetryFor
// has passed since the first attempt; then it returns a kernel.Unavailable
// error that wraps the last failure. It returns ctx's error as soon as ctx
// ends. op learns whether an earlier attempt ended without an answer (it may
// have taken effect).
func (s *Store) retry(ctx context.Context, what string, op func(ctx context.Context, again bool) error) error {
	return retry(ctx, s.cfg, what, op)
}

// retry is Store.retry with cfg's bounds.
func retry(ctx context.Context, cfg Config, what string, op func(ctx context.Context, again bool) error) error {
	deadline := time.Now().Add(cfg.RetryFor)
	backoff := minBackoff
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, cfg.AttemptTimeout)
		err := op(actx, attempt > 0)
		cancel()
		if err == nil || !unavailable(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: %w", kernel.Errorf(kernel.Unavailable,
				"the ledger's NATS JetStream did not answer for %v (%s); retry later", cfg.RetryFor, what), err)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			continue // the attempt has waited already
		}
		t := time.NewTimer(min(backoff, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// errPending is an append that JetStream refused because the project's
// last sequence moved, while no event after the expected one can be read
// yet: a proposal (perhaps an earlier attempt of this very append) is
// neither stored nor dropped. It is retried like an outage.
var errPending = errors.New("ledger: the project moved, but its new event cannot be read yet")

// sameMsg reports whether the stored m is msg: same subject, same append
// nonce, same bytes.
func sameMsg(m *jetstream.RawStreamMsg, msg *nats.Msg) bool {
	return m.Subject == msg.Subject && m.Header.Get(HeaderNonce) == msg.Header.Get(HeaderNonce) && bytes.Equal(m.Data, msg.Data)
}

// nonce is a random token that tells one Append's message from any other,
// even one of identical content.
func nonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// refusedBefore reports whether the last append to project refused for a
// wrong last sequence expected expectLast too, and remembers this one.
func (s *Store) refusedBefore(project string, expectLast uint64) bool {
	prev, ok := s.refused.Swap(project, expectLast)
	return ok && prev.(uint64) == expectLast
}

// errDuplicate is a publish the server reported as a duplicate of another
// message with the same id.
var errDuplicate = errors.New("ledger: duplicate message id")

// publish publishes msg, the project's next event after expectLast, with
// opts, retrying while JetStream is unavailable, and returns its ledger_seq.
//
// An attempt that ends without an answer may have been stored anyway. Every
// attempt carries an expectation that the stored event would break, so at
// most one copy can be stored, and if one is, it is the project's first
// event after expectLast: once an attempt has gone unanswered, a refusal
// (wrong last sequence, or a duplicate message id) is checked against that
// event, and if it is msg (same subject, nonce and bytes), the append
// succeeded. With perProject (the
// expectation is on the project itself), a refusal at an expectation refused
// already (the writer caught up and found nothing new) is checked: where no
// event after expectLast can be read yet, the refusing server counts a
// proposal that is not stored yet (after a leader change, an entry of the
// old leader's term; perhaps our own), and the publish is retried rather
// than reported as a conflict, which the engine would only catch up on,
// find nothing new, and lose again until it gave up.
func (s *Store) publish(ctx context.Context, project string, expectLast uint64, msg *nats.Msg, perProject bool, opts ...jetstream.PublishOpt) (uint64, error) {
	var seq uint64
	uncertain := false
	err := s.retry(ctx, "append to "+project, func(ctx context.Context, again bool) error {
		uncertain = uncertain || again
		ack, err := s.js.PublishMsg(ctx, msg, opts...)
		switch {
		case err == nil && !ack.Duplicate:
			seq = ack.Sequence
			s.refused.Delete(project)
			return nil
		case err == nil:
			err = errDuplicate
		case !isWrongLastSeq(err):
			return err
		}
		if !uncertain && (!perProject || !s.refusedBefore(project, expectLast)) {
			// The first refusal at expectLast is a conflict, at once: a
			// writer that lost a race should catch up without an extra round
			// trip, or it keeps losing to one that need not. Only if it comes
			// back with the same expectation (it found nothing new) is the
			// refusal looked into.
			return err
		}
		filter := s.projectFilter(project)
		m, gerr := s.stream.GetMsg(ctx, expectLast+1, jetstream.WithGetMsgSubject(filter))
		switch {
		case gerr == nil && uncertain && sameMsg(m, msg):
			seq = m.Sequence // an unanswered attempt was stored
			return nil
		case gerr == nil:
			return err // another writer's event: a real conflict
		case !errors.Is(gerr, jetstream.ErrMsgNotFound):
			return gerr
		case !perProject:
			return err
		}
		// Nothing after expectLast can be read. If the project is where it
		// was expected, the refusal counts a proposal not stored yet.
		last, lerr := s.stream.GetLastMsgForSubject(ctx, filter)
		switch {
		case errors.Is(lerr, jetstream.ErrMsgNotFound):
			if expectLast == 0 {
				return errPending
			}
			return err
		case lerr != nil:
			return lerr
		case last.Sequence == expectLast:
			return errPending
		}
		return err
	})
	return seq, err
}
