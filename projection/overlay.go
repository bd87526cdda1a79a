package projection

import (
	"container/heap"
	"context"

	"github.com/turnledger/turnledger/kernel"
)

// Answering a command before its batch is on disk.
//
// A command's answer shows the one Turn it changed, and must show it as of
// the command's ledger_seq (read-your-writes). Folding an event takes a
// fraction of what committing it takes, and the projector commits many
// events at once (Store.Fold). So once a batch is folded, before its
// transaction commits, the views of the Turns it changed and the ledger_seq
// folded are published; TurnAt answers from them. The views of the open
// transaction (overlay) stay published after its commit, as before, until
// the next commit replaces them: a command's handler often wakes after the
// commit, and reading the view is cheaper than decoding the row again. A
// Turn in neither is read from the file, which holds it as of every earlier
// transaction. The views are derived from the ledger, which holds every
// event folded already, so answering from them promises nothing the ledger
// does not keep: should the commit fail, the views are dropped and the
// projector folds the same events again from the checkpoint, into the same
// rows.
//
// Everything else (feeds, lists, agents, a GET of any kind) waits for the
// commit itself (WaitFor), so a client's next request sees the file.

// publishFolded makes the Turn views of events folded up to seq readable by
// TurnAt before their transaction commits: views joins those of the open
// transaction (overlay), which commit moves to before.
func (s *Store) publishFolded(seq uint64, views map[string]TurnView) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || seq <= s.folded {
		return
	}
	if s.overlay == nil {
		s.overlay = views
	} else {
		for k, v := range views {
			s.overlay[k] = v
		}
	}
	s.folded = seq
	s.foldedGate.advance(seq)
}

// TurnAt returns the snapshot of a Turn once the projections have folded
// ledger_seq seq (committed or not yet), or with ctx's error, or ErrClosed.
// It is for the answer of a command whose event, at seq, changed the Turn;
// anything else reads the committed file after WaitFor.
func (s *Store) TurnAt(ctx context.Context, project, turnID string, seq uint64) (TurnView, error) {
	k := string(key(project, turnID))
	for {
		s.mu.Lock()
		folded, closed := s.folded, s.closed
		v, ok := s.overlay[k]
		if !ok {
			v, ok = s.before[k]
		}
		var ch chan struct{}
		if folded < seq && !closed {
			ch = s.foldedGate.wait(seq)
		}
		s.mu.Unlock()
		if folded >= seq {
			if !ok {
				// Changed neither in the open transaction nor in the last
				// one committed: the file holds the Turn as of every
				// transaction before them, seq's included.
				return s.turnOrRetired(project, turnID) // a retired Turn's last view (retire.go)
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
	return s.waitUntil(ctx, seq, &s.folded, &s.foldedGate, nil)
}

// AnswerLag is how far behind a command's event the projector may be when
// the command is answered without waiting for its fold: its answer shows
// nothing of the projections, or the engine's Turn (engine.AsOf, ViewOf),
// and the client's next read waits for the commit of the engine's mark
// anyway. The bound keeps the projector near the commands: past it, answers
// wait for it, so that a burst of commands cannot leave reads far behind.
const AnswerLag = 1024

// WaitNear returns once the projections have folded ledger_seq seq minus
// AnswerLag (WaitFolded), or with ctx's error, or ErrClosed.
func (s *Store) WaitNear(ctx context.Context, seq uint64) error {
	return s.WaitFolded(ctx, seq-min(seq, AnswerLag))
}

// Answer returns the Turn a command changed at seq, for the command's
// answer. t is the engine's Turn as the command left it (engine.AsOf): it is
// shown as the projections will show it (ViewOf) once the projector is
// within AnswerLag of seq (WaitNear), without waiting for seq's fold. Where
// the engine gave none (nil: a command answered again, one on a finished
// Turn), it is the projections' view once they have folded seq (TurnAt).
// Every face answers its commands through it, so that they show the same.
func (s *Store) Answer(ctx context.Context, project, turnID string, seq uint64, t *kernel.Turn) (TurnView, error) {
	if t == nil {
		return s.TurnAt(ctx, project, turnID, seq)
	}
	if err := s.WaitNear(ctx, seq); err != nil {
		return TurnView{}, err
	}
	return ViewOf(project, t), nil
}

// gate wakes each waiter once, when a mark (the checkpoint, or the
// ledger_seq folded) reaches the ledger_seq it waits for. A channel closed
// on every advance would wake every waiter each time: with a fold per
// arriving event and dozens of requests waiting, that would be a wake-up per
// waiter per event. Its methods run under Store.mu.
type gate struct{ ws waitHeap }

type waiter struct {
	seq uint64
	ch  chan struct{}
}

// wait returns a channel closed once the mark reaches seq, or the store
// closes.
func (g *gate) wait(seq uint64) chan struct{} {
	ch := make(chan struct{})
	heap.Push(&g.ws, waiter{seq: seq, ch: ch})
	return ch
}

// advance wakes the waiters of every ledger_seq up to mark.
func (g *gate) advance(mark uint64) {
	for len(g.ws) > 0 && g.ws[0].seq <= mark {
		close(heap.Pop(&g.ws).(waiter).ch)
	}
}

// closeAll wakes every waiter (the store closes).
func (g *gate) closeAll() {
	for _, w := range g.ws {
		close(w.ch)
	}
	g.ws = nil
}

// waitHeap orders waiters by ledger_seq, lowest first (container/heap).
type waitHeap []waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].seq < h[j].seq }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(waiter)) }
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}
