package engine

import (
	"github.com/turnledger/turnledger/kernel"

	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Ledger is what the engine needs of the event store. The ledger package
// implements it on JetStream.
type Ledger interface {
	// Append appends e if the last ledger_seq among the project's events is
	// expectLast (0: the project has none), and returns its ledger_seq. A
	// lost race returns an error that errors.Is ErrStale.
	Append(ctx context.Context, project string, expectLast uint64, e kernel.Event) (uint64, error)
	// ReadProject calls fn for every event of the project after the given
	// ledger_seq, in order, and returns the last ledger_seq seen.
	ReadProject(ctx context.Context, project string, after uint64, fn func(kernel.Recorded) error) (uint64, error)
	// LastSeq returns the ledger_seq of the project's last event (0 if none).
	LastSeq(ctx context.Context, project string) (uint64, error)
	// Event returns the event at ledger_seq seq.
	Event(ctx context.Context, seq uint64) (kernel.Recorded, error)
	// AppendBatch appends the events, all or none, as Append appends one,
	// and returns their ledger_seqs.
	AppendBatch(ctx context.Context, project string, expectLast uint64, events []kernel.Event) ([]uint64, error)
	// Durable returns once the event at ledger_seq seq, acknowledged by
	// Append or read, is durable as the ledger's sync mode promises (at once
	// where the ledger syncs before it acknowledges). Many callers waiting
	// at once share one fsync: the group commit.
	Durable(ctx context.Context, seq uint64) error
}

// Config holds the engine's settings.
type Config struct {
	ClaimTTL      time.Duration // lease of a claim; renew extends it by as much
	CredentialTTL time.Duration // lifetime of an agent credential
	InviteTTL     time.Duration // default lifetime of a join invite
	MaxInviteTTL  time.Duration // the longest lifetime an invite may ask for
	MaxDepth      int           // deepest child Turn (a root Turn has depth 0)
	// MaxAttempts bounds the lost races a command takes that the catch-up
	// read cannot explain (the ledger refused the expectation, yet nothing
	// newer can be read: a replicated stream settling after a leader
	// change). ContendFor bounds the time a command keeps losing races that
	// it can explain: another instance appended meanwhile, so the project
	// is making progress, and the command is decided again on it.
	MaxAttempts int
	ContendFor  time.Duration
	// LoadWait bounds how long a request waits for its project's write model
	// to load (see load.go) before it is answered Unavailable (503, with
	// Retry-After); 0 waits without bound.
	LoadWait time.Duration
	// SecretKey derives the secrets a retry must answer again (claim and
	// credential tokens, join codes; see idempotency.go). Empty: NewEngine
	// draws one, good for this process only.
	SecretKey []byte
	Now       func() time.Time
	Rand      io.Reader
}

// DefaultConfig returns the defaults documented in docs/decisions.md and docs/concepts.md.
func DefaultConfig() Config {
	return Config{
		ClaimTTL:      60 * time.Second,
		CredentialTTL: 30 * 24 * time.Hour,
		InviteTTL:     24 * time.Hour,
		MaxInviteTTL:  7 * 24 * time.Hour,
		MaxDepth:      8,
		MaxAttempts:   16,
		ContendFor:    10 * time.Second,
		LoadWait:      500 * time.Millisecond,
		Now:           time.Now,
		Rand:          rand.Reader,
	}
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.ClaimTTL < time.Second {
		errs = append(errs, errors.New("claim TTL must be at least 1s"))
	}
	if c.CredentialTTL < time.Minute {
		errs = append(errs, errors.New("credential TTL must be at least 1m"))
	}
	if c.InviteTTL <= 0 || c.MaxInviteTTL < c.InviteTTL {
		errs = append(errs, errors.New("invite TTL must be positive and at most the maximum invite TTL"))
	}
	if c.MaxDepth < 0 {
		errs = append(errs, errors.New("max depth must not be negative"))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, errors.New("max attempts must be at least 1"))
	}
	if c.ContendFor < 0 {
		errs = append(errs, errors.New("contend-for must not be negative"))
	}
	if c.LoadWait < 0 {
		errs = append(errs, errors.New("load wait must not be negative"))
	}
	if len(c.SecretKey) != 0 && len(c.SecretKey) < 16 {
		errs = append(errs, errors.New("the secret key must be at least 16 bytes"))
	}
	if c.Now == nil || c.Rand == nil {
		errs = append(errs, errors.New("a clock and a random source are required"))
	}
	return errors.Join(errs...)
}

