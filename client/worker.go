package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Job is one claimed Turn handed to a Handler.
type Job struct {
	Claim ClaimToken // the live claim (its ExpiresAt moves as it is renewed)
	Turn  Turn       // the Turn as claimed

	c     *Client
	stop  func()        // asks the handler to stop: a stop was requested
	delay time.Duration // the worker's RetryDelay

	mu            sync.Mutex
	stopRequested bool
	awaiting      bool // AwaitInput is suspending the Turn, or has
	suspended     bool // AwaitInput has suspended the Turn
}

// Append appends a semantic record under the job's claim. A record
// answered with stop_requested cancels the handler's context. It is sent
// with an Idempotency-Key and retried with it (up to 5 attempts, RetryDelay
// apart) when the answer is lost or the service unavailable, so the record
// is appended once.
func (j *Job) Append(ctx context.Context, role string, payload any) (*RecordResult, error) {
	claim := j.claim()
	var res *RecordResult
	err := retryKeyed(ctx, 5, j.delay, func(ctx context.Context) error {
		var err error
		res, err = j.c.AppendSemanticRecord(ctx, claim, role, payload)
		return err
	})
	if err == nil && res.StopRequested {
		j.markStop()
	}
	return res, err
}

// AwaitInput suspends the job's Turn until someone answers prompt: a
// person, a chat bot, another system. schema, a JSON Schema of the answer
// (nil for none), and inputBy, the time by which the answer must come (nil:
// no limit; then the Turn ends as timed_out), are shown to whoever answers.
// It returns the input token and URL, this once: the handler hands them to
// whoever should answer (ProvideInputWithToken), and returns.
//
// Once AwaitInput has succeeded the job is over but the Turn is not
// finished: the claim is released, the worker stops renewing it and does
// not finish the Turn, whatever the handler returns. When the answer
// arrives the Turn is queued again for its target and comes back to a
// handler through a claim, with the answer in its context (a record with
// role "input": LatestInput). The suspend is sent with an Idempotency-Key
// and retried with it like Append, so a retry answers the same token.
func (j *Job) AwaitInput(ctx context.Context, prompt string, schema any, inputBy *time.Time) (*InputWaitResult, error) {
	claim := j.claim()
	j.mu.Lock()
	j.awaiting = true // a renewal refused from now on is the suspend's doing
	j.mu.Unlock()
	var res *InputWaitResult
	err := retryKeyed(ctx, 5, j.delay, func(ctx context.Context) error {
		var err error
		res, err = j.c.SuspendTurnForInput(ctx, claim, InputWait{Prompt: prompt, Schema: schema, InputBy: inputBy})
		return err
	})
	j.mu.Lock()
	j.awaiting, j.suspended = err == nil, err == nil
	j.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return res, nil
}

// LatestInput returns the payload of the Turn's latest record with role
// "input" (an answer to AwaitInput), or nil when it has none.
func (j *Job) LatestInput(ctx context.Context) (json.RawMessage, error) {
	var latest json.RawMessage
	var after uint64
	for {
		pg, err := j.c.TurnContext(ctx, j.Turn.ProjectID, j.Turn.TurnID, after, 200)
		if err != nil {
			return nil, err
		}
		for _, it := range pg.Items {
			if it.Role == "input" {
				latest = it.Payload
			}
		}
		if !pg.More() || pg.NextAfterTurnSeq == nil {
			return latest, nil
		}
		after = *pg.NextAfterTurnSeq
	}
}

func (j *Job) suspendedForInput() bool { _, s := j.inputWait(); return s }

func (j *Job) suspendingForInput() bool { a, _ := j.inputWait(); return a }

// inputWait reports whether AwaitInput is suspending the Turn or has, and
// whether it has.
func (j *Job) inputWait() (awaiting, suspended bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.awaiting, j.suspended
}

// StopRequested reports whether an operator asked to stop the Turn; the
// handler's context is cancelled then too.
func (j *Job) StopRequested() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stopRequested
}

func (j *Job) claim() ClaimToken {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.Claim
}

func (j *Job) markStop() {
	j.mu.Lock()
	j.stopRequested = true
	j.mu.Unlock()
	j.stop()
}

// Result is what a handler finished a Turn with. An empty Outcome is
// "succeeded"; FinalPayload (nil for none) is encoded as JSON and recorded
// with FinalRecordRole (default "final").
type Result struct {
	Outcome         string
	FinalPayload    any
	FinalRecordRole string
}

