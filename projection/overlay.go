package projection

import (
	"context"
	"encoding/json"
)

// Answering a command before its batch is on disk.
//
// A command's answer shows the one Turn it changed, and must show it as of
// the command's ledger_seq (read-your-writes). The fold of a batch takes a
// fraction of its transaction's time: most of it is the commit, two fsyncs.
// So once a batch is folded, and before its commit, Apply publishes the Turn
// rows the batch wrote (already encoded, as they go into the file) and the
// ledger_seq folded. TurnAt answers from them, and falls back to the file
// for a Turn the batch did not change. The rows are derived from the ledger,
// which holds every event of the batch already, so answering from them
// promises nothing the ledger does not keep: should the commit fail, the
// projector folds the same events again from the checkpoint, into the same
// rows.
//
// Everything else (feeds, lists, agents, a GET of any kind) waits for the
// commit itself (WaitFor), so a client's next request sees the file.

// publishFolded makes the Turn rows of a batch folded up to seq readable by
// TurnAt before the batch commits.
func (s *Store) publishFolded(seq uint64, rows map[string][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || seq <= s.folded {
		return
	}
	s.overlay, s.folded = rows, seq
	close(s.foldedCh)
	s.foldedCh = make(chan struct{})
}

// TurnAt returns the snapshot of a Turn once the projections have folded
// ledger_seq seq (committed or not yet), or with ctx's error, or ErrClosed.
// It is for the answer of a command whose event, at seq, changed the Turn;
// anything else reads the committed file after WaitFor.
func (s *Store) TurnAt(ctx context.Context, project, turnID string, seq uint64) (TurnView, error) {
	k := string(key(project, turnID))
	for {
		s.mu.Lock()
		folded, ch, closed := s.folded, s.foldedCh, s.closed
		row, ok := s.overlay[k]
		s.mu.Unlock()
		if folded >= seq {
			if !ok {
				// Not changed by the batch being committed: the file holds
				// the Turn as of every batch before it, seq's included.
				return s.Turn(project, turnID)
			}
			var rec turnRecord
			if err := json.Unmarshal(row, &rec); err != nil {
				return TurnView{}, err
			}
			return turnView(project, &rec.Turn), nil
		}
		if closed {
			return TurnView{}, ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return TurnView{}, ctx.Err()
		}
	}
}

// WaitFolded returns once the projections have folded ledger_seq seq,
// committed or not, or with ctx's error, or ErrClosed. It is for the answer
// of a command that shows nothing of the projections: every read waits for
// the commit (WaitFor) of at least the project's last ledger_seq, so the
// client's next request still reads its write.
func (s *Store) WaitFolded(ctx context.Context, seq uint64) error {
	return s.waitUntil(ctx, seq, func() (uint64, chan struct{}) { return s.folded, s.foldedCh })
}