// Engine runs commands: per project it keeps the write model folded from the
// ledger, decides on it under the project's lock, appends with the expectation
// that the project's last ledger_seq is the one folded, and evolves. A lost
// race (another instance wrote) is caught up and decided again, so clients
// see only real refusals. Projects never wait for each other's loads, nor
// for round trips but the catch-up after a refused pipelined append; where
// the ledger pipelines, their commands decide and send one at a time
// (pipeline.go).
type Engine struct {
	ledger Ledger
	cfg    Config

	mu       sync.Mutex
	projects map[string]*slot

	// order is held by a command while the ledger pipelines, from before
	// it takes its slot's mu until it leaves it (lockOrder, pipeline.go).
	order sync.Mutex

	snaps     Snapshots // nil: no snapshots (snapshot.go)
	snapEvery uint64
}

type slot struct {
	id     string
	mu     sync.RWMutex // read: decisions that change nothing (authentication, read policy); write: the rest
	p      *kernel.Project
	loaded atomic.Bool  // set once, under mu, when p has been folded
	probe  lastSeqProbe // look-ups of the project's last ledger_seq, outside mu
	auth   authState    // what Authenticate reads, without mu (authview.go)

	// loading is closed when the load under way ends (nil when none runs);
	// loadErr is that load's error. Both are guarded by Engine.mu.
	loading chan struct{}
	loadErr error

	snapSeq uint64 // ledger_seq of the project's last snapshot; guarded by mu

	// sent are the appends of the project's commands sent and not known
	// answered (pipeline.go); mine collects those of the command running
	// under mu (nil when none runs). Both guarded by mu.
	sent []sentAppend
	mine *[]sentAppend
}

// New returns an engine over the ledger.
func New(l Ledger, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.SecretKey) == 0 {
		cfg.SecretKey = make([]byte, 32)
		if _, err := io.ReadFull(cfg.Rand, cfg.SecretKey); err != nil {
			return nil, fmt.Errorf("kernel: draw a secret key: %w", err)
		}
	}
	return &Engine{ledger: l, cfg: cfg, projects: map[string]*slot{}}, nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Projects lists the projects this engine has loaded.
func (e *Engine) Projects() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.projects))
	for id, s := range e.projects {
		if s.loaded.Load() {
			ids = append(ids, id)
		}
	}
	return ids
}

// with runs fn on the project's caught-up state under its lock.
func (e *Engine) with(ctx context.Context, project string, fresh bool, fn func(*kernel.Project) error) error {
	return e.do(ctx, project, fresh, false, fn)
}

// read is with for an fn that changes nothing: it shares the project's
// lock with other reads when the state needs no catching up, so that
// authentication and read checks do not queue behind one another, only
// behind the commands that change the state.
func (e *Engine) read(ctx context.Context, project string, fresh bool, fn func(*kernel.Project) error) error {
	return e.do(ctx, project, fresh, true, fn)
}

func (e *Engine) do(ctx context.Context, project string, fresh, readOnly bool, fn func(*kernel.Project) error) error {
	s, last, err := e.slotAt(ctx, project, fresh)
	if err != nil {
		return err
	}
	return e.doOn(ctx, s, project, last, readOnly, fn)
}

// slotAt returns the project's slot and, when fresh, its last ledger_seq as
// read after the call began: the state must be folded at least that far.
// The look-up is made before taking the project's lock (and shared by the
// calls waiting at the same time), so that it does not hold up the
// project's appends.
func (e *Engine) slotAt(ctx context.Context, project string, fresh bool) (*slot, uint64, error) {
	if !kernel.ValidID(project) {
		return nil, 0, kernel.Errorf(kernel.Validation, "project id %q must be 1 to 128 letters, digits, '_' or '-'", project)
	}
	e.mu.Lock()
	s := e.projects[project]
	if s == nil {
		s = e.newSlot(project)
		e.projects[project] = s
	}
	e.mu.Unlock()
	if err := e.awaitLoad(ctx, s, e.cfg.LoadWait); err != nil {
		return nil, 0, err
	}
	var last uint64
	if fresh {
		var err error
		if last, err = s.probe.get(ctx); err != nil {
			return nil, 0, fmt.Errorf("kernel: read last ledger_seq of project %s: %w", project, err)
		}
	}
	return s, last, nil
}

