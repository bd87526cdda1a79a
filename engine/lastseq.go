package engine

import (
	"context"
	"sync"
)

// lastSeqProbe finds a project's last ledger_seq on behalf of every request
// that needs it, outside the project's lock, and shares one answer among
// the requests that wait at the same time.
//
// What a request needs is a last ledger_seq read after it arrived: every
// event acknowledged before the request (a revocation through any instance,
// say) is then at or below it. Look-ups are numbered as they start, and a
// request takes only the answer of a look-up numbered above every look-up
// that had started when it arrived. Two kinds of look-up count:
//
//   - a probe: the ledger's last ledger_seq of the project (Ledger.LastSeq).
//     At most one is in flight per project; the requests that arrive
//     meanwhile share the next one, which starts when it ends.
//   - a command of this engine that appended to the project: the ledger
//     took the append on the condition that the project's last ledger_seq
//     was the one the engine held, so every event acknowledged before the
//     command took the project's lock is at or below the project's
//     ledger_seq once the command is done. The command is numbered when it
//     takes the lock.
//
// Under load a project is appended to all the time: while a command of the
// project holds or waits for its lock (and so may append after the waiting
// requests arrived), no probe starts; the requests take the answer of the
// next append. A command that leaves without appending (a refusal, a claim
// with no work) starts a probe for whoever still waits, and so does the
// last command to leave. So a busy project is probed rarely, and none of
// the look-ups holds the project's lock for a request.
//
// Where the engine's ledger is its stream's only writer (it pipelines:
// pipeline.go), a probe reads the project's state instead of the ledger
// (Engine.soleWriter): every event on the ledger is one the engine sent and
// folded into the state as it sent it, so the state already holds every
// event acknowledged before the request arrived. A second writer turns the
// pipeline off when it opens, before it can append, and the probes ask the
// ledger again. The requests still take the next append's answer when a
// command is on its way, as above: skipping the wait altogether was
// measured slower on one busy project (its commands then meet at the lock
// all at once).
type lastSeqProbe struct {
	mu      sync.Mutex
	started uint64     // look-ups started so far, probes and appends
	probing bool       // a probe is in flight
	cur     *probeCall // the requests the probe in flight answers; nil when none
	next    *probeCall // the requests that arrived since it started; nil when none
	writers int        // commands that hold or wait for the project's lock

	// fetch reads the project's last ledger_seq from the ledger; set when
	// the probe is made.
	fetch func(context.Context) (uint64, error)
}

type probeCall struct {
	done     chan struct{}
	after    uint64 // started when its last request arrived: a look-up numbered above it answers them all
	answered bool
	seq      uint64
	err      error
}

// get returns the project's last ledger_seq as found by a look-up that
// started after get was called.
func (q *lastSeqProbe) get(ctx context.Context) (uint64, error) {
	q.mu.Lock()
	c := q.next
	if c == nil {
		c = &probeCall{done: make(chan struct{})}
		q.next = c
	}
	c.after = q.started
	if !q.probing && q.writers == 0 {
		q.probe()
	}
	q.mu.Unlock()
	select {
	case <-c.done:
		return c.seq, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// probe starts a probe for the waiting requests (q.next), on a goroutine
// of its own so that an append may answer them first. The probe is shared,
// so it runs under no request's context (the ledger bounds its own
// retries). When it ends it answers its requests, and
// starts the next probe if requests arrived meanwhile and are still
// waiting with no command to answer them. Called with mu held.
func (q *lastSeqProbe) probe() {
	q.cur, q.next = q.next, nil
	q.probing = true
	q.started++
	go func() {
		seq, err := q.fetch(context.Background())
		q.mu.Lock()
		defer q.mu.Unlock()
		q.probing = false
		if q.cur != nil {
			q.cur.answer(seq, err) // its requests all arrived before the probe started
			q.cur = nil
		}
		if q.next != nil && q.writers == 0 {
			q.probe()
		}
	}()
}

// writing counts a command that is about to take the project's lock: it
// may append, after every request waiting now arrived. written counts it
// out once it released the lock, and starts a probe if requests still wait
// and the command appended nothing (so the commands after it may not
// either) or no other command is left to answer them.
func (q *lastSeqProbe) writing() {
	q.mu.Lock()
	q.writers++
	q.mu.Unlock()
}

func (q *lastSeqProbe) written(appended bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.writers--
	if q.next != nil && !q.probing && (q.writers == 0 || !appended) {
		q.probe()
	}
}

func (c *probeCall) answer(seq uint64, err error) {
	if c.answered {
		return
	}
	c.answered, c.seq, c.err = true, seq, err
	close(c.done)
}

// appending numbers a command that has taken the project's lock and may
// append; appended gives the project's ledger_seq after its appends to the
// requests that arrived before it was numbered.
func (q *lastSeqProbe) appending() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.started++
	return q.started
}

func (q *lastSeqProbe) appended(k, seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c := q.cur; c != nil && k > c.after {
		c.answer(seq, nil) // the probe's own answer, when it comes, goes nowhere
		q.cur = nil
	}
	if c := q.next; c != nil && k > c.after {
		c.answer(seq, nil)
		q.next = nil
	}
}