// Handler does the work of one Turn. Its context is cancelled when a stop of
// the Turn is requested, when the claim is lost (a renewal refused: the claim
// expired and was released, or the Turn was stopped or taken), or when a
// shutdown runs out of patience; context.Cause(ctx) is then ErrStopRequested,
// ErrClaimLost or ErrShutdown. A nil error finishes the Turn with the Result;
// an error finishes it as failed, or as stopped when a stop was requested.
// After Job.AwaitInput the Turn waits for input and is not finished here.
// An error made by RetryLater (found with errors.As, so it may be wrapped)
// finishes it as failed with a retry asked: the service queues the Turn
// again after its backoff, or ends it as dead when its MaxAttempts are
// spent. The error's text is the final payload, {"error": "..."}, in
// every case. After a lost claim the Turn is not finished here; after a
// shutdown's grace its claim is handed back (Client.ReleaseClaim), so the
// Turn is claimable again at once, in its old place.
type Handler func(ctx context.Context, job *Job) (Result, error)

// RetryError is a handler's error that asks for another attempt of the
// Turn (RetryLater).
type RetryError struct{ Err error }

// RetryLater wraps a handler's error to ask for another attempt: the
// worker finishes the Turn with outcome failed and retry, and the service
// queues it again once its backoff has passed (DispatchRequest.RetryBackoff;
// by default 1s after the first attempt, doubling, at most 60s), for this
// worker or another, or ends it with outcome dead when it has had
// DispatchRequest.MaxAttempts claims. A plain error finishes the Turn as
// failed for good.
func RetryLater(err error) error { return &RetryError{Err: err} }

func (e *RetryError) Error() string {
	if e.Err == nil {
		return "retry later"
	}
	return e.Err.Error()
}

func (e *RetryError) Unwrap() error { return e.Err }

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	Project, Agent string // who works: the client's agent by default
	// Capacity is how many Turns run at once; 0 reads the agent's capacity.
	Capacity int
	// Wait is the long-poll wait of each claim request (default 30s).
	Wait time.Duration
	// RenewFraction: a claim is renewed when this fraction of its remaining
	// lease has passed (default 1/3).
	RenewFraction float64
	// ShutdownGrace is how long Run waits, once its ctx ends, for running
	// handlers before it cancels their contexts (default 30s). A handler
	// cancelled this way leaves its Turn unfinished: the claim expires and
	// the Turn is queued again for another worker.
	ShutdownGrace time.Duration
	// RetryDelay is the pause after a claim request that failed for a
	// passing reason (the network, a 5xx, a 429; longer when the service
	// sends Retry-After), and the first pause before a renew, record or
	// finish whose answer was lost is sent again. Every one of them is sent
	// again with its Idempotency-Key, so a retry whose first answer was lost
	// gets that answer — the same claim — instead of deciding again
	// (default 1s).
	RetryDelay time.Duration
	// PresenceInterval is how often the worker reports the agent's
	// presence (heartbeat-presence) while it runs, so that an idle worker
	// still shows online (default 30s; negative turns it off).
	PresenceInterval time.Duration
	// Logger gets one info line per claim and per finish, and warnings
	// (default slog.Default()).
	Logger *slog.Logger
}

// Worker claims the agent's Turns with long polls and runs a Handler for
// each, at most Capacity at once, renewing each claim on its own.
type Worker struct {
	c   *Client
	cfg WorkerConfig
	h   Handler
}