// soleWriter reports whether the engine's ledger is the only writer of its
// stream (it pipelines: pipeline.go). Every event on the ledger is then one
// this engine sent, folded into its project's state as it was sent (or read
// back from the ledger by a load), so the state holds every event
// acknowledged before a request arrived: a probe of the project's last
// ledger_seq reads it there rather than on the ledger.
func (e *Engine) soleWriter() bool {
	_, ok := e.pipeliner()
	return ok
}

// pipeliner returns the engine's ledger as a Pipeliner when it pipelines
// (it is its stream's only writer), else false.
func (e *Engine) pipeliner() (Pipeliner, bool) {
	pl, ok := e.ledger.(Pipeliner)
	return pl, ok && pl.Pipelined()
}

// newSlot makes the slot of a project, not loaded yet.
func (e *Engine) newSlot(project string) *slot {
	s := &slot{id: project, p: NewProject(project)}
	s.probe.fetch = func(ctx context.Context) (uint64, error) {
		if e.soleWriter() {
			// Every event on the ledger is one this engine sent and folded
			// as it sent it: the state is as far as the ledger.
			s.mu.RLock()
			defer s.mu.RUnlock()
			return s.p.Seq, nil
		}
		return e.ledger.LastSeq(ctx, project)
	}
	return s
}

// doOn runs fn on the slot's state folded at least up to last. A command
// (not readOnly) returns only once the state it was decided on is durable
// (Ledger.Durable): its own events and every event before them. It waits
// after releasing the project's lock, so that the project's next commands
// decide and append meanwhile and share the fsync (the group commit).
func (e *Engine) doOn(ctx context.Context, s *slot, project string, last uint64, readOnly bool, fn func(*kernel.Project) error) error {
	if readOnly {
		s.mu.RLock()
		if s.loaded.Load() && last <= s.p.Seq && s.p.Seq > 0 {
			defer s.mu.RUnlock()
			return fn(s.p)
		}
		s.mu.RUnlock() // the state needs folding first (or forgetting): see below
	}
	seq, sent, err := e.doLocked(ctx, s, project, last, readOnly, fn)
	if readOnly {
		return err
	}
	for _, a := range sent {
		if aerr := a.wait(ctx); aerr != nil {
			return refusedSent(project, aerr)
		}
	}
	if derr := e.ledger.Durable(ctx, seq); derr != nil {
		// The answer rests on events that may not survive a power loss:
		// the client retries with its Idempotency-Key.
		return derr
	}
	return err
}

