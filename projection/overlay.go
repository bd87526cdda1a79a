package projection

import "context"

// Answering a command before its batch is on disk.
//
// A command's answer shows the one Turn it changed, and must show it as of
// the command's ledger_seq (read-your-writes). The fold of a batch takes a
// fraction of its transaction's time: most of it is the commit. So once a
// batch is folded, and before its commit, Apply publishes the views of the
// Turns the batch wrote and the ledger_seq folded. TurnAt answers from them.
// The views stay published after the commit, with those of the batch
// before, until the next batch replaces them: a command's handler often
// wakes after its batch committed, and reading the view is cheaper than
// decoding the row again. A Turn in neither batch is read from the file,
// which holds it as of every earlier batch. The views are derived from the
// ledger, which holds every event of the batch already, so answering from
// them promises nothing the ledger does not keep: should the commit fail,
// the views are dropped and the projector folds the same events again from
// the checkpoint, into the same rows.
//
// Everything else (feeds, lists, agents, a GET of any kind) waits for the
// commit itself (WaitFor), so a client's next request sees the file.

// publishFolded makes the Turn views of a batch folded up to seq readable by
// TurnAt before the batch commits.
func (s *Store) publishFolded(seq uint64, views map[string]TurnView) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || seq <= s.folded {
		return
	}
	s.before, s.overlay, s.folded = s.overlay, views, seq
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
		v, ok := s.overlay[k]
		if !ok {
			v, ok = s.before[k]
		}
		s.mu.Unlock()
		if folded >= seq {
			if !ok {
				// Changed by neither of the last two batches: the file
				// holds the Turn as of every batch before them, seq's
				// included.
				return s.Turn(project, turnID)
			}
			return v, nil
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
