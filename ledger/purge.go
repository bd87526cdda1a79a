package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/kernel"
)

// The stream below a horizon: archived first (Store.ArchiveTo), then purged
// (Store.PurgeBelow) but for the last event of each subject. The horizon is
// the archive's last ledger_seq + 1: every event below it is in the archive.

// ErrPurgeDenied is returned (wrapped) by PurgeBelow when the stream was
// made with deny_purge, which JetStream never lifts.
var ErrPurgeDenied = errors.New("ledger: the stream denies purges")

// errArchiveStop ends the read of ArchiveTo at the first event it keeps.
var errArchiveStop = errors.New("ledger: archive stop")

// ArchiveTo writes to a, in segments of at most segEvents events, the events
// of the stream after the archive's last and up to until (inclusive), and
// stops before the first event stop says to keep in the stream (nil: none).
// It returns the archive's last ledger_seq after the run. An archive that
// ends below the stream's first ledger_seq - 1 is an error: the events
// between are in neither, and the archive is not the one the stream was
// purged into.
func (s *Store) ArchiveTo(ctx context.Context, a *Archive, until uint64, segEvents int, stop func(kernel.Recorded) bool) (uint64, error) {
	done, err := a.Last()
	if err != nil {
		return 0, err
	}
	if done >= until {
		return done, nil
	}
	info, err := s.info(ctx)
	if err != nil {
		return done, err
	}
	until = min(until, info.State.LastSeq) // a read never waits for events to come
	first := max(info.State.FirstSeq, 1)
	if info.State.Msgs == 0 {
		first = info.State.LastSeq + 1
	}
	if done >= until {
		return done, nil
	}
	if first > done+1 {
		return done, fmt.Errorf("ledger: the stream begins at ledger_seq %d but the archive in %s ends at %d: the events between are in neither (is it the archive the stream was purged into?)", first, a.Where(), done)
	}
	segEvents = max(segEvents, 1)
	var lines []ArchiveLine
	write := func() error {
		if len(lines) == 0 {
			return nil
		}
		seg, err := a.WriteSegment(lines)
		if err != nil {
			return err
		}
		done, lines = seg.Last, lines[:0]
		return nil
	}
	err = s.consume(ctx, "", done, until, readInactive, func(batch []kernel.Recorded) error {
		for _, r := range batch {
			if r.Seq > until || (stop != nil && stop(r)) {
				return errArchiveStop
			}
			data, err := kernel.MarshalEvent(r.Event)
			if err != nil {
				return err
			}
			lines = append(lines, ArchiveLine{LedgerSeq: r.Seq, Subject: s.subject(r.Event), Event: data})
			if len(lines) >= segEvents {
				if err := write(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errArchiveStop) {
		return done, err
	}
	if err := write(); err != nil {
		return done, err
	}
	return done, nil
}

// FirstSeq is the stream's first ledger_seq: 1 on a stream never purged
// (even an empty one), the horizon of one purged below it.
func (s *Store) FirstSeq(ctx context.Context) (uint64, error) {
	info, err := s.info(ctx)
	if err != nil {
		return 0, err
	}
	if info.State.Msgs == 0 {
		return info.State.LastSeq + 1, nil
	}
	return max(info.State.FirstSeq, 1), nil
}

// PurgeBelow removes from the stream the events below ledger_seq horizon,
// but for the last event of each subject: the per-project expectation of
// Append ("the project's last ledger_seq is N") is checked by JetStream
// against the messages the stream holds, so a project whose every event lay
// below the horizon would otherwise read as empty and refuse every append.
// Below the horizon the stream thus keeps at most one event per project and
// aggregate kind (each of them in the archive too). The caller makes sure
// the events below the horizon are archived first (ArchiveTo) and that no
// reader needs them (the engine's snapshots and the projections are past
// them). A stream made with deny_purge is ErrPurgeDenied.
func (s *Store) PurgeBelow(ctx context.Context, horizon uint64) error {
	if horizon <= 1 {
		return nil
	}
	var info *jetstream.StreamInfo
	err := s.retry(ctx, "stream subjects", func(ctx context.Context, _ bool) error {
		var err error
		info, err = s.stream.Info(ctx, jetstream.WithSubjectFilter(s.cfg.Prefix+".>"))
		return err
	})
	if err != nil {
		return fmt.Errorf("ledger: purge below ledger_seq %d: %w", horizon, err)
	}
	subjects := slices.Sorted(maps.Keys(info.State.Subjects))
	for _, subj := range subjects {
		var m *jetstream.RawStreamMsg
		err := s.retry(ctx, "last of "+subj, func(ctx context.Context, _ bool) error {
			var err error
			m, err = s.stream.GetLastMsgForSubject(ctx, subj)
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		} else if err != nil {
			return fmt.Errorf("ledger: purge below ledger_seq %d: %w", horizon, err)
		}
		var steps [][]jetstream.StreamPurgeOpt
		if m.Sequence < horizon {
			if info.State.Subjects[subj] <= 1 {
				continue // its one event is its last
			}
			steps = append(steps, []jetstream.StreamPurgeOpt{jetstream.WithPurgeSubject(subj), jetstream.WithPurgeKeep(1)})
		} else {
			// In steps: the stream takes no append while it purges, so
			// a step bounds what a command waits.
			for seq := info.State.FirstSeq + purgeStep; seq < horizon; seq += purgeStep {
				steps = append(steps, []jetstream.StreamPurgeOpt{jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(seq)})
			}
			steps = append(steps, []jetstream.StreamPurgeOpt{jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(horizon)})
		}
		for _, opts := range steps {
			if err = s.retry(ctx, "purge "+subj, func(ctx context.Context, _ bool) error {
				return s.stream.Purge(ctx, opts...)
			}); err != nil {
				break
			}
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && strings.Contains(strings.ToLower(apiErr.Description), "purge") {
			return fmt.Errorf("%w: stream %s was made with deny_purge, which JetStream cannot lift; events are archived but the stream keeps them (%v)", ErrPurgeDenied, s.cfg.Stream, err)
		}
		if err != nil {
			return fmt.Errorf("ledger: purge %s below ledger_seq %d: %w", subj, horizon, err)
		}
	}
	return nil
}

// purgeStep is the most ledger_seqs one purge request covers.
var purgeStep uint64 = 20_000 // a test lowers it

// Messages is how many events the stream holds.
func (s *Store) Messages(ctx context.Context) (uint64, error) {
	info, err := s.info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}