// doLocked is doOn under the project's write lock; it also returns the
// ledger_seq of the state fn ended on, and the appends fn sent without
// waiting for their answers (pipeline.go).
func (e *Engine) doLocked(ctx context.Context, s *slot, project string, last uint64, readOnly bool, fn func(*kernel.Project) error) (seq uint64, sent []sentAppend, err error) {
	// Requests waiting for a last ledger_seq may take the answer of this
	// command's append (lastseq.go).
	appended := false
	s.probe.writing()
	defer func() { s.probe.written(appended) }()
	if !readOnly && e.soleWriter() {
		if err := e.lockOrder(ctx, s); err != nil {
			return 0, nil, err
		}
		defer e.order.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.auth.publish(s.p) // after fn's changes, still under the lock
	defer func() { seq = s.p.Seq }()
	if _, err := e.settle(ctx, s, false); err != nil {
		return 0, nil, err
	}
	if !s.loaded.Load() || last > s.p.Seq {
		if err := e.catchUp(ctx, s.p); err != nil {
			return 0, nil, err
		}
		s.loaded.Store(true)
	}
	before, k := s.p.Seq, s.probe.appending()
	s.mine = &sent
	err = fn(s.p)
	s.mine = nil
	if appended = s.p.Seq > before; appended {
		// fn appended, after the lock was taken: every event acknowledged
		// before that is at or below the project's last ledger_seq now.
		s.probe.appended(k, s.p.Seq)
	}
	if s.p.Seq == 0 {
		// The project has no events: keep nothing for it, so that requests
		// naming made-up projects leave no state behind.
		e.mu.Lock()
		if e.projects[project] == s {
			delete(e.projects, project)
		}
		e.mu.Unlock()
	}
	return 0, sent, err
}

// behind reports whether the ledger holds events of the project that p has
// not folded, and folds them when it does.
func (e *Engine) behind(ctx context.Context, p *kernel.Project) (bool, error) {
	last, err := e.ledger.LastSeq(ctx, p.ID)
	if err != nil {
		return false, fmt.Errorf("kernel: read last ledger_seq of project %s: %w", p.ID, err)
	}
	if last <= p.Seq {
		return false, nil
	}
	return true, e.catchUp(ctx, p)
}

func (e *Engine) catchUp(ctx context.Context, p *kernel.Project) error {
	_, err := e.ledger.ReadProject(ctx, p.ID, p.Seq, func(r kernel.Recorded) error {
		kernel.Evolve(p, r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("kernel: read project %s: %w", p.ID, err)
	}
	return nil
}

// staleWait waits before the next attempt after a lost race that the
// catch-up read could not explain, or after the third in a row: 5 ms
// doubling up to 200 ms, each between half and all of it at random, or
// until ctx ends.
func staleWait(ctx context.Context, attempt int) error {
	d := 200 * time.Millisecond
	if attempt < 6 {
		d = 5 * time.Millisecond << (attempt - 1)
	}
	d = d/2 + mathrand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// execute decides and appends one command on p (its lock held), retrying after
// a lost race. It returns the ledger_seq a reader must wait for: the appended
// event's, or the project's last when nothing was appended.
func (e *Engine) execute(ctx context.Context, p *kernel.Project, cmd kernel.Command) (uint64, error) {
	seq, _, _, err := e.decideAppend(ctx, p, cmd)
	return seq, err
}

// decideAppend is execute that also returns the first appended event (nil
// when the command changed nothing), or the remembered answer of an earlier
// request with the same idempotency key (then nothing is appended).
func (e *Engine) decideAppend(ctx context.Context, p *kernel.Project, cmd kernel.Command) (uint64, *kernel.Event, *kernel.Answer, error) {
	seq, events, a, err := e.decideAppendAll(ctx, p, cmd)
	if len(events) == 0 {
		return seq, nil, a, err
	}
	return seq, &events[0], a, err
}

// decideAppendAll is decideAppend with every event the command appended.
func (e *Engine) decideAppendAll(ctx context.Context, p *kernel.Project, cmd kernel.Command) (uint64, []kernel.Event, *kernel.Answer, error) {
	began, unexplained := time.Now(), 0
	for attempt := 1; ; attempt++ {
		if a, err := kernel.Recall(p, cmd, e.cfg.Now()); err != nil || a != nil {
			if a != nil {
				return a.Seq, nil, a, nil
			}
			return 0, nil, nil, err
		}
		events, err := kernel.Decide(p, cmd, e.cfg.Now())
		if err != nil || len(events) == 0 {
			// A refusal, or nothing to do, is only an answer if the state it
			// was decided on is current: another instance may have written
			// since. Check, and decide again on the caught-up state.
			if stale, cerr := e.behind(ctx, p); cerr != nil {
				return 0, nil, nil, cerr
			} else if stale && attempt < e.cfg.MaxAttempts {
				continue
			}
			if err != nil {
				return 0, nil, nil, err
			}
			return p.Seq, nil, nil, nil
		}
		ev := events[0]
		seqs, err := e.append(ctx, p, events)
		if errors.Is(err, kernel.ErrStale) {
			if s := e.heldSlot(p); s != nil {
				// The refusal may come of a pipelined append refused
				// before it: then the state is emptied, to be folded
				// again from the ledger, and the command decided again.
				reset, serr := e.settle(ctx, s, true)
				if serr != nil {
					return 0, nil, nil, serr
				}
				if reset {
					if err := e.catchUp(ctx, p); err != nil {
						return 0, nil, nil, err
					}
					s.loaded.Store(true)
					continue
				}
			}
			before := p.Seq
			if err := e.catchUp(ctx, p); err != nil {
				return 0, nil, nil, err
			}
			explained := p.Seq != before
			if !explained {
				unexplained++
			}
			if unexplained >= e.cfg.MaxAttempts || time.Since(began) >= e.cfg.ContendFor {
				// Nothing was appended, and the client may simply try again.
				return 0, nil, nil, kernel.Errorf(kernel.Unavailable, "project %s is being written by other instances too fast for this command: %d attempts lost the race in %v; retry shortly", p.ID, attempt, time.Since(began).Round(time.Millisecond))
			}
			if !explained || attempt > 3 {
				// The read found nothing newer: around a leader change of a
				// replicated stream, refusals come in a burst while the new
				// leader settles; or the races keep being lost to a busy
				// writer. Give it a moment (growing to 200 ms, with jitter
				// so that contending instances fall out of step) rather than
				// spending the attempts in a few milliseconds. An ordinary
				// lost race is retried at once.
				if err := staleWait(ctx, attempt); err != nil {
					return 0, nil, nil, err
				}
			}
			continue
		}
		if err != nil {
			return 0, nil, nil, fmt.Errorf("kernel: append %s: %w", ev.Type, err)
		}
		for i := range events {
			kernel.Evolve(p, kernel.Recorded{Seq: seqs[i], Event: events[i]})
		}
		return seqs[len(seqs)-1], events, nil, nil
	}
}

// append appends the events of one decision: one event as it is, several
// as one atomic batch (all or none).
func (e *Engine) append(ctx context.Context, p *kernel.Project, events []kernel.Event) ([]uint64, error) {
	if len(events) > 1 {
		return e.ledger.AppendBatch(ctx, p.ID, p.Seq, events)
	}
	if seq, sent, err := e.sendAppend(ctx, p, events[0]); sent {
		if err != nil {
			return nil, err
		}
		return []uint64{seq}, nil
	}
	seq, err := e.ledger.Append(ctx, p.ID, p.Seq, events[0])
	if err != nil {
		return nil, err
	}
	return []uint64{seq}, nil
}

// Execute runs one command on a project and returns the ledger_seq to wait
// for before reading its effects.
func (e *Engine) Execute(ctx context.Context, project string, cmd kernel.Command) (uint64, error) {
	var seq uint64
	err := e.with(ctx, project, false, func(p *kernel.Project) error {
		var err error
		seq, err = e.execute(ctx, p, cmd)
		return err
	})
	return seq, err
}

// View runs fn on the project's state, caught up with the ledger first, under
// the project's lock. fn must not keep p.
func (e *Engine) View(ctx context.Context, project string, fn func(p *kernel.Project) error) error {
	return e.read(ctx, project, true, fn)
}

// ViewFolded runs fn on the project's state as the engine has folded it,
// without asking the ledger whether it moved on: for a decision made right
// after Authenticate or View, which have just caught up. fn must not keep p.
func (e *Engine) ViewFolded(ctx context.Context, project string, fn func(p *kernel.Project) error) error {
	return e.read(ctx, project, false, fn)
}

// TurnsVisibleTo is kernel.TurnsVisibleTo on the project's state as the
// engine has folded it (ViewFolded): the agent a list of Turns is narrowed
// to for the caller, "" for one who reads every Turn.
func (e *Engine) TurnsVisibleTo(ctx context.Context, project string, c kernel.Caller) (string, error) {
	var agent string
	err := e.ViewFolded(ctx, project, func(p *kernel.Project) error {
		agent = kernel.TurnsVisibleTo(p, c)
		return nil
	})
	return agent, err
}

// Folded returns the ledger_seq of the last event of the project the engine
// has folded, without asking the ledger: right after Authenticate or View,
// which catch up first, it is the project's last ledger_seq.
func (e *Engine) Folded(project string) uint64 {
	e.mu.Lock()
	s := e.projects[project]
	e.mu.Unlock()
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.p.Seq
}

// Authenticate resolves the three-header identity against the project's
// caught-up state, so that a credential revoked through any instance fails
// here on the very next request.
func (e *Engine) Authenticate(ctx context.Context, project, agentID, token string) (kernel.Caller, error) {
	if !kernel.ValidID(agentID) {
		return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "X-Svc-Agent-Id must be a valid agent id")
	}
	hash := kernel.HashSecret(token)
	return e.authenticate(ctx, project, func(p *kernel.Project) (kernel.Caller, error) {
		return kernel.Authenticate(p, agentID, hash, e.cfg.Now())
	})
}

// AuthenticateToken resolves a bearer token alone to the agent whose
// credential it is (kernel.AuthenticateToken), on the caught-up state as
// Authenticate does.
func (e *Engine) AuthenticateToken(ctx context.Context, project, token string) (kernel.Caller, error) {
	hash := kernel.HashSecret(token)
	return e.authenticate(ctx, project, func(p *kernel.Project) (kernel.Caller, error) {
		return kernel.AuthenticateToken(p, hash, e.cfg.Now())
	})
}

func (e *Engine) authenticate(ctx context.Context, project string, auth func(*kernel.Project) (kernel.Caller, error)) (kernel.Caller, error) {
	s, last, err := e.slotAt(ctx, project, true)
	if err != nil {
		return kernel.Caller{}, err
	}
	if p, ok := s.auth.current(last); ok {
		// The published view holds every event up to last: no lock needed.
		return auth(p)
	}
	var c kernel.Caller
	err = e.doOn(ctx, s, project, last, true, func(p *kernel.Project) error {
		var err error
		c, err = auth(p)
		return err
	})
	return c, err
}

// KnownCredential reports whether the token is an active credential of the
// agent in the project as this engine last published it (authview.go),
// without a lock, a look at the ledger or a load: cheap enough to tell a
// valid request from a flood of wrong ones before throttling. A project not
// loaded yet knows no credential. Authenticate still decides.
func (e *Engine) KnownCredential(project, agentID, token string) bool {
	return e.known(project, func(p *kernel.Project) error {
		_, err := kernel.Authenticate(p, agentID, kernel.HashSecret(token), e.cfg.Now())
		return err
	})
}

// KnownToken is KnownCredential for a bearer token alone
// (AuthenticateToken).
func (e *Engine) KnownToken(project, token string) bool {
	return e.known(project, func(p *kernel.Project) error {
		_, err := kernel.AuthenticateToken(p, kernel.HashSecret(token), e.cfg.Now())
		return err
	})
}

func (e *Engine) known(project string, auth func(*kernel.Project) error) bool {
	e.mu.Lock()
	s := e.projects[project]
	e.mu.Unlock()
	if s == nil {
		return false
	}
	v := s.auth.view.Load()
	if v == nil {
		return false
	}
	return auth(v.p) == nil
}

// newID draws an id with a prefix: 128 random bits in hex.
func (e *Engine) newID(prefix string) (string, error) { return e.drawID(prefix, 0) }

// newTurnID draws a Turn id that sorts by creation time, as a UUIDv7 does:
// 48 bits of milliseconds since the epoch (of the engine's clock), then 80
// random bits, in hex. The projections key a Turn's row, records and feed by
// its id, so the Turns live at once sit side by side at the end of their
// B+trees: a batch of events of 64 running Turns rewrites a few pages
// instead of one page per Turn (and the pages fill up instead of splitting
// at random). The id stays opaque to clients; two Turns of the same
// millisecond have no order between them.
func (e *Engine) newTurnID() (string, error) { return e.drawID("turn_", 6) }

// drawID fills 16 bytes, the first timeBytes with the clock's milliseconds
// since the epoch (big-endian, low bytes) and the rest at random, and
// returns them in hex after prefix.
func (e *Engine) drawID(prefix string, timeBytes int) (string, error) {
	var b [16]byte
	if timeBytes > 0 {
		ms := uint64(e.cfg.Now().UnixMilli())
		for i := timeBytes - 1; i >= 0; i-- {
			b[i] = byte(ms)
			ms >>= 8
		}
	}
	if _, err := io.ReadFull(e.cfg.Rand, b[timeBytes:]); err != nil {
		return "", fmt.Errorf("kernel: draw id: %w", err)
	}
	return prefix + hex.EncodeToString(b[:]), nil
}

// newSecret draws a secret with a prefix: 256 random bits, base64url.
func (e *Engine) newSecret(prefix string) (string, error) {
	var b [32]byte
	if _, err := io.ReadFull(e.cfg.Rand, b[:]); err != nil {
		return "", fmt.Errorf("kernel: draw secret: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}
