package engine

import (
	"context"

	"github.com/turnledger/turnledger/kernel"
)

// Pipelined appends: a project's next command decides while the last one's
// append is on its way.
//
// Where the ledger is the only writer of its stream (an embedded NATS
// server with no listener: ledger.Store.AppendAsync), a command's append is
// sent and its event folded into the project's state at the ledger_seq the
// server will give it, and the command leaves the project's lock without
// waiting for the server's answer; it waits for the answer (and then for
// durability) outside the lock, beside the next commands. One project's
// commands so cost the lock a decision and a send each, not a round trip.
//
// The server stores such an append at that ledger_seq or refuses it (the
// ledger sends it with an expectation on the whole stream). A refusal (a
// full disk, an expectation broken) means the state holds an event the
// ledger does not, and every append sent after it is refused too: the
// command whose append was refused is answered Unavailable (nothing of it
// was stored; the client retries), and the project's state is emptied and
// folded again from the ledger before the next decision (settle). A read
// of the state (authentication, read policy) may see an event whose append
// is not answered yet, as it may see one not yet durable.
//
// The pipelined appends of every project are one sequence: each is sent
// expecting the stream's last ledger_seq to be the one before it, so the
// ledger sends them one at a time, in the order of its guesses. Commands of
// several projects deciding at once would only meet again at that send,
// each holding its project's lock while it waits there; on a busy machine
// the waiters form a convoy (a lock handed to a goroutine that must first
// get a core), and the appends' answers wait behind them. So while the
// ledger pipelines, a command decides and sends under the engine's order
// lock, one project at a time, as one project's commands always have under
// its lock. The command queues for the order lock first and takes its
// project's lock once it holds it (lockOrder): queueing at both, a command
// of a busy project would wait twice. A project's load and waits for
// answers and durability stay outside the order lock; the catch-up after a
// refused append runs under it (docs/speed.md has the measurements).

// Pipeliner is a Ledger that sends an append and returns before the server
// answers, where it is the only writer of its stream
// (ledger.Store.AppendAsync): answered is closed once the server has
// answered, and result then says how (nil: stored at seq). A Ledger that
// wraps another (serve's timing of appends) implements it to keep the
// pipeline.
type Pipeliner interface {
	Pipelined() bool
	AppendAsync(ctx context.Context, project string, expectLast uint64, e kernel.Event) (seq uint64, answered <-chan struct{}, result func() error, err error)
}

// sentAppend is an append sent and perhaps not answered yet.
type sentAppend struct {
	answered <-chan struct{}
	result   func() error
}

func (a sentAppend) done() bool {
	select {
	case <-a.answered:
		return true
	default:
		return false
	}
}

// wait returns the server's answer (nil: stored), or ctx's error.
func (a sentAppend) wait(ctx context.Context) error {
	select {
	case <-a.answered:
		return a.result()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendAppend sends the one event of a decision on p without waiting for its
// answer, when the ledger pipelines and p is the state of a slot whose lock
// the caller holds; ok is false when it did not (append in sequence).
func (e *Engine) sendAppend(ctx context.Context, p *kernel.Project, ev kernel.Event) (seq uint64, ok bool, err error) {
	pl, can := e.pipeliner()
	if !can {
		return 0, false, nil
	}
	s := e.heldSlot(p)
	if s == nil {
		return 0, false, nil
	}
	seq, answered, result, err := pl.AppendAsync(ctx, p.ID, p.Seq, ev)
	if err != nil {
		return 0, true, err
	}
	a := sentAppend{answered: answered, result: result}
	s.sent = append(s.sent, a)
	*s.mine = append(*s.mine, a)
	return seq, true, nil
}

// lockOrder takes the engine's order lock for a command on s, while the
// ledger pipelines, before the command takes s's lock: one queue for every
// project's commands, so that a command waits once, not at its project's
// lock and then again at the order lock. A state emptied after a refused
// append is loaded again (awaitLoad) without the order lock held, so that
// no other project's command waits for that load.
func (e *Engine) lockOrder(ctx context.Context, s *slot) error {
	for {
		e.order.Lock()
		if s.loaded.Load() {
			return nil
		}
		e.order.Unlock()
		if err := e.awaitLoad(ctx, s, e.cfg.LoadWait); err != nil {
			return err
		}
	}
}

// heldSlot returns the slot whose state p is, when a command runs on it
// under its lock (doLocked), or nil.
func (e *Engine) heldSlot(p *kernel.Project) *slot {
	e.mu.Lock()
	s := e.projects[p.ID]
	e.mu.Unlock()
	if s == nil || s.p != p || s.mine == nil {
		return nil
	}
	return s
}

// settle forgets the slot's sent appends the ledger has answered (all of
// them, waiting, when wait). Should one have been refused, the state holds
// an event the ledger does not: it is emptied, to be folded again from the
// ledger (s.loaded is cleared; the caller catches up). It reports whether it
// emptied the state. s.mu is held.
func (e *Engine) settle(ctx context.Context, s *slot, wait bool) (bool, error) {
	if len(s.sent) == 0 {
		return false, nil
	}
	kept := s.sent[:0]
	failed := false
	for _, a := range s.sent {
		if wait {
			if err := a.wait(ctx); err != nil && ctx.Err() != nil {
				return false, ctx.Err()
			}
		}
		switch {
		case !a.done():
			kept = append(kept, a)
		case a.result() != nil:
			failed = true
		}
	}
	if !failed {
		clear(s.sent[len(kept):])
		s.sent = kept
		return false, nil
	}
	// The appends sent after a refused one are refused as well: forget
	// them with the state decided on them.
	s.sent = nil
	*s.p = *NewProject(s.id)
	s.loaded.Store(false)
	s.auth.view.Store(nil)
	return true, nil
}

// refusedSent is the answer of a command whose pipelined append the ledger
// did not store.
func refusedSent(project string, err error) error {
	if kernel.ErrorKind(err) == kernel.Unavailable {
		return err
	}
	return kernel.Errorf(kernel.Unavailable, "project %s: the ledger refused the change, decided while an earlier one it refused was on its way (%v); nothing was stored: retry", project, err)
}