// NewWorker returns a Worker that runs h for the Turns of cfg.Agent.
func (c *Client) NewWorker(cfg WorkerConfig, h Handler) (*Worker, error) {
	if cfg.Project == "" && cfg.Agent == "" {
		cfg.Project, cfg.Agent = c.project, c.agent
	}
	var errs []error
	if cfg.Project == "" || cfg.Agent == "" {
		errs = append(errs, errors.New("client: a worker needs a project and an agent (WorkerConfig or WithAgent)"))
	}
	if h == nil {
		errs = append(errs, errors.New("client: a worker needs a handler"))
	}
	if cfg.Capacity < 0 || cfg.Wait < 0 || cfg.Wait > time.Minute || cfg.RenewFraction < 0 || cfg.RenewFraction >= 1 {
		errs = append(errs, errors.New("client: capacity must be >= 0, wait 0 to 1m, renew fraction in [0, 1)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Wait == 0 {
		cfg.Wait = 30 * time.Second
	}
	if cfg.RenewFraction == 0 {
		cfg.RenewFraction = 1.0 / 3
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 30 * time.Second
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.PresenceInterval == 0 {
		cfg.PresenceInterval = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Worker{c: c, cfg: cfg, h: h}, nil
}

// Why a handler's context was cancelled: context.Cause(ctx) in a Handler.
var (
	ErrShutdown      = errors.New("client: the worker's shutdown grace ended")
	ErrClaimLost     = errors.New("client: the claim was lost")
	ErrStopRequested = errors.New("client: a stop of the Turn was requested")
)

// Run claims and runs Turns until ctx ends, then shuts down gracefully: no
// new claims; running handlers get ShutdownGrace to finish before their
// contexts are cancelled; Run returns once all have returned. It returns nil
// after a shutdown.
//
// A claim that fails for a passing reason (the network, a 5xx, a 429) is
// retried after RetryDelay, or after the service's Retry-After, for as long
// as Run runs. A claim the service refuses for good — a 4xx such as the 401
// of a revoked or expired credential, a 403 or a 404 — would be refused
// again: Run then stops claiming, shuts down as above, and returns the
// refusal, a *Error (errors.As). It also returns an error when it cannot read
// the agent's capacity.
func (w *Worker) Run(ctx context.Context) error {
	capacity := w.cfg.Capacity
	if capacity == 0 {
		a, err := w.c.GetAgent(ctx, w.cfg.Project, w.cfg.Agent)
		if err != nil {
			return fmt.Errorf("client: worker: read the agent's capacity: %w", err)
		}
		capacity = max(a.Capacity, 1)
	}
	// Handlers run under hard, which outlives ctx by the grace period.
	hard, cancelHard := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelHard(nil)
	slots := make(chan struct{}, capacity)
	var wg sync.WaitGroup
	defer func() {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		t := time.NewTimer(w.cfg.ShutdownGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			cancelHard(ErrShutdown)
			<-done
		}
	}()
	// Whatever ends the loop below ends the presence reports too, before
	// the wait for the handlers above.
	ctx, endLoop := context.WithCancel(ctx)
	defer endLoop()
	if w.cfg.PresenceInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.presence(ctx)
		}()
	}
	// One Idempotency-Key for a claim and its retries: a retry after a lost
	// answer gets the claim that answer held, not a second Turn.
	key := NewIdempotencyKey()
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		res, err := w.c.ClaimTurn(WithIdempotencyKey(ctx, key), w.cfg.Project, w.cfg.Agent, w.cfg.Wait)
		if err == nil {
			key = NewIdempotencyKey() // answered: the next claim is a new one
		}
		if err != nil || res == nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				if refusedForGood(err) {
					w.cfg.Logger.Error("turnledger worker: the service refuses to give this agent work; stopping", "err", err)
					return fmt.Errorf("client: worker: claim: %w", err)
				}
				w.cfg.Logger.Warn("turnledger worker: claim", "err", err)
				t := time.NewTimer(pause(err, w.cfg.RetryDelay))
				select {
				case <-ctx.Done():
					t.Stop()
					return nil
				case <-t.C:
				}
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			w.run(hard, res)
		}()
	}
	return nil
}

// refusedForGood reports whether a refused request would be refused again
// whatever the worker does: an answer of the service other than a 5xx, a 408
// or a 429.
func refusedForGood(err error) bool {
	var ce *Error
	return errors.As(err, &ce) && !retryable(ce.Status)
}

