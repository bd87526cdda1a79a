package kernel

import (
	"cmp"
	"crypto/subtle"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Turn is one Turn as the events made it: the state the engine decides on and,
// unchanged, the state the projections show (they fold it with EvolveTurn
// too). Time fields are the times of the events that set them.
type Turn struct {
	ID              string
	Order           uint64 // ledger_seq of its dispatch
	Dispatch        TurnDispatched
	State           string
	Outcome         string // set when finished
	StopRequested   bool
	StopRequestedAt *time.Time
	Claim           *Claim
	Attempts        int    // claims taken so far
	TurnSeq         uint64 // last turn_seq given to a record
	FinalPayload    json.RawMessage
	FinalRecordRole *string // set when the holder finished it
	CreatedAt       time.Time
	UpdatedAt       time.Time
	FinishedAt      *time.Time
	Seq             uint64 // ledger_seq of the last event that changed it
	// NotBefore is when the Turn may be claimed next: its dispatch's
	// not_before, then the time a retry was scheduled for (nil: at once).
	NotBefore *time.Time `json:",omitempty"`
	// AwaitingInput is the question of a Turn suspended for input.
	AwaitingInput *AwaitingInput `json:",omitempty"`
	// TreeStopped: a cascading stop reached this Turn; no child may be
	// dispatched under it.
	TreeStopped bool `json:",omitempty"`
}

// Claim is a live lease on a Turn.
type Claim struct {
	ID        string
	AgentID   string
	TokenHash string
	ClaimedAt time.Time
	ExpiresAt time.Time
	LeaseS    int `json:",omitempty"` // 0: the server's default lease
}

// RootTurnID returns the id of the Turn's root: itself for a root Turn.
func (t *Turn) RootTurnID() string {
	if t.Dispatch.RootTurnID == "" {
		return t.ID
	}
	return t.Dispatch.RootTurnID
}

// FinalTurnSeq is the turn_seq of a finish's final record: the one the event
// carries, or the next after t's last record for an event that carries none.
func FinalTurnSeq(t *Turn, d *TurnFinished) uint64 {
	if d.TurnSeq != 0 {
		return d.TurnSeq
	}
	return t.TurnSeq + 1
}

// FreesWork reports whether a Turn event of type typ can make a Turn
// claimable for its target (a dispatch, a resume, an expired claim released)
// or free some of the target's capacity (a suspend, a finish, a stop): what a
// waiting claim must be woken for. Evolve's Turn cases decide it; a new
// transition that queues a Turn or ends a claim belongs here too.
func FreesWork(typ string) bool {
	switch typ {
	case EvTurnDispatched, EvTurnResumed, EvTurnSuspended, EvTurnFinished, EvTurnStopped, EvTurnClaimExpired,
		EvTurnTimedOut, EvTurnRetryScheduled, EvTurnInputProvided, EvTurnClaimReleased:
		return true
	}
	return false
}

// EvolveTurn is the Turn state machine: it folds one event of a Turn's
// aggregate into t, which is nil before the Turn's dispatch, and returns the
// Turn after it (t itself, changed in place, or a new Turn for a dispatch).
// An event of a Turn never dispatched returns nil; a repeated dispatch
// changes nothing. Like Evolve it never fails. What a Turn's change does to
// the rest of the project (queues, agents' capacity) is Evolve's.
func EvolveTurn(t *Turn, r Recorded) *Turn {
	e := r.Event
	if d, ok := e.Data.(*TurnDispatched); ok {
		if t != nil {
			return t
		}
		return &Turn{ID: e.ID, Order: r.Seq, Dispatch: *d, State: StateQueued, CreatedAt: e.At, UpdatedAt: e.At, Seq: r.Seq,
			NotBefore: d.NotBefore}
	}
	if t == nil {
		return nil
	}
	finish := func(outcome string) {
		t.State, t.Outcome, t.Claim, t.AwaitingInput = StateFinished, outcome, nil, nil
		t.FinishedAt = ptr(e.At)
	}
	switch d := e.Data.(type) {
	case *TurnClaimed:
		t.State = StateClaimed
		t.Claim = &Claim{ID: d.ClaimID, AgentID: d.AgentID, TokenHash: d.TokenHash, ClaimedAt: e.At, ExpiresAt: d.ExpiresAt, LeaseS: d.LeaseS}
		t.Attempts++
	case *TurnClaimReleased:
		t.Attempts = max(t.Attempts-1, 0)
		if d.Stopped {
			t.StopRequested = true
			finish(OutcomeStopped)
		} else {
			t.State, t.Claim = StateQueued, nil
		}
	case *TurnClaimRenewed:
		if t.Claim != nil && t.Claim.ID == d.ClaimID {
			t.Claim.ExpiresAt = d.ExpiresAt
		}
	case *TurnRecordAppended:
		t.TurnSeq = max(t.TurnSeq, d.TurnSeq)
	case *TurnSuspended:
		t.State, t.Claim, t.AwaitingInput = StateSuspended, nil, d.AwaitingInput
	case *TurnResumed:
		t.State, t.AwaitingInput = StateQueued, nil
	case *TurnInputProvided:
		t.State, t.AwaitingInput = StateQueued, nil
		t.TurnSeq = max(t.TurnSeq, d.TurnSeq)
	case *TurnFinished:
		if !IsNull(d.FinalPayload) {
			t.TurnSeq = max(t.TurnSeq, FinalTurnSeq(t, d))
			t.FinalPayload = d.FinalPayload
		}
		t.FinalRecordRole = ptr(d.FinalRecordRole)
		finish(d.Outcome)
	case *TurnStopRequested:
		t.StopRequested, t.StopRequestedAt = true, ptr(e.At)
		t.TreeStopped = t.TreeStopped || d.Cascade
	case *TurnStopped:
		t.StopRequested, t.StopRequestedAt = true, ptr(e.At)
		t.TreeStopped = t.TreeStopped || d.Cascade
		finish(OutcomeStopped)
	case *TurnClaimExpired:
		switch {
		case d.Stopped:
			t.StopRequested = true
			finish(OutcomeStopped)
		case d.Dead:
			finish(OutcomeDead)
		default:
			t.State, t.Claim = StateQueued, nil
		}
	case *TurnExpired:
		finish(OutcomeExpired)
	case *TurnTimedOut:
		t.AwaitingInput = nil
		finish(OutcomeTimedOut)
	case *TurnRetryScheduled:
		if !IsNull(d.FinalPayload) {
			t.TurnSeq = max(t.TurnSeq, d.TurnSeq)
		}
		t.State, t.Claim, t.NotBefore = StateQueued, nil, ptr(d.NotBefore)
	default:
		return t // a Turn event without a transition: nothing changes
	}
	t.UpdatedAt, t.Seq = e.At, r.Seq
	return t
}

// evolveTurn folds a Turn event into the project: the Turn by EvolveTurn,
// then what its change of state and claim does to the agent's queue and to
// the claim holder's capacity.
func (p *Project) evolveTurn(r Recorded) {
	e := r.Event
	old := p.Turn(e.ID) // a finished one unpacked: it is kept again below
	oldState, oldHolder := "", ""
	if old != nil {
		oldState, oldHolder = old.State, old.holder()
	}
	t := EvolveTurn(old, r)
	if t == nil {
		return
	}
	if old == nil {
		if t.Dispatch.DispatchKey != "" {
			p.DispatchKeys[DispatchKeyOf(t.Dispatch.RequestedBy.AgentID, t.Dispatch.DispatchKey)] = t.ID
		}
		if parent := t.Dispatch.Authority.ParentTurnID; parent != "" {
			p.children[parent] = append(p.children[parent], t.ID)
		}
	}
	switch {
	case oldState == StateQueued && t.State != StateQueued:
		p.dequeue(t)
	case oldState != StateQueued && t.State == StateQueued:
		p.enqueue(t)
	}
	p.timers.track(t)
	if h := t.holder(); h != oldHolder {
		if a := p.Agents[oldHolder]; a != nil && a.ActiveClaims > 0 {
			a.ActiveClaims--
		}
		if a := p.Agents[h]; a != nil {
			a.ActiveClaims++
		}
	}
	p.keep(t)
}

// holder returns the agent holding the Turn's claim, or "".
func (t *Turn) holder() string {
	if t.Claim == nil {
		return ""
	}
	return t.Claim.AgentID
}

func ptr[T any](v T) *T { return &v }

// Turn states. The table of transitions is in the package doc; Decide is the
// only place that enforces it.
const (
	StateQueued    = "queued"
	StateClaimed   = "claimed"
	StateSuspended = "suspended"
	StateFinished  = "finished"
)

// TurnStates lists the Turn states in their order of the state table.
func TurnStates() []string {
	return []string{StateQueued, StateClaimed, StateSuspended, StateFinished}
}

// OutcomeStopped is the outcome of a Turn that a stop request ended while no
// claim held it.
const OutcomeStopped = "stopped"

// Outcomes a claim holder may finish a Turn with.
var Outcomes = []string{"succeeded", "failed", OutcomeStopped}

// Outcomes the schedule gives a Turn (issue of scheduling): expired (never
// claimed by its claim_by), timed_out (not finished by its deadline), dead
// (out of attempts).
const (
	OutcomeExpired  = "expired"
	OutcomeTimedOut = "timed_out"
	OutcomeDead     = "dead"
)

// AllOutcomes lists every outcome a finished Turn may have, for filters.
var AllOutcomes = []string{"succeeded", "failed", OutcomeStopped, OutcomeExpired, OutcomeTimedOut, OutcomeDead}

// Retryable reports whether :retry may dispatch a new Turn from a finished
// Turn with the outcome.
func Retryable(outcome string) bool {
	switch outcome {
	case "failed", OutcomeDead, OutcomeExpired, OutcomeTimedOut, OutcomeStopped:
		return true
	}
	return false
}

// Event types of the turn aggregate. The name is written here once and never
// derived from a Go type.
const (
	EvTurnDispatched     = "turn.dispatched"
	EvTurnClaimed        = "turn.claimed"
	EvTurnClaimRenewed   = "turn.claim_renewed"
	EvTurnRecordAppended = "turn.record_appended"
	EvTurnSuspended      = "turn.suspended"
	EvTurnResumed        = "turn.resumed"
	EvTurnFinished       = "turn.finished"
	EvTurnStopRequested  = "turn.stop_requested"
	EvTurnStopped        = "turn.stopped"
	EvTurnClaimExpired   = "turn.claim_expired"
	EvTurnExpired        = "turn.expired"
	EvTurnTimedOut       = "turn.timed_out"
	EvTurnRetryScheduled = "turn.retry_scheduled"
	EvTurnInputProvided  = "turn.input_provided"
	EvTurnClaimReleased  = "turn.claim_released"
)

// turnEvents is the codec's table of the turn events: type and version, with the Go
// type of their data.
var turnEvents = map[codecKey]eventType{
	{EvTurnDispatched, 1}:     {AggTurn, func() any { return new(TurnDispatched) }},
	{EvTurnClaimed, 1}:        {AggTurn, func() any { return new(TurnClaimed) }},
	{EvTurnClaimRenewed, 1}:   {AggTurn, func() any { return new(TurnClaimRenewed) }},
	{EvTurnRecordAppended, 1}: {AggTurn, func() any { return new(TurnRecordAppended) }},
	{EvTurnSuspended, 1}:      {AggTurn, func() any { return new(TurnSuspended) }},
	{EvTurnResumed, 1}:        {AggTurn, func() any { return new(TurnResumed) }},
	{EvTurnFinished, 1}:       {AggTurn, func() any { return new(TurnFinished) }},
	{EvTurnStopRequested, 1}:  {AggTurn, func() any { return new(TurnStopRequested) }},
	{EvTurnStopped, 1}:        {AggTurn, func() any { return new(TurnStopped) }},
	{EvTurnClaimExpired, 1}:   {AggTurn, func() any { return new(TurnClaimExpired) }},
	{EvTurnExpired, 1}:        {AggTurn, func() any { return new(TurnExpired) }},
	{EvTurnTimedOut, 1}:       {AggTurn, func() any { return new(TurnTimedOut) }},
	{EvTurnRetryScheduled, 1}: {AggTurn, func() any { return new(TurnRetryScheduled) }},
	{EvTurnInputProvided, 1}:  {AggTurn, func() any { return new(TurnInputProvided) }},
	{EvTurnClaimReleased, 1}:  {AggTurn, func() any { return new(TurnClaimReleased) }},
}

// TurnRef names a Turn of a project.
type TurnRef struct {
	ProjectID string `json:"project_id"`
	TurnID    string `json:"turn_id"`
}

// Authority is how a Turn was authorised: a root request or a derivation from
// a parent claim.
type Authority struct {
	Mode         string `json:"mode"` // AuthorityRoot or AuthorityChild
	RequestID    string `json:"request_id,omitempty"`
	ParentTurnID string `json:"parent_turn_id,omitempty"`
	ParentClaim  string `json:"parent_claim_id,omitempty"`
}

// Authority modes.
const (
	AuthorityRoot  = "root_request"
	AuthorityChild = "child_derivation"
)

// TurnDispatched: a Turn was created and queued for its target agent.
type TurnDispatched struct {
	TargetAgent AgentRef        `json:"target_agent"`
	RequestedBy AgentRef        `json:"requested_by"`
	Input       json.RawMessage `json:"input"`
	TurnKind    string          `json:"turn_kind"`
	DispatchKey string          `json:"dispatch_key"`
	BodyHash    string          `json:"body_hash"`
	Authority   Authority       `json:"authority"`
	RootTurnID  string          `json:"root_turn_id"`
	Depth       int             `json:"depth"`
	Schedule
	// RetryOf is the Turn this one retries (the :retry route).
	RetryOf string `json:"retry_of,omitempty"`
	// Tags are what the requester knows the Turn by (a customer, a run, a
	// batch): at most MaxTags, each a tag name (ValidTag). Not inherited.
	Tags []string `json:"tags,omitempty"`
	// ContextID groups Turns of one conversation (A2A's contextId): 1 to
	// 200 printable characters without spaces. Kept by a :retry, not
	// inherited by children.
	ContextID string `json:"context_id,omitempty"`
}

// MaxTags bounds the tags of a Turn.
const MaxTags = 16

var tagPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// ValidTag reports whether s may be a tag: 1 to 64 letters, digits, '.',
// '_', ':' or '-'.
func ValidTag(s string) bool { return tagPattern.MatchString(s) }

// CheckContextID validates a context_id, of a dispatch or of a list filter:
// empty (none), or 1 to 200 printable characters without spaces.
func CheckContextID(id string) error {
	if id != "" && !keyPattern.MatchString(id) {
		return invalid("context_id must be 1 to 200 printable characters without spaces")
	}
	return nil
}

// checkTags validates the tags of a dispatch.
func checkTags(tags []string) error {
	if len(tags) > MaxTags {
		return invalid("tags must be at most %d, not %d", MaxTags, len(tags))
	}
	for i, t := range tags {
		if err := CheckTag("tags["+strconv.Itoa(i)+"]", t); err != nil {
			return err
		}
	}
	return nil
}

// CheckTag answers a Validation error naming field when tag is not a tag.
func CheckTag(field, tag string) error {
	if !ValidTag(tag) {
		return invalid("%s must be 1 to 64 letters, digits, '.', '_', ':' or '-'; not %q", field, tag)
	}
	return nil
}

// CheckTurnState answers a Validation error naming field when state is
// neither a Turn state nor "" (none asked for).
func CheckTurnState(field, state string) error {
	if state != "" && !slices.Contains(TurnStates(), state) {
		return invalid("%s must be one of %s; not %q", field, strings.Join(TurnStates(), ", "), state)
	}
	return nil
}

// Schedule is when and how often a Turn may run: the optional scheduling
// fields of a dispatch. The zero Schedule is the default: priority 3,
// claimable at once, no expiry, no deadline, no limit on attempts. Only what
// a dispatch asks is kept on the ledger.
type Schedule struct {
	Priority     *int       `json:"priority,omitempty"`      // 1 runs first; nil reads as DefaultPriority
	NotBefore    *time.Time `json:"not_before,omitempty"`    // not claimable before
	ClaimBy      *time.Time `json:"claim_by,omitempty"`      // expired when still never claimed then
	Deadline     *time.Time `json:"deadline,omitempty"`      // timed out when not finished then
	MaxAttempts  *int       `json:"max_attempts,omitempty"`  // claims allowed; nil: no limit
	RetryBackoff *Backoff   `json:"retry_backoff,omitempty"` // delays of retries; nil: DefaultBackoff
}

// Backoff is the delay before a retry: InitialS seconds after the first
// attempt, multiplied by Factor for each attempt after it, at most MaxS. A
// field left out (zero) takes its value from DefaultBackoff.
type Backoff struct {
	InitialS float64 `json:"initial_s"`
	Factor   float64 `json:"factor"`
	MaxS     float64 `json:"max_s"`
}

// Scheduling defaults and bounds.
const (
	MinPriority     = 1
	MaxPriority     = 5
	DefaultPriority = 3
	// MaxAttemptsLimit bounds max_attempts.
	MaxAttemptsLimit = 1000
	// maxBackoffS bounds initial_s and max_s: a day.
	maxBackoffS = 86400
)

// DefaultBackoff is the backoff of a Turn that asks for retries without one.
var DefaultBackoff = Backoff{InitialS: 1, Factor: 2, MaxS: 60}

// EffectivePriority is the priority a Turn runs at.
func (s Schedule) EffectivePriority() int {
	if s.Priority == nil {
		return DefaultPriority
	}
	return *s.Priority
}

// attempts is max_attempts, 0 for no limit.
func (s Schedule) attempts() int {
	if s.MaxAttempts == nil {
		return 0
	}
	return *s.MaxAttempts
}

// Delay is the backoff before the retry that follows the given attempt
// (1 for the first claim).
func (b Backoff) Delay(attempt int) time.Duration {
	s := b.InitialS
	for i := 1; i < attempt && s < b.MaxS; i++ {
		s *= b.Factor
	}
	s = min(s, b.MaxS)
	return time.Duration(s * float64(time.Second)).Truncate(time.Millisecond)
}

// utc returns the schedule with its times in UTC, as the ledger keeps them,
// and a backoff's left-out fields filled.
func (s Schedule) utc() Schedule {
	if b := s.RetryBackoff; b != nil {
		c := *b
		if c.InitialS == 0 {
			c.InitialS = DefaultBackoff.InitialS
		}
		if c.Factor == 0 {
			c.Factor = DefaultBackoff.Factor
		}
		if c.MaxS == 0 {
			c.MaxS = max(DefaultBackoff.MaxS, c.InitialS)
		}
		s.RetryBackoff = &c
	}
	for _, t := range []**time.Time{&s.NotBefore, &s.ClaimBy, &s.Deadline} {
		if *t != nil {
			*t = ptr((*t).UTC())
		}
	}
	return s
}

func (s Schedule) backoff() Backoff {
	if s.RetryBackoff == nil {
		return DefaultBackoff
	}
	return *s.RetryBackoff
}

// validate checks the schedule of a new dispatch at now.
func (s Schedule) validate(now time.Time) error {
	if s.Priority != nil && (*s.Priority < MinPriority || *s.Priority > MaxPriority) {
		return invalid("priority must be an integer from %d (runs first) to %d", MinPriority, MaxPriority)
	}
	if s.ClaimBy != nil && !s.ClaimBy.After(now) {
		return invalid("claim_by must be in the future")
	}
	if s.Deadline != nil && !s.Deadline.After(now) {
		return invalid("deadline must be in the future")
	}
	if s.ClaimBy != nil && s.Deadline != nil && s.ClaimBy.After(*s.Deadline) {
		return invalid("claim_by must not be after deadline")
	}
	if s.NotBefore != nil && s.ClaimBy != nil && !s.NotBefore.Before(*s.ClaimBy) {
		return invalid("not_before must be before claim_by")
	}
	if s.NotBefore != nil && s.Deadline != nil && !s.NotBefore.Before(*s.Deadline) {
		return invalid("not_before must be before deadline")
	}
	if s.MaxAttempts != nil && (*s.MaxAttempts < 1 || *s.MaxAttempts > MaxAttemptsLimit) {
		return invalid("max_attempts must be an integer from 1 to %d", MaxAttemptsLimit)
	}
	if b := s.RetryBackoff; b != nil {
		switch {
		case !(b.InitialS > 0 && b.InitialS <= maxBackoffS):
			return invalid("retry_backoff.initial_s must be more than 0 and at most %d", maxBackoffS)
		case !(b.Factor >= 1 && b.Factor <= 100):
			return invalid("retry_backoff.factor must be from 1 to 100")
		case !(b.MaxS >= b.InitialS && b.MaxS <= maxBackoffS):
			return invalid("retry_backoff.max_s must be at least initial_s and at most %d", maxBackoffS)
		}
	}
	return nil
}

// TurnClaimed: an agent took the Turn under a fenced lease. Only the claim
// token's hash is kept.
type TurnClaimed struct {
	ClaimID   string    `json:"claim_id"`
	AgentID   string    `json:"agent_id"`
	TokenHash string    `json:"token_hash"`
	ExpiresAt time.Time `json:"expires_at"`
	// LeaseS is the claim's lease when it is not the server's default (the
	// agent's claim_ttl_s, or the lease_s the claim asked): a renew extends
	// the claim by as much.
	LeaseS int `json:"lease_s,omitempty"`
}

// TurnClaimReleased: the holder handed its claim back (a worker that stops
// gracefully). The Turn goes back to its old place in the queue, and the
// attempt does not count; with a stop requested, it ends as stopped.
type TurnClaimReleased struct {
	ClaimID string `json:"claim_id"`
	Stopped bool   `json:"stopped,omitempty"`
}

// TurnClaimRenewed: the claim's lease was extended.
type TurnClaimRenewed struct {
	ClaimID   string    `json:"claim_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TurnRecordAppended: a semantic record was appended under the claim.
type TurnRecordAppended struct {
	ClaimID string          `json:"claim_id"`
	TurnSeq uint64          `json:"turn_seq"`
	Role    string          `json:"role"`
	Payload json.RawMessage `json:"payload"`
}

// TurnSuspended: the claim holder suspended the Turn; the claim is released.
type TurnSuspended struct {
	ClaimID string `json:"claim_id"`
	// AwaitingInput, when set, is the question the Turn waits on: answered
	// by :provide-input, with the input token or as the requester.
	AwaitingInput *AwaitingInput `json:"awaiting_input,omitempty"`
}

// AwaitingInput is what a Turn suspended for input asks: a prompt, an
// optional JSON Schema of the answer, an optional time by which the answer
// must come (else the Turn times out). TokenHash is the hash of the input
// token that answers it without agent credentials; it is never shown.
type AwaitingInput struct {
	Prompt    string          `json:"prompt"`
	Schema    json.RawMessage `json:"schema,omitempty"`
	InputBy   *time.Time      `json:"input_by,omitempty"`
	TokenHash string          `json:"token_hash"`
}

// TurnInputProvided: the input a suspended Turn waited for arrived. The
// input is a semantic record of the Turn (turn_seq TurnSeq, role input), and
// the Turn goes back to its old place in the queue.
type TurnInputProvided struct {
	Input   json.RawMessage `json:"input"`
	TurnSeq uint64          `json:"turn_seq"`
}

// RoleInput is the role of the semantic record an input becomes.
const RoleInput = "input"

// ActorInputToken is the actor kind of an input provided with an input
// token: whoever holds the token, not an agent of the project.
const ActorInputToken = "input_token"

// TurnResumed: a suspended Turn went back to the queue.
type TurnResumed struct {
	RequestedBy AgentRef `json:"requested_by"`
}

// TurnFinished: the claim holder finished the Turn. The final record, when
// there is a final payload, takes the next turn_seq.
type TurnFinished struct {
	ClaimID         string          `json:"claim_id"`
	Outcome         string          `json:"outcome"`
	FinalPayload    json.RawMessage `json:"final_payload"`
	FinalRecordRole string          `json:"final_record_role"`
	TurnSeq         uint64          `json:"turn_seq,omitempty"`
}

// TurnStopRequested: a stop was asked of a claimed Turn; the holder sees the
// flag and is expected to finish.
type TurnStopRequested struct {
	RequestedBy AgentRef `json:"requested_by"`
	// Cascade: the stop of a whole tree (every Turn of it stopped by its
	// own event with the same RequestID); no child may be dispatched under
	// this Turn any more.
	Cascade   bool   `json:"cascade,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// TurnStopped: a stop of an unclaimed Turn (queued or suspended) ended it.
type TurnStopped struct {
	RequestedBy AgentRef `json:"requested_by"`
	Cascade     bool     `json:"cascade,omitempty"`
	RequestID   string   `json:"request_id,omitempty"`
}

// TurnClaimExpired: an expired claim was released. The Turn goes back to the
// queue, or ends as stopped when a stop had been requested.
type TurnClaimExpired struct {
	ClaimID string `json:"claim_id"`
	Stopped bool   `json:"stopped"`
	// Dead: the claim was the Turn's last allowed attempt (max_attempts),
	// so the Turn ends with outcome dead.
	Dead bool `json:"dead,omitempty"`
}

// TurnExpired: a Turn never claimed was still queued at its claim_by; it
// ends with outcome expired.
type TurnExpired struct {
	ClaimBy time.Time `json:"claim_by"`
}

// TurnTimedOut: a Turn was not finished by its deadline; it ends with
// outcome timed_out, and a live claim dies with it.
type TurnTimedOut struct {
	Deadline time.Time `json:"deadline"`
	ClaimID  string    `json:"claim_id,omitempty"` // the claim that died with it
	// AwaitingInput: the time was the input_by of an input wait, not the
	// Turn's deadline.
	AwaitingInput bool `json:"awaiting_input,omitempty"`
}

// TurnRetryScheduled: the holder finished the Turn as failed and asked for
// a retry while attempts remained. The claim is released and the Turn goes
// back to the queue, claimable from NotBefore; the failure's final payload
// is kept as a record of the Turn (turn_seq TurnSeq, role FinalRecordRole).
type TurnRetryScheduled struct {
	ClaimID         string          `json:"claim_id"`
	NotBefore       time.Time       `json:"not_before"`
	FinalPayload    json.RawMessage `json:"final_payload,omitempty"`
	FinalRecordRole string          `json:"final_record_role,omitempty"`
	TurnSeq         uint64          `json:"turn_seq,omitempty"`
}

// Dispatch creates a Turn.
type Dispatch struct {
	Common
	TurnID      string
	RequestedBy AgentRef
	TargetAgent AgentRef
	Input       json.RawMessage
	TurnKind    string
	DispatchKey string
	Mode        string
	RequestID   string
	ParentClaim *ClaimToken
	ParentHash  string // hash of ParentClaim.Token
	BodyHash    string // hash of the request, for idempotency
	MaxDepth    int
	Schedule    Schedule
	Tags        []string
	ContextID   string
}

// Name is the command's stable name (see Command).
func (Dispatch) Name() string { return "dispatch" }

func (cmd Dispatch) decide(d decider) (*Event, error) {
	if err := d.sameProject("requested_by", cmd.RequestedBy.ProjectID); err != nil {
		return nil, err
	}
	if err := d.sameProject("target_agent", cmd.TargetAgent.ProjectID); err != nil {
		return nil, err
	}
	if !ValidName(cmd.TurnKind) {
		return nil, invalid("turn_kind must be a name of 1 to 128 characters without spaces")
	}
	if !keyPattern.MatchString(cmd.DispatchKey) {
		return nil, invalid("dispatch_key must be 1 to 200 printable characters without spaces")
	}
	if err := objectField("input", cmd.Input, MaxPayloadBytes); err != nil {
		return nil, err
	}
	if _, err := d.p.Check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	// Who may dispatch is checked before the idempotency look-up, so that a
	// repeated key never shows a Turn to a caller who could not have made it.
	if err := d.actingAs(cmd.RequestedBy); err != nil {
		return nil, err
	}
	if cmd.Mode == AuthorityRoot {
		if err := d.p.require(d.c.Caller, d.now, GrantDispatch); err != nil {
			return nil, err
		}
	}
	if id, ok := d.p.DispatchedAs(cmd.RequestedBy.AgentID, cmd.DispatchKey); ok {
		if d.p.Turn(id).Dispatch.BodyHash == cmd.BodyHash {
			return nil, nil // the same dispatch again: the same Turn
		}
		return nil, Errorf(Conflict, "dispatch_key %q was used for turn %s with a different body", cmd.DispatchKey, id)
	}
	// The schedule is checked after the look-up: a repeated dispatch whose
	// claim_by has passed since still finds its Turn.
	if err := cmd.Schedule.utc().validate(d.now); err != nil {
		return nil, err
	}
	if err := checkTags(cmd.Tags); err != nil {
		return nil, err
	}
	if err := CheckContextID(cmd.ContextID); err != nil {
		return nil, err
	}
	data := &TurnDispatched{
		TargetAgent: cmd.TargetAgent, RequestedBy: cmd.RequestedBy, Input: cmd.Input,
		TurnKind: cmd.TurnKind, DispatchKey: cmd.DispatchKey, BodyHash: cmd.BodyHash,
		RootTurnID: cmd.TurnID, Schedule: cmd.Schedule.utc(), Tags: dedupe(cmd.Tags),
		ContextID: cmd.ContextID,
	}
	switch cmd.Mode {
	case AuthorityRoot:
		if !keyPattern.MatchString(cmd.RequestID) {
			return nil, invalid("authority.request_id must be 1 to 200 printable characters without spaces")
		}
		data.Authority = Authority{Mode: AuthorityRoot, RequestID: cmd.RequestID}
	case AuthorityChild:
		if cmd.ParentClaim == nil {
			return nil, invalid("authority.parent_claim is required for child_derivation")
		}
		parent, err := d.fence(cmd.ParentClaim.TurnID, *cmd.ParentClaim, cmd.ParentHash)
		if err != nil {
			return nil, err
		}
		if cmd.ParentClaim.AgentID != cmd.RequestedBy.AgentID {
			return nil, Errorf(Forbidden, "a child Turn is requested by the holder of its parent claim (%s)", cmd.ParentClaim.AgentID)
		}
		if parent.TreeStopped {
			return nil, Errorf(Conflict, "turn %s was stopped with its whole tree: no child may be dispatched under it", parent.ID)
		}
		data.Depth = parent.Dispatch.Depth + 1
		if data.Depth > cmd.MaxDepth {
			return nil, Errorf(Invariant, "a child of turn %s would be at depth %d; the bound is %d", parent.ID, data.Depth, cmd.MaxDepth)
		}
		data.RootTurnID = parent.Dispatch.RootTurnID
		data.Authority = Authority{Mode: AuthorityChild, ParentTurnID: parent.ID, ParentClaim: parent.Claim.ID}
	default:
		return nil, invalid("authority.mode must be %q or %q", AuthorityRoot, AuthorityChild)
	}
	if err := d.admits(cmd.TargetAgent.AgentID); err != nil {
		return nil, err
	}
	return d.event(EvTurnDispatched, AggTurn, cmd.TurnID, data), nil
}

// admits checks that the agent may be given a new Turn.
func (d decider) admits(agentID string) error {
	target, err := d.agent(agentID)
	if err != nil {
		return err
	}
	switch {
	case !target.Spec.Enabled:
		return Errorf(Invariant, "agent %s is disabled", agentID)
	case !target.Spec.AcceptsWork:
		return Errorf(Invariant, "agent %s does not accept work", agentID)
	case target.Drained:
		return Errorf(Invariant, "agent %s is drained and admits no new Turns", agentID)
	}
	return nil
}

// DispatchHash fingerprints what a dispatch asks for, so that a repeated
// dispatch_key can be told apart: the same request, or a different one.
// meta and trace are context, not part of the request.
func DispatchHash(cmd Dispatch) string {
	parent := ""
	if cmd.ParentClaim != nil {
		parent = cmd.ParentClaim.TurnID + "/" + cmd.ParentClaim.AgentID
	}
	parts := []any{
		cmd.RequestedBy, cmd.TargetAgent, json.RawMessage(canonical(cmd.Input)), cmd.TurnKind,
		cmd.Mode, cmd.RequestID, parent,
	}
	if cmd.Schedule != (Schedule{}) {
		// Only when given, so that a dispatch without one hashes as before.
		parts = append(parts, cmd.Schedule.utc())
	}
	if len(cmd.Tags) > 0 {
		parts = append(parts, map[string]any{"tags": dedupe(cmd.Tags)})
	}
	if cmd.ContextID != "" {
		parts = append(parts, map[string]any{"context_id": cmd.ContextID})
	}
	b, _ := json.Marshal(parts)
	return HashSecret(string(b))
}

// canonical re-encodes JSON so that equal values give equal bytes (object
// keys sorted, white space dropped, numbers kept as written).
func canonical(raw json.RawMessage) []byte {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// DispatchKeyOf is the key of a dispatch in Project.DispatchKeys: dispatch
// keys are scoped to their requester, so two requesters never collide on one.
func DispatchKeyOf(requester, dispatchKey string) string { return requester + "\x00" + dispatchKey }

// ClaimNext claims the agent's oldest queued Turn, if its capacity allows.
type ClaimNext struct {
	Common
	AgentID   string
	Agent     *AgentRef
	ClaimID   string
	TokenHash string
	ExpiresAt time.Time // at the server's default lease
	// LeaseS asks a lease of its own (0: the agent's claim_ttl_s, or the
	// server's default); at most the agent's claim_ttl_s when it has one.
	LeaseS int
}

// MaxClaimTTLS bounds an agent's claim_ttl_s and a claim's lease_s: an hour.
const MaxClaimTTLS = 3600

// Name is the command's stable name (see Command).
func (ClaimNext) Name() string { return "claim" }

func (cmd ClaimNext) decide(d decider) (*Event, error) {
	if _, err := d.p.Check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	a, err := d.agent(cmd.AgentID)
	if err != nil {
		return nil, err
	}
	if err := d.bodyAgent(cmd.Agent, cmd.AgentID); err != nil {
		return nil, err
	}
	if !d.c.Caller.Admin && d.c.Caller.AgentID != cmd.AgentID {
		return nil, Errorf(Forbidden, "agent %s may not claim for agent %s", d.c.Caller.AgentID, cmd.AgentID)
	}
	if max := cmp.Or(a.Spec.ClaimTTLS, MaxClaimTTLS); cmd.LeaseS < 0 || cmd.LeaseS > max {
		return nil, invalid("lease_s must be from 1 to %d seconds (the agent's claim_ttl_s, or the most a lease may be)", max)
	}
	if !a.Spec.Enabled || a.Drained || a.ActiveClaims >= a.Spec.Capacity {
		return nil, nil
	}
	t := d.p.NextQueued(cmd.AgentID, d.now)
	if t == nil {
		return nil, nil
	}
	data := &TurnClaimed{ClaimID: cmd.ClaimID, AgentID: cmd.AgentID, TokenHash: cmd.TokenHash, ExpiresAt: cmd.ExpiresAt.UTC()}
	if lease := a.Spec.ClaimTTLS; lease > 0 || cmd.LeaseS > 0 {
		if cmd.LeaseS > 0 {
			lease = cmd.LeaseS
		}
		data.LeaseS, data.ExpiresAt = lease, leaseEnd(d.now, lease)
	}
	return d.event(EvTurnClaimed, AggTurn, t.ID, data), nil
}

// Renew extends a live claim to ExpiresAt.
type Renew struct {
	Common
	Claim     ClaimToken
	TokenHash string
	ExpiresAt time.Time
}

// Name is the command's stable name (see Command).
func (Renew) Name() string { return "renew" }

func (cmd Renew) decide(d decider) (*Event, error) {
	t, err := d.fence(cmd.Claim.TurnID, cmd.Claim, cmd.TokenHash)
	if err != nil {
		return nil, err
	}
	expires := cmd.ExpiresAt.UTC()
	if t.Claim.LeaseS > 0 {
		expires = leaseEnd(d.now, t.Claim.LeaseS)
	}
	return d.event(EvTurnClaimRenewed, AggTurn, t.ID, &TurnClaimRenewed{ClaimID: t.Claim.ID, ExpiresAt: expires}), nil
}

// leaseEnd is when a lease of s seconds taken at now ends (to the
// millisecond, as the engine truncates the default one).
func leaseEnd(now time.Time, s int) time.Time {
	return now.UTC().Add(time.Duration(s) * time.Second).Truncate(time.Millisecond)
}

// ReleaseClaim hands a live claim back (a worker that stops gracefully):
// the Turn goes back to its old place in the queue and the attempt does not
// count; a Turn whose stop was requested ends as stopped instead.
type ReleaseClaim struct {
	Common
	Claim     ClaimToken
	TokenHash string
}

// Name is the command's stable name (see Command).
func (ReleaseClaim) Name() string { return "release_claim" }

func (cmd ReleaseClaim) decide(d decider) (*Event, error) {
	t, err := d.fence(cmd.Claim.TurnID, cmd.Claim, cmd.TokenHash)
	if err != nil {
		return nil, err
	}
	return d.event(EvTurnClaimReleased, AggTurn, t.ID, &TurnClaimReleased{ClaimID: t.Claim.ID, Stopped: t.StopRequested}), nil
}

// AppendRecord appends a semantic record under a live claim.
type AppendRecord struct {
	Common
	TurnID    string
	Claim     ClaimToken
	TokenHash string
	Role      string
	Payload   json.RawMessage
}

// Name is the command's stable name (see Command).
func (AppendRecord) Name() string { return "append_record" }

func (cmd AppendRecord) decide(d decider) (*Event, error) {
	t, err := d.fence(cmd.TurnID, cmd.Claim, cmd.TokenHash)
	if err != nil {
		return nil, err
	}
	if !ValidName(cmd.Role) {
		return nil, invalid("role must be a name of 1 to 128 characters without spaces")
	}
	if err := objectField("payload", cmd.Payload, MaxPayloadBytes); err != nil {
		return nil, err
	}
	return d.event(EvTurnRecordAppended, AggTurn, t.ID, &TurnRecordAppended{
		ClaimID: t.Claim.ID, TurnSeq: t.TurnSeq + 1, Role: cmd.Role, Payload: cmd.Payload,
	}), nil
}

// Suspend suspends a claimed Turn and releases its claim.
type Suspend struct {
	Common
	TurnID    string
	Claim     ClaimToken
	TokenHash string
	// AwaitingInput suspends the Turn for input (its TokenHash filled by
	// the engine); nil suspends it as before.
	AwaitingInput *AwaitingInput
}

// Name is the command's stable name (see Command).
func (Suspend) Name() string { return "suspend" }

func (cmd Suspend) decide(d decider) (*Event, error) {
	t, err := d.fence(cmd.TurnID, cmd.Claim, cmd.TokenHash)
	if err != nil {
		return nil, err
	}
	if t.StopRequested {
		return nil, Errorf(Conflict, "a stop was requested for turn %s: finish it instead of suspending it", t.ID)
	}
	data := &TurnSuspended{ClaimID: t.Claim.ID}
	if w := cmd.AwaitingInput; w != nil {
		if err := textField("awaiting_input.prompt", w.Prompt, MaxPromptLen, true); err != nil {
			return nil, err
		}
		if !IsNull(w.Schema) {
			if err := objectField("awaiting_input.schema", w.Schema, MaxPayloadBytes); err != nil {
				return nil, err
			}
		}
		if w.InputBy != nil && !w.InputBy.After(d.now) {
			return nil, invalid("awaiting_input.input_by must be in the future")
		}
		if w.TokenHash == "" {
			return nil, Errorf(Internal, "an input wait without its token")
		}
		c := *w
		if IsNull(c.Schema) {
			c.Schema = nil
		}
		if c.InputBy != nil {
			c.InputBy = ptr(c.InputBy.UTC())
		}
		data.AwaitingInput = &c
	}
	return d.event(EvTurnSuspended, AggTurn, t.ID, data), nil
}

// MaxPromptLen bounds the prompt of an input wait.
const MaxPromptLen = 4096

// ProvideInput answers a Turn suspended for input: with the input token
// (TokenHash, the caller being nobody) or as the admin, the Turn's requester
// or an agent with the management grant. The input becomes a semantic record
// and the Turn goes back to its old place in the queue for the same target.
// A Turn not awaiting input (an input already given, say) is a
// ConflictError; a token that is not the Turn's is Unauthorized.
type ProvideInput struct {
	Common
	TurnID    string
	Input     json.RawMessage
	TokenHash string
}

// Name is the command's stable name (see Command).
func (ProvideInput) Name() string { return "provide_input" }

func (cmd ProvideInput) decide(d decider) (*Event, error) {
	if err := objectField("input", cmd.Input, MaxPayloadBytes); err != nil {
		return nil, err
	}
	var t *Turn
	var err error
	if cmd.TokenHash != "" {
		if t, err = d.turn(cmd.TurnID); err != nil {
			return nil, err
		}
		w := t.AwaitingInput
		if t.State != StateSuspended || w == nil {
			return nil, Errorf(Conflict, "turn %s is not awaiting input (state %s): an input token works once", t.ID, t.State)
		}
		if subtle.ConstantTimeCompare([]byte(w.TokenHash), []byte(cmd.TokenHash)) != 1 {
			return nil, Errorf(Unauthorized, "invalid input token for turn %s", t.ID)
		}
	} else {
		if t, err = d.turn(cmd.TurnID); err != nil {
			return nil, err
		}
		a, err := d.p.Check(d.c.Caller, d.now)
		if err != nil {
			return nil, err
		}
		if id := d.c.Caller.AgentID; a != nil && !a.Has(GrantManage) && id != t.Dispatch.RequestedBy.AgentID {
			return nil, Errorf(Forbidden, "agent %s may not provide the input of turn %s: its requester, the %s grant or its input token may", id, t.ID, GrantManage)
		}
		if t.State != StateSuspended || t.AwaitingInput == nil {
			return nil, Errorf(Conflict, "turn %s is not awaiting input (state %s)", t.ID, t.State)
		}
	}
	ev := d.event(EvTurnInputProvided, AggTurn, t.ID, &TurnInputProvided{Input: cmd.Input, TurnSeq: t.TurnSeq + 1})
	if cmd.TokenHash != "" {
		ev.Actor = Actor{Kind: ActorInputToken}
	}
	return ev, nil
}

// Finish finishes a claimed Turn.
type Finish struct {
	Common
	TurnID          string
	Claim           ClaimToken
	TokenHash       string
	Outcome         string
	FinalPayload    json.RawMessage
	FinalRecordRole string
	// Retry asks, with outcome failed, for another attempt: the Turn goes
	// back to the queue after its backoff while attempts remain, else it
	// ends as dead.
	Retry bool
}

// Name is the command's stable name (see Command).
func (Finish) Name() string { return "finish" }

func (cmd Finish) decide(d decider) (*Event, error) {
	t, err := d.fence(cmd.TurnID, cmd.Claim, cmd.TokenHash)
	if err != nil {
		return nil, err
	}
	known := false
	for _, o := range Outcomes {
		known = known || o == cmd.Outcome
	}
	if !known {
		return nil, invalid("outcome must be one of %v", Outcomes)
	}
	if cmd.Retry && cmd.Outcome != "failed" {
		return nil, invalid("retry is only for outcome failed")
	}
	data := &TurnFinished{ClaimID: t.Claim.ID, Outcome: cmd.Outcome}
	if !IsNull(cmd.FinalPayload) {
		if err := objectField("final_payload", cmd.FinalPayload, MaxPayloadBytes); err != nil {
			return nil, err
		}
		if !ValidName(cmd.FinalRecordRole) {
			return nil, invalid("final_record_role must be a name of 1 to 128 characters without spaces when final_payload is given")
		}
		data.FinalPayload, data.FinalRecordRole, data.TurnSeq = cmd.FinalPayload, cmd.FinalRecordRole, t.TurnSeq+1
	} else if cmd.FinalRecordRole != "" && !ValidName(cmd.FinalRecordRole) {
		return nil, invalid("final_record_role must be a name of 1 to 128 characters without spaces")
	}
	if cmd.Retry {
		s := t.Dispatch.Schedule
		if max := s.attempts(); max > 0 && t.Attempts >= max {
			data.Outcome = OutcomeDead
			return d.event(EvTurnFinished, AggTurn, t.ID, data), nil
		}
		notBefore := d.now.Add(s.backoff().Delay(t.Attempts))
		return d.event(EvTurnRetryScheduled, AggTurn, t.ID, &TurnRetryScheduled{
			ClaimID: t.Claim.ID, NotBefore: notBefore, FinalPayload: data.FinalPayload,
			FinalRecordRole: data.FinalRecordRole, TurnSeq: data.TurnSeq,
		}), nil
	}
	return d.event(EvTurnFinished, AggTurn, t.ID, data), nil
}

// Stop requests a stop of a Turn.
type Stop struct {
	Common
	TurnID      string
	RequestedBy AgentRef
	// Cascade stops the Turn and every descendant not finished, each by its
	// own event carrying RequestID (drawn by the engine), all or none.
	Cascade   bool
	RequestID string
}

// MaxCascade bounds the Turns one cascading stop changes.
const MaxCascade = 1000

// Name is the command's stable name (see Command).
func (Stop) Name() string { return "stop" }

func (cmd Stop) decide(d decider) (*Event, error) {
	t, err := d.managed(cmd.TurnID, cmd.RequestedBy)
	if err != nil {
		return nil, err
	}
	if t.State == StateFinished {
		return nil, Errorf(Conflict, "turn %s is already finished", t.ID)
	}
	if t.State == StateClaimed && d.now.Before(t.Claim.ExpiresAt) && t.StopRequested {
		return nil, nil
	}
	return d.stopOne(t, cmd.RequestedBy, false, ""), nil
}

// stopOne is the event that stops t: a stop request while a live claim
// holds it (its holder sees it), else the stop itself.
func (d decider) stopOne(t *Turn, by AgentRef, cascade bool, requestID string) *Event {
	if t.State == StateClaimed && d.now.Before(t.Claim.ExpiresAt) {
		return d.event(EvTurnStopRequested, AggTurn, t.ID, &TurnStopRequested{RequestedBy: by, Cascade: cascade, RequestID: requestID})
	}
	// queued, suspended, or held by an expired claim: nobody works on it
	return d.event(EvTurnStopped, AggTurn, t.ID, &TurnStopped{RequestedBy: by, Cascade: cascade, RequestID: requestID})
}

// decideAll decides a cascading stop: one event for the Turn and one for
// each descendant not finished, in breadth-first order, all or none. A tree
// with more than MaxCascade of them is refused with its size.
func (cmd Stop) decideAll(d decider) ([]Event, error) {
	if !cmd.Cascade {
		ev, err := cmd.decide(d)
		if err != nil || ev == nil {
			return nil, err
		}
		return []Event{*ev}, nil
	}
	root, err := d.managed(cmd.TurnID, cmd.RequestedBy)
	if err != nil {
		return nil, err
	}
	if root.State == StateFinished {
		return nil, Errorf(Conflict, "turn %s is already finished", root.ID)
	}
	if !keyPattern.MatchString(cmd.RequestID) {
		return nil, Errorf(Internal, "a cascading stop without its request id")
	}
	var live []*Turn
	queue := []string{root.ID}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		t := d.p.Turn(id)
		if t == nil {
			continue
		}
		if t.State != StateFinished {
			live = append(live, t)
			if len(live) > MaxCascade {
				n := len(live) + len(queue)
				return nil, Errorf(Conflict, "the tree of turn %s has more than %d Turns not finished (%d found so far): stop its subtrees one by one", root.ID, MaxCascade, n)
			}
		}
		queue = append(queue, d.p.children[id]...)
	}
	events := make([]Event, 0, len(live))
	for _, t := range live {
		events = append(events, *d.stopOne(t, cmd.RequestedBy, true, cmd.RequestID))
	}
	return events, nil
}

// Resume returns a suspended Turn to its agent's queue.
type Resume struct {
	Common
	TurnID      string
	RequestedBy AgentRef
}

// Name is the command's stable name (see Command).
func (Resume) Name() string { return "resume" }

func (cmd Resume) decide(d decider) (*Event, error) {
	t, err := d.managed(cmd.TurnID, cmd.RequestedBy)
	if err != nil {
		return nil, err
	}
	if t.State != StateSuspended {
		return nil, Errorf(Conflict, "turn %s is %s; only a suspended Turn can be resumed", t.ID, t.State)
	}
	return d.event(EvTurnResumed, AggTurn, t.ID, &TurnResumed{RequestedBy: cmd.RequestedBy}), nil
}

// ExpireClaim releases the Turn's claim if it has expired at the time of
// the decision.
type ExpireClaim struct {
	Common
	TurnID string
}

// Name is the command's stable name (see Command).
func (ExpireClaim) Name() string { return "expire_claim" }

func (cmd ExpireClaim) decide(d decider) (*Event, error) {
	if _, err := d.p.Check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	t, err := d.turn(cmd.TurnID)
	if err != nil {
		return nil, err
	}
	if t.State != StateClaimed || t.Claim == nil || d.now.Before(t.Claim.ExpiresAt) {
		return nil, nil
	}
	return d.claimExpired(t), nil
}

// claimExpired releases t's expired claim: the Turn ends as stopped when a
// stop was requested, as dead when the claim was its last allowed attempt,
// and goes back to the queue otherwise.
func (d decider) claimExpired(t *Turn) *Event {
	max := t.Dispatch.attempts()
	return d.event(EvTurnClaimExpired, AggTurn, t.ID, &TurnClaimExpired{ClaimID: t.Claim.ID, Stopped: t.StopRequested,
		Dead: !t.StopRequested && max > 0 && t.Attempts >= max})
}

// ExpireDue does what is due to a Turn at the time of the decision, as the
// reaper: a Turn past its deadline times out (and a live claim dies with
// it); an expired claim is released (see ExpireClaim); a Turn never claimed
// and past its claim_by expires; a Turn waiting for input past its input_by
// times out. Nothing due, nothing happens.
type ExpireDue struct {
	Common
	TurnID string
}

// Name is the command's stable name (see Command).
func (ExpireDue) Name() string { return "expire_due" }

func (cmd ExpireDue) decide(d decider) (*Event, error) {
	if _, err := d.p.Check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	t, err := d.turn(cmd.TurnID)
	if err != nil {
		return nil, err
	}
	s := t.Dispatch.Schedule
	switch {
	case t.State == StateFinished:
		return nil, nil
	case s.Deadline != nil && !d.now.Before(*s.Deadline):
		data := &TurnTimedOut{Deadline: *s.Deadline}
		if t.Claim != nil {
			data.ClaimID = t.Claim.ID
		}
		return d.event(EvTurnTimedOut, AggTurn, t.ID, data), nil
	case t.State == StateClaimed && t.Claim != nil && !d.now.Before(t.Claim.ExpiresAt):
		return d.claimExpired(t), nil
	case t.State == StateQueued && t.Attempts == 0 && s.ClaimBy != nil && !d.now.Before(*s.ClaimBy):
		return d.event(EvTurnExpired, AggTurn, t.ID, &TurnExpired{ClaimBy: *s.ClaimBy}), nil
	case t.State == StateSuspended && t.AwaitingInput != nil && t.AwaitingInput.InputBy != nil && !d.now.Before(*t.AwaitingInput.InputBy):
		return d.event(EvTurnTimedOut, AggTurn, t.ID, &TurnTimedOut{Deadline: *t.AwaitingInput.InputBy, AwaitingInput: true}), nil
	}
	return nil, nil
}

// Retry dispatches a new Turn from a finished one whose outcome is failed,
// dead, expired, timed_out or stopped: the same target, kind, input,
// priority, attempts and backoff, and lineage, with retry_of the old Turn.
// A claim_by or deadline keeps its distance from the dispatch; a
// not_before is not repeated. The engine reads the old Turn's dispatch
// (Original, at OriginalAt) from the ledger: a finished Turn's write model
// keeps neither its input nor its schedule. A Turn is retried once: its
// retry's dispatch_key is "retry:<old turn id>" under the old requester, so
// a second :retry finds the first retry (ConflictError).
type Retry struct {
	Common
	TurnID      string
	NewTurnID   string
	RequestedBy AgentRef
	Original    *TurnDispatched
	OriginalAt  time.Time
}

// Name is the command's stable name (see Command).
func (Retry) Name() string { return "retry" }

// RetryKey is the dispatch_key of the retry of the Turn.
func RetryKey(turnID string) string { return "retry:" + turnID }

func (cmd Retry) decide(d decider) (*Event, error) {
	t, err := d.turn(cmd.TurnID)
	if err != nil {
		return nil, err
	}
	a, err := d.p.Check(d.c.Caller, d.now)
	if err != nil {
		return nil, err
	}
	if err := d.actingAs(cmd.RequestedBy); err != nil {
		return nil, err
	}
	if id := d.c.Caller.AgentID; a != nil && !a.Has(GrantManage) && id != t.Dispatch.RequestedBy.AgentID {
		return nil, Errorf(Forbidden, "agent %s may not retry turn %s: only its requester or the %s grant may", id, t.ID, GrantManage)
	}
	return d.retry(t, cmd.NewTurnID, cmd.Original, cmd.OriginalAt)
}

// CanRetry reports whether :retry would dispatch a new Turn from the Turn
// now (whoever asks): finished with a retryable outcome, not retried yet,
// its target admitting work.
func CanRetry(p *Project, turnID string) bool {
	t := p.Turn(turnID)
	if t == nil || t.State != StateFinished || !Retryable(t.Outcome) {
		return false
	}
	if _, done := p.DispatchedAs(t.Dispatch.RequestedBy.AgentID, RetryKey(t.ID)); done {
		return false
	}
	a := p.Agents[t.Dispatch.TargetAgent.AgentID]
	return a != nil && a.Admitting()
}

// retry decides the dispatch of the retry of t (Retry).
func (d decider) retry(t *Turn, newTurnID string, o *TurnDispatched, originalAt time.Time) (*Event, error) {
	if t.State != StateFinished {
		return nil, Errorf(Conflict, "turn %s is %s: only a finished Turn can be retried", t.ID, t.State)
	}
	if !Retryable(t.Outcome) {
		return nil, Errorf(Conflict, "turn %s finished with outcome %s: only outcomes failed, dead, expired, timed_out and stopped can be retried", t.ID, t.Outcome)
	}
	key := RetryKey(t.ID)
	if id, ok := d.p.DispatchedAs(t.Dispatch.RequestedBy.AgentID, key); ok {
		return nil, Errorf(Conflict, "turn %s was already retried as turn %s; retry that one", t.ID, id)
	}
	if o == nil {
		return nil, Errorf(Internal, "the dispatch of turn %s is missing", t.ID)
	}
	if err := d.admits(o.TargetAgent.AgentID); err != nil {
		return nil, err
	}
	s := o.Schedule
	s.NotBefore = nil
	for _, at := range []**time.Time{&s.ClaimBy, &s.Deadline} {
		if *at != nil {
			*at = ptr(d.now.Add((*at).Sub(originalAt)))
		}
	}
	data := *o
	data.DispatchKey, data.Schedule, data.RetryOf = key, s.utc(), t.ID
	if data.RootTurnID == t.ID {
		data.RootTurnID = newTurnID // a root Turn's retry is a root of its own
	}
	data.BodyHash = HashSecret(t.ID + "\x00" + key)
	return d.event(EvTurnDispatched, AggTurn, newTurnID, &data), nil
}

// MaxBulk bounds the Turns one bulk action changes.
const MaxBulk = 1000

// BulkStop stops the listed Turns (chosen by the caller's filter, oldest
// first), each by its own event carrying RequestID, all or none: the admin
// or an agent with the management grant. A Turn finished meanwhile, or
// unknown, or whose holder was asked to stop already, is passed over.
type BulkStop struct {
	Common
	TurnIDs     []string
	RequestedBy AgentRef
	RequestID   string
}

// Name is the command's stable name (see Command).
func (BulkStop) Name() string { return "bulk_stop" }

func (cmd BulkStop) decide(decider) (*Event, error) {
	return nil, Errorf(Internal, "a bulk stop decides all its events at once")
}

func (cmd BulkStop) decideAll(d decider) ([]Event, error) {
	if err := d.bulk(cmd.RequestedBy, len(cmd.TurnIDs)); err != nil {
		return nil, err
	}
	var events []Event
	for _, id := range cmd.TurnIDs {
		t := d.p.Turn(id)
		if t == nil || t.State == StateFinished || t.StopRequested && t.Claim != nil && d.now.Before(t.Claim.ExpiresAt) {
			continue // finished, or its holder was asked already
		}
		events = append(events, *d.stopOne(t, cmd.RequestedBy, false, cmd.RequestID))
	}
	return events, nil
}

// bulk checks who may run a bulk action of n Turns.
func (d decider) bulk(by AgentRef, n int) error {
	a, err := d.p.Check(d.c.Caller, d.now)
	if err != nil {
		return err
	}
	if a != nil && !a.Has(GrantManage) {
		return Errorf(Forbidden, "bulk actions need the %s grant", GrantManage)
	}
	if err := d.actingAs(by); err != nil {
		return err
	}
	if n > MaxBulk {
		return invalid("a bulk action takes at most %d Turns, not %d", MaxBulk, n)
	}
	return nil
}

// BulkRetry retries the listed Turns (RetryItems: each finished Turn with
// the id of its retry and its dispatch as the ledger has it), each by its
// own dispatch, all or none: the admin or an agent with the management
// grant. A Turn :retry would not accept now is passed over.
type BulkRetry struct {
	Common
	Items       []RetryItem
	RequestedBy AgentRef
}

// RetryItem is one Turn of a BulkRetry.
type RetryItem struct {
	TurnID     string
	NewTurnID  string
	Original   *TurnDispatched
	OriginalAt time.Time
}

// Name is the command's stable name (see Command).
func (BulkRetry) Name() string { return "bulk_retry" }

func (cmd BulkRetry) decide(decider) (*Event, error) {
	return nil, Errorf(Internal, "a bulk retry decides all its events at once")
}

func (cmd BulkRetry) decideAll(d decider) ([]Event, error) {
	if err := d.bulk(cmd.RequestedBy, len(cmd.Items)); err != nil {
		return nil, err
	}
	var events []Event
	for _, it := range cmd.Items {
		t := d.p.Turn(it.TurnID)
		if t == nil || !CanRetry(d.p, t.ID) {
			continue
		}
		ev, err := d.retry(t, it.NewTurnID, it.Original, it.OriginalAt)
		if err != nil {
			return nil, err
		}
		events = append(events, *ev)
	}
	return events, nil
}

// ReconcileExpired is claims:reconcile-expired as far as idempotency
// keys go: it is not decided itself (each release is an ExpireClaim,
// carrying the reconcile's key), but its key is remembered under its
// name, so a retry answers the Turns the first request released.
type ReconcileExpired struct{ Common }

// Name is the command's stable name (see Command).
func (ReconcileExpired) Name() string { return "reconcile_expired" }

func (ReconcileExpired) decide(decider) (*Event, error) {
	return nil, Errorf(Internal, "claims:reconcile-expired is decided one ExpireClaim at a time")
}

// fence checks a claim token against the Turn's live claim. A stale, expired,
// foreign or forged token is a FencingError.
func (d decider) fence(turnID string, tok ClaimToken, hash string) (*Turn, error) {
	if _, err := d.p.Check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	if err := d.sameProject("claim", tok.ProjectID); err != nil {
		return nil, err
	}
	if tok.TurnID != turnID {
		return nil, Errorf(Fencing, "the claim token is for turn %s, not %s", tok.TurnID, turnID)
	}
	t, err := d.turn(turnID)
	if err != nil {
		return nil, err
	}
	cl := t.Claim
	if cl == nil || t.State != StateClaimed {
		switch t.Outcome {
		case OutcomeTimedOut, OutcomeDead, OutcomeExpired:
			return nil, Errorf(Fencing, "turn %s has no live claim (state %s, outcome %s)", turnID, t.State, t.Outcome)
		}
		return nil, Errorf(Fencing, "turn %s has no live claim (state %s)", turnID, t.State)
	}
	if dl := t.Dispatch.Deadline; dl != nil && !d.now.Before(*dl) {
		return nil, Errorf(Fencing, "turn %s passed its deadline at %s: its claim died with it (outcome timed_out)", turnID, dl.Format(time.RFC3339))
	}
	if cl.AgentID != tok.AgentID || subtle.ConstantTimeCompare([]byte(cl.TokenHash), []byte(hash)) != 1 {
		return nil, Errorf(Fencing, "the claim token does not hold the current claim of turn %s", turnID)
	}
	if !d.now.Before(cl.ExpiresAt) {
		return nil, Errorf(Fencing, "the claim of turn %s expired at %s", turnID, cl.ExpiresAt.Format(time.RFC3339))
	}
	if !d.c.Caller.Admin && d.c.Caller.AgentID != cl.AgentID {
		return nil, Errorf(Fencing, "the claim of turn %s is held by agent %s, not %s", turnID, cl.AgentID, d.c.Caller.AgentID)
	}
	return t, nil
}

// managed finds the Turn a management command (stop, resume) acts on and
// applies its write guard: the admin, a holder of the management grant, and
// the Turn's requester and target agent may manage it, each as itself.
func (d decider) managed(turnID string, by AgentRef) (*Turn, error) {
	t, err := d.turn(turnID)
	if err != nil {
		return nil, err
	}
	a, err := d.p.Check(d.c.Caller, d.now)
	if err != nil {
		return nil, err
	}
	if id := d.c.Caller.AgentID; a != nil && !a.Has(GrantManage) && !involved(t, id) {
		return nil, Errorf(Forbidden, "agent %s may not manage turn %s", id, t.ID)
	}
	if err := d.actingAs(by); err != nil {
		return nil, err
	}
	return t, nil
}

// dedupe returns tags without repeats, in their first order (nil for none).
func dedupe(tags []string) []string {
	if len(tags) == 0 {
		return nil
	}
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