// run handles one claimed Turn.
func (w *Worker) run(hard context.Context, res *ClaimResult) {
	ctx, cancel := context.WithCancelCause(hard)
	defer cancel(nil)
	job := &Job{Claim: res.Claim, Turn: res.Turn, c: w.c, stop: func() { cancel(ErrStopRequested) }, delay: w.cfg.RetryDelay}
	if res.Turn.StopRequested {
		job.markStop()
	}
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		w.renew(ctx, job, cancel)
	}()
	log := w.cfg.Logger.With("turn_id", res.Turn.TurnID)
	log.Info("turnledger worker: claimed", "turn_kind", res.Turn.TurnKind, "attempt", res.Turn.Attempts, "expires_at", res.Claim.ExpiresAt)
	result, herr := w.safeHandle(ctx, job)
	cause := context.Cause(ctx)
	cancel(nil)
	<-renewDone
	switch {
	case job.suspendedForInput():
		if herr != nil {
			log.Warn("turnledger worker: the handler failed after suspending the Turn for input; the Turn waits for its input", "err", herr)
		}
		return
	case errors.Is(cause, ErrClaimLost):
		log.Warn("turnledger worker: the claim was lost; the Turn is not finished here")
		return
	case errors.Is(cause, ErrShutdown):
		// Hand the claim back at once rather than let it expire: the Turn
		// is claimable again now, in its old place, the attempt not counted.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(hard), 10*time.Second)
		defer rcancel()
		if err := retryKeyed(rctx, 0, w.cfg.RetryDelay, func(ctx context.Context) error {
			_, err := w.c.ReleaseClaim(ctx, job.claim())
			return err
		}); err != nil {
			log.Warn("turnledger worker: shutdown cancelled the handler and could not hand the claim back; it will expire", "err", err)
			return
		}
		log.Info("turnledger worker: shutdown cancelled the handler; the claim was handed back")
		return
	}
	req := FinishRequest{Outcome: result.Outcome, FinalPayload: result.FinalPayload, FinalRecordRole: result.FinalRecordRole}
	switch {
	case herr != nil && job.StopRequested():
		req = FinishRequest{Outcome: "stopped", FinalPayload: map[string]any{"error": herr.Error()}}
	case herr != nil:
		var retry *RetryError
		req = FinishRequest{Outcome: "failed", FinalPayload: map[string]any{"error": herr.Error()}, Retry: errors.As(herr, &retry)}
	case req.Outcome == "":
		req.Outcome = "succeeded"
	}
	if req.FinalRecordRole == "" {
		req.FinalRecordRole = "final"
	}
	// The finish is retried with one Idempotency-Key while its answer is
	// lost or the service unavailable, for up to 30s: a retry after a lost
	// answer gets that answer, not a fencing error for a Turn it finished.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(hard), 30*time.Second)
	defer fcancel()
	if err := retryKeyed(fctx, 0, w.cfg.RetryDelay, func(ctx context.Context) error {
		_, err := w.c.FinishTurn(ctx, job.claim(), req)
		return err
	}); err != nil {
		log.Warn("turnledger worker: finish", "outcome", req.Outcome, "err", err)
		return
	}
	log.Info("turnledger worker: finished", "outcome", req.Outcome, "retry", req.Retry)
}

// presence reports the agent's presence at once and then every
// PresenceInterval until ctx ends.
func (w *Worker) presence(ctx context.Context) {
	t := time.NewTicker(w.cfg.PresenceInterval)
	defer t.Stop()
	for {
		if _, err := w.c.HeartbeatPresence(ctx, w.cfg.Project, w.cfg.Agent); err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn("turnledger worker: presence", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// safeHandle runs the handler, turning a panic into an error.
func (w *Worker) safeHandle(ctx context.Context, job *Job) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("handler panicked: %v", v)
		}
	}()
	return w.h(ctx, job)
}

// renew renews the job's claim each time RenewFraction of its remaining
// lease has passed, until ctx ends. A refused renewal (the claim fenced,
// expired or gone) cancels the handler; a stop request too.
func (w *Worker) renew(ctx context.Context, job *Job, cancel context.CancelCauseFunc) {
	failures := 0
	var key string // one Idempotency-Key for a renewal and its retries
	for {
		left := time.Until(job.claim().ExpiresAt)
		wait := time.Duration(float64(left) * w.cfg.RenewFraction)
		if failures > 0 {
			wait = min(wait, w.cfg.RetryDelay)
		}
		t := time.NewTimer(max(wait, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if awaiting, suspended := job.inputWait(); suspended {
			return // the suspend released the claim
		} else if awaiting {
			continue // a suspend is under way: it releases the claim or fails
		}
		if failures == 0 {
			key = NewIdempotencyKey()
		}
		res, err := w.c.RenewClaim(WithIdempotencyKey(ctx, key), job.claim())
		switch {
		case err == nil:
			failures = 0
			job.mu.Lock()
			job.Claim = res.Claim
			job.mu.Unlock()
			if res.StopRequested && !job.StopRequested() {
				job.markStop()
			}
		case ctx.Err() != nil:
			return
		case refusedForGood(err) && job.suspendingForInput():
			return // the suspend released the claim
		case refusedForGood(err):
			cancel(ErrClaimLost)
			return
		default:
			failures++ // the server or the network: try again soon, until the lease runs out
			if time.Until(job.claim().ExpiresAt) <= 0 {
				cancel(ErrClaimLost)
				return
			}
		}
	}
}
