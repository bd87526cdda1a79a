package engine

import (
	"github.com/turnledger/turnledger/kernel"

	"context"
	"strings"
	"time"
)

// The operations below wrap commands that need fresh ids, secrets or
// expiries, which the engine draws from its injected random source and clock
// before deciding. Secrets are returned to the caller once; only their hashes
// reach Decide and the ledger.

// DispatchResult says which Turn a dispatch created or found again.
type DispatchResult struct {
	TurnID  string
	Seq     uint64
	Created bool
	// Turn is the Turn as the dispatch left it (AsOf), nil for a dispatch
	// answered again.
	Turn *kernel.Turn
}

// Dispatch creates a Turn, or returns the Turn an earlier dispatch with the
// same dispatch_key and body created. cmd.TurnID, BodyHash, ParentHash and
// MaxDepth are filled in here.
func (e *Engine) Dispatch(ctx context.Context, project string, cmd kernel.Dispatch) (DispatchResult, error) {
	id, err := e.newTurnID()
	if err != nil {
		return DispatchResult{}, err
	}
	cmd.TurnID, cmd.MaxDepth = id, e.cfg.MaxDepth
	if cmd.ParentClaim != nil {
		cmd.ParentHash = kernel.HashSecret(cmd.ParentClaim.Token)
	}
	cmd.BodyHash = kernel.DispatchHash(cmd)
	var res DispatchResult
	err = e.with(ctx, project, false, func(p *kernel.Project) error {
		seq, _, a, err := e.decideAppend(ctx, p, cmd)
		if err != nil {
			return err
		}
		if a != nil {
			res = DispatchResult{TurnID: a.ID, Seq: a.Seq, Created: true}
			return nil
		}
		turnID, _ := p.DispatchedAs(cmd.RequestedBy.AgentID, cmd.DispatchKey)
		res = DispatchResult{TurnID: turnID, Seq: seq}
		res.Created = res.TurnID == id
		if res.Created {
			res.Turn = AsOf(p.Turns[id], seq)
		}
		return nil
	})
	return res, err
}

// Retry dispatches a new Turn from a finished one (kernel.Retry). The old
// Turn's input and schedule come from its dispatch event on the ledger: the
// write model of a finished Turn keeps neither. A retry with the same
// idempotency key answers the Turn the first one dispatched.
func (e *Engine) Retry(ctx context.Context, project string, cmd kernel.Retry) (DispatchResult, error) {
	id, err := e.newTurnID()
	if err != nil {
		return DispatchResult{}, err
	}
	cmd.NewTurnID = id
	var res DispatchResult
	err = e.with(ctx, project, false, func(p *kernel.Project) error {
		if t := p.Turn(cmd.TurnID); t != nil && t.State == kernel.StateFinished {
			r, err := e.ledger.Event(ctx, t.Order)
			if err != nil {
				return err
			}
			d, ok := r.Event.Data.(*kernel.TurnDispatched)
			if !ok || r.Event.ID != t.ID {
				return kernel.Errorf(kernel.Internal, "the event at ledger_seq %d is not the dispatch of turn %s", t.Order, t.ID)
			}
			cmd.Original, cmd.OriginalAt = d, r.Event.At
		}
		seq, ev, a, err := e.decideAppend(ctx, p, cmd)
		switch {
		case err != nil:
			return err
		case a != nil:
			res = DispatchResult{TurnID: a.ID, Seq: a.Seq, Created: true}
		case ev != nil:
			res = DispatchResult{TurnID: ev.ID, Seq: seq, Created: true, Turn: AsOf(p.Turns[ev.ID], seq)}
		default:
			return kernel.Errorf(kernel.Internal, "a retry of turn %s decided nothing", cmd.TurnID)
		}
		return nil
	})
	return res, err
}

// ClaimResult is a won claim: the fencing token (returned once) and the Turn.
type ClaimResult struct {
	Token  kernel.ClaimToken
	TurnID string
	Seq    uint64
	// Turn is the Turn as the claim left it (AsOf), nil for a claim
	// answered again.
	Turn *kernel.Turn
}

// Claim claims the agent's oldest queued Turn. It returns nil (and the
// ledger_seq to wait for) when there is nothing to claim or the agent's
// capacity is used up.
func (e *Engine) Claim(ctx context.Context, project string, c kernel.Common, agentID string, body *kernel.AgentRef) (*ClaimResult, uint64, error) {
	return e.ClaimLease(ctx, project, c, agentID, body, 0)
}

// ClaimLease is Claim asking a lease of leaseS seconds (0: the agent's
// claim_ttl_s, or the default; see kernel.ClaimNext).
func (e *Engine) ClaimLease(ctx context.Context, project string, c kernel.Common, agentID string, body *kernel.AgentRef, leaseS int) (*ClaimResult, uint64, error) {
	claimID, err := e.newID("clm_")
	if err != nil {
		return nil, 0, err
	}
	token := "tlc_" + e.derive(secretClaim, project, claimID)
	var res *ClaimResult
	var seq uint64
	err = e.with(ctx, project, false, func(p *kernel.Project) error {
		expires := e.cfg.Now().UTC().Add(e.cfg.ClaimTTL).Truncate(time.Millisecond)
		cmd := kernel.ClaimNext{Common: c, AgentID: agentID, Agent: body, ClaimID: claimID, TokenHash: kernel.HashSecret(token), ExpiresAt: expires, LeaseS: leaseS}
		var err error
		var ev *kernel.Event
		var a *kernel.Answer
		seq, ev, a, err = e.decideAppend(ctx, p, cmd)
		if a != nil && a.Claim != nil {
			// A retried claim: the claim it won the first time, with the
			// token re-derived from its id.
			tok, err := e.rederive("tlc_", secretClaim, project, a.Claim.ID, a.Claim.TokenHash)
			if err != nil {
				return err
			}
			res = &ClaimResult{
				Token:  kernel.ClaimToken{ProjectID: project, TurnID: a.ID, AgentID: a.Claim.AgentID, Token: tok, ExpiresAt: a.Claim.ExpiresAt},
				TurnID: a.ID, Seq: a.Seq,
			}
			return nil
		}
		if err != nil || ev == nil {
			return err
		}
		t := p.Turn(ev.ID)
		res = &ClaimResult{
			Token:  kernel.ClaimToken{ProjectID: project, TurnID: t.ID, AgentID: agentID, Token: token, ExpiresAt: t.Claim.ExpiresAt},
			TurnID: t.ID, Seq: seq, Turn: AsOf(t, seq),
		}
		return nil
	})
	return res, seq, err
}

// nextDue answers the earliest time after asOf at which a queued Turn of
// the agent becomes due (its not_before), or false when none waits for one.
func (e *Engine) nextDue(ctx context.Context, project, agentID string, asOf time.Time) (time.Time, bool, error) {
	var due time.Time
	var ok bool
	err := e.read(ctx, project, false, func(p *kernel.Project) error {
		due, ok = p.NextDue(agentID, asOf)
		return nil
	})
	return due, ok, err
}

// Stop runs a stop (kernel.Stop); a cascading one draws the request id that
// every event of it carries.
func (e *Engine) Stop(ctx context.Context, project string, cmd kernel.Stop) (uint64, error) {
	if cmd.Cascade && cmd.RequestID == "" {
		id, err := e.newID("stop_")
		if err != nil {
			return 0, err
		}
		cmd.RequestID = id
	}
	return e.Execute(ctx, project, cmd)
}

// FencedResult is what a command under a claim reports back.
type FencedResult struct {
	Seq           uint64
	TurnSeq       uint64
	StopRequested bool
	Claim         kernel.ClaimToken // with the renewed expiry, for Renew
	// InputToken answers the input wait a Suspend with AwaitingInput
	// started (returned once; a retry with the same key gets it again).
	InputToken string
	// Turn is the Turn as the command left it (AsOf), nil when the engine
	// does not hold it whole: a command answered again, or one on a Turn
	// finished before it.
	Turn *kernel.Turn
}

// Fenced runs a command that carries a claim token (Renew, AppendRecord,
// Suspend, Finish, ReleaseClaim): the token's hash is filled in here.
func (e *Engine) Fenced(ctx context.Context, project string, cmd kernel.Command) (FencedResult, error) {
	var turnID string
	switch c := cmd.(type) {
	case kernel.Renew:
		c.TokenHash = kernel.HashSecret(c.Claim.Token)
		c.ExpiresAt = e.cfg.Now().UTC().Add(e.cfg.ClaimTTL).Truncate(time.Millisecond)
		turnID, cmd = c.Claim.TurnID, c
	case kernel.AppendRecord:
		c.TokenHash = kernel.HashSecret(c.Claim.Token)
		turnID, cmd = c.TurnID, c
	case kernel.Suspend:
		c.TokenHash = kernel.HashSecret(c.Claim.Token)
		turnID, cmd = c.TurnID, c
	case kernel.Finish:
		c.TokenHash = kernel.HashSecret(c.Claim.Token)
		turnID, cmd = c.TurnID, c
	case kernel.ReleaseClaim:
		c.TokenHash = kernel.HashSecret(c.Claim.Token)
		turnID, cmd = c.Claim.TurnID, c
	default:
		return FencedResult{}, kernel.Errorf(kernel.Internal, "%T carries no claim", cmd)
	}
	var res FencedResult
	err := e.with(ctx, project, false, func(p *kernel.Project) error {
		s, waits := cmd.(kernel.Suspend)
		waits = waits && s.AwaitingInput != nil
		if waits {
			// The token is derived from the claim the suspend ends, known
			// only under the lock; the kernel keeps its hash.
			if t := p.Turn(turnID); t != nil && t.Claim != nil {
				w := *s.AwaitingInput
				res.InputToken = e.inputTokenOf(project, turnID, t.Claim.ID)
				w.TokenHash = kernel.HashSecret(res.InputToken)
				s.AwaitingInput = &w
			} else {
				w := *s.AwaitingInput
				w.TokenHash = "-" // no claim: the fence refuses it first
				s.AwaitingInput = &w
			}
			cmd = s
		}
		// A Turn not finished is evolved in place, and stays whole when
		// the command finishes it (the write model keeps a packed copy).
		live := p.Turns[turnID]
		seq, _, a, err := e.decideAppend(ctx, p, cmd)
		if err != nil {
			return err
		}
		res.Seq = seq
		if a != nil && waits {
			hash := ""
			if t := p.Turn(turnID); t != nil && t.AwaitingInput != nil {
				hash = t.AwaitingInput.TokenHash
			}
			tok, err := e.rederive(InputTokenPrefix, secretInput, project, turnID+"/"+a.ResultID, hash)
			if err != nil {
				return err
			}
			res.InputToken = tok
		}
		if a != nil {
			res.TurnSeq, res.StopRequested = a.TurnSeq, a.StopRequested
			if r, ok := cmd.(kernel.Renew); ok && a.Claim != nil {
				res.Claim = r.Claim
				res.Claim.ExpiresAt = a.Claim.ExpiresAt
			}
			return nil
		}
		res.Turn = AsOf(live, seq)
		if t := p.Turn(turnID); t != nil {
			res.TurnSeq, res.StopRequested = t.TurnSeq, t.StopRequested
			if r, ok := cmd.(kernel.Renew); ok && t.Claim != nil {
				res.Claim = r.Claim
				res.Claim.ExpiresAt = t.Claim.ExpiresAt
			}
		}
		return nil
	})
	return res, err
}

// AsOf returns a copy of t for a command's answer when the event at seq
// was the last to change it, else nil (the command changed it with more
// than one event, or t is not the write model's Turn). The answer then
// shows the Turn as the projections will (projection.ViewOf folds the same
// events with the same kernel.EvolveTurn), without waiting for them to fold
// it. The copy shares nothing the engine changes in place later:
// EvolveTurn sets new values and pointers, except for the claim's expiry.
func AsOf(t *kernel.Turn, seq uint64) *kernel.Turn {
	if t == nil || t.Seq != seq {
		return nil
	}
	c := *t
	if t.Claim != nil {
		cl := *t.Claim
		c.Claim = &cl
	}
	return &c
}

// ReconcileExpired releases every claim of the project that has expired and
// returns the Turns it released.
func (e *Engine) ReconcileExpired(ctx context.Context, project string, c kernel.Common) ([]string, uint64, error) {
	var released []string
	var last uint64
	err := e.with(ctx, project, false, func(p *kernel.Project) error {
		if _, err := p.Check(c.Caller, e.cfg.Now()); err != nil {
			return err
		}
		if a, err := kernel.Recall(p, kernel.ReconcileExpired{Common: c}, e.cfg.Now()); err != nil || a != nil {
			if a != nil {
				released, last = a.Released, a.Seq
			}
			return err
		}
		if c.Idem != nil {
			// Every release carries the key under the reconcile's name.
			k := *kernel.ScopedKey(kernel.ReconcileExpired{Common: c})
			c.Idem = &k
		}
		last = p.Seq
		for _, id := range kernel.ExpiredClaims(p, e.cfg.Now()) {
			before := p.Seq
			seq, err := e.execute(ctx, p, kernel.ExpireClaim{Common: c, TurnID: id})
			if err != nil {
				return err
			}
			if seq > before {
				released = append(released, id)
			}
			last = seq
		}
		return nil
	})
	return released, last, err
}

// Reap does what is due in every project the engine has loaded, as the
// system: expired claims released, Turns past their claim_by expired, past
// their deadline timed out (kernel.ExpireDue). It returns how many Turns it
// changed and the first error met, after trying every project.
func (e *Engine) Reap(ctx context.Context) (int, error) {
	var n int
	var first error
	for _, project := range e.Projects() {
		k, err := e.expireDue(ctx, project)
		n += k
		if err != nil && first == nil {
			first = err
		}
	}
	return n, first
}

func (e *Engine) expireDue(ctx context.Context, project string) (int, error) {
	c := kernel.Common{Caller: kernel.Caller{Admin: true, System: true}}
	n := 0
	err := e.with(ctx, project, false, func(p *kernel.Project) error {
		for _, id := range kernel.DueTurns(p, e.cfg.Now()) {
			before := p.Seq
			if _, err := e.execute(ctx, p, kernel.ExpireDue{Common: c, TurnID: id}); err != nil {
				return err
			}
			if p.Seq > before {
				n++
			}
		}
		return nil
	})
	return n, err
}

// Preload loads the projects' write models, so that the reaper sees them
// before any request names them. It waits for each load without the bound
// of Config.LoadWait.
func (e *Engine) Preload(ctx context.Context, projects []string) error {
	for _, id := range projects {
		if !kernel.ValidID(id) {
			continue
		}
		e.mu.Lock()
		s := e.projects[id]
		if s == nil {
			s = e.newSlot(id)
			e.projects[id] = s
		}
		e.mu.Unlock()
		if err := e.awaitLoad(ctx, s, 0); err != nil {
			return err
		}
	}
	return nil
}

// IssuedCredential is a freshly issued credential and its token, returned once.
type IssuedCredential struct {
	CredentialID string
	AgentID      string
	Token        string
	ExpiresAt    time.Time
	Seq          uint64
}

// newCredential draws a credential id, its token (derived from the id, see
// derive, so that a retry can answer it again) and its expiry.
func (e *Engine) newCredential(project, agentID string) (IssuedCredential, error) {
	id, err := e.newID("cred_")
	if err != nil {
		return IssuedCredential{}, err
	}
	token := "tla_" + e.derive(secretCredential, project, id)
	expires := e.cfg.Now().UTC().Add(e.cfg.CredentialTTL).Truncate(time.Second)
	return IssuedCredential{CredentialID: id, AgentID: agentID, Token: token, ExpiresAt: expires}, nil
}

// issue appends cmd, which issues cred, and answers cred; for a retry with
// the same idempotency key it answers the credential the first request
// issued, its token derived again.
func (e *Engine) issue(ctx context.Context, p *kernel.Project, cmd kernel.Command, cred IssuedCredential) (IssuedCredential, error) {
	seq, _, a, err := e.decideAppend(ctx, p, cmd)
	if err != nil {
		return IssuedCredential{}, err
	}
	if a != nil {
		return e.recalledCredential(p, a)
	}
	cred.Seq = seq
	return cred, nil
}

// recalledCredential is the credential a remembered answer issued.
func (e *Engine) recalledCredential(p *kernel.Project, a *kernel.Answer) (IssuedCredential, error) {
	cred := p.Credentials[a.ResultID]
	if cred == nil {
		return IssuedCredential{}, kernel.Errorf(kernel.Internal, "remembered credential %s is missing", a.ResultID)
	}
	tok, err := e.rederive("tla_", secretCredential, p.ID, a.ResultID, cred.TokenHash)
	if err != nil {
		return IssuedCredential{}, err
	}
	return IssuedCredential{CredentialID: a.ResultID, AgentID: cred.AgentID, Token: tok, ExpiresAt: a.ExpiresAt, Seq: a.Seq}, nil
}

// IssueCredential issues a credential for the agent (via ViaIssue).
func (e *Engine) IssueCredential(ctx context.Context, project string, c kernel.Common, agentID string) (IssuedCredential, error) {
	cred, err := e.newCredential(project, agentID)
	if err != nil {
		return IssuedCredential{}, err
	}
	var out IssuedCredential
	err = e.with(ctx, project, false, func(p *kernel.Project) error {
		var err error
		out, err = e.issue(ctx, p, kernel.IssueCredential{Common: c, AgentID: agentID, CredentialID: cred.CredentialID,
			TokenHash: kernel.HashSecret(cred.Token), ExpiresAt: cred.ExpiresAt}, cred)
		return err
	})
	return out, err
}

// Bootstrap runs the admin's bootstrap (see the Bootstrap command): one
// event registers the agent when needed and issues its credential. The
// CredentialID, TokenHash and ExpiresAt of cmd are filled in here. A retry
// with the same idempotency key answers the first credential again.
func (e *Engine) Bootstrap(ctx context.Context, project string, cmd kernel.Bootstrap) (IssuedCredential, error) {
	cred, err := e.newCredential(project, cmd.AgentID)
	if err != nil {
		return IssuedCredential{}, err
	}
	cmd.CredentialID, cmd.TokenHash, cmd.ExpiresAt = cred.CredentialID, kernel.HashSecret(cred.Token), cred.ExpiresAt
	var out IssuedCredential
	err = e.with(ctx, project, false, func(p *kernel.Project) error {
		var err error
		out, err = e.issue(ctx, p, cmd, cred)
		return err
	})
	return out, err
}

// CreatedInvite is a new join invite and its code, returned once.
type CreatedInvite struct {
	Invite kernel.InviteCreated
	Code   string
	Seq    uint64
}

// CreateInvite creates a join invite, with the defaults and bounds of
// InviteRequest.
func (e *Engine) CreateInvite(ctx context.Context, project string, c kernel.Common, req kernel.InviteRequest) (CreatedInvite, error) {
	inv, ttl, err := req.Invite(e.cfg.InviteTTL, e.cfg.MaxInviteTTL)
	if err != nil {
		return CreatedInvite{}, err
	}
	if !kernel.ValidID(project) {
		return CreatedInvite{}, kernel.Errorf(kernel.Validation, "project id %q must be 1 to 128 letters, digits, '_' or '-'", project)
	}
	id, err := e.newID("inv_")
	if err != nil {
		return CreatedInvite{}, err
	}
	code := JoinCodePrefix + project + "." + e.derive(secretInvite, project, id)
	inv.InviteID, inv.CodeHash = id, kernel.HashSecret(code)
	inv.ExpiresAt = e.cfg.Now().UTC().Add(ttl).Truncate(time.Second)
	var out CreatedInvite
	err = e.with(ctx, project, false, func(p *kernel.Project) error {
		seq, _, a, err := e.decideAppend(ctx, p, kernel.CreateInvite{Common: c, Invite: inv})
		if err != nil {
			return err
		}
		out = CreatedInvite{Invite: inv, Code: code, Seq: seq}
		if a != nil {
			old := p.Invites[a.ResultID]
			if old == nil {
				return kernel.Errorf(kernel.Internal, "remembered invite %s is missing", a.ResultID)
			}
			code, err := e.rederive(JoinCodePrefix+project+".", secretInvite, project, a.ResultID, old.Data.CodeHash)
			if err != nil {
				return err
			}
			out = CreatedInvite{Invite: old.Data, Code: code, Seq: a.Seq}
		}
		return nil
	})
	return out, err
}

// JoinCodePrefix starts every join code. A code reads
// "tlj.<project_id>.<secret>": the project it joins is not secret; the rest is.
const JoinCodePrefix = "tlj."

// Redeemed is the outcome of redeeming a join code.
type Redeemed struct {
	ProjectID  string
	Invite     kernel.InviteCreated
	Credential IssuedCredential
}

// RedeemInvite redeems a join code: one invite.redeemed event registers the
// invited agent if it is new and issues a credential, whose token is returned
// once. A single-use invite is redeemed once however many redeem it at the
// same moment: the project's lock and the ledger's expectation serialise them.
func (e *Engine) RedeemInvite(ctx context.Context, code string) (Redeemed, error) {
	return e.RedeemInviteKeyed(ctx, kernel.Common{}, code)
}

// RedeemInviteKeyed is RedeemInvite with the request's idempotency key in c
// (the caller of a redeem is whoever holds the code).
func (e *Engine) RedeemInviteKeyed(ctx context.Context, c kernel.Common, code string) (Redeemed, error) {
	rest, ok := strings.CutPrefix(code, JoinCodePrefix)
	project, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || !kernel.ValidID(project) {
		return Redeemed{}, kernel.Errorf(kernel.Unauthorized, "invalid join code")
	}
	cred, err := e.newCredential(project, "")
	if err != nil {
		return Redeemed{}, err
	}
	var out Redeemed
	err = e.with(ctx, project, true, func(p *kernel.Project) error {
		cmd := kernel.RedeemInvite{Common: c, CodeHash: kernel.HashSecret(code), CredentialID: cred.CredentialID, TokenHash: kernel.HashSecret(cred.Token), ExpiresAt: cred.ExpiresAt}
		seq, _, a, err := e.decideAppend(ctx, p, cmd)
		if err != nil {
			return err
		}
		inv := p.Invites[p.InviteCodes[cmd.CodeHash]]
		if inv == nil {
			return kernel.Errorf(kernel.Internal, "redeemed invite is missing")
		}
		if a != nil {
			// A retried redeem: the credential it issued the first time.
			old, err := e.recalledCredential(p, a)
			if err != nil {
				return err
			}
			out = Redeemed{ProjectID: project, Invite: inv.Data, Credential: old}
			return nil
		}
		cred.AgentID, cred.Seq = inv.Data.AgentID, seq
		out = Redeemed{ProjectID: project, Invite: inv.Data, Credential: cred}
		return nil
	})
	return out, err
}

// ReportWorkMemory validates and records a work-memory report.
func (e *Engine) ReportWorkMemory(ctx context.Context, project string, c kernel.Common, agentID string, raw []byte) (string, uint64, error) {
	r, err := kernel.ParseWorkMemoryReport(raw)
	if err != nil {
		return "", 0, err
	}
	id, err := e.newID("rep_")
	if err != nil {
		return "", 0, err
	}
	var seq uint64
	err = e.with(ctx, project, false, func(p *kernel.Project) error {
		var a *kernel.Answer
		var err error
		seq, _, a, err = e.decideAppend(ctx, p, kernel.ReportWorkMemory{Common: c, AgentID: agentID, ReportID: id, Report: r})
		if a != nil {
			id = a.ResultID
		}
		return err
	})
	return id, seq, err
}

// BulkStop stops the listed Turns (kernel.BulkStop), all or none, with one
// request id, and returns the ids of the Turns it stopped; a retry with the
// same idempotency key returns the first answer's.
func (e *Engine) BulkStop(ctx context.Context, project string, cmd kernel.BulkStop) ([]string, uint64, error) {
	id, err := e.newID("stop_")
	if err != nil {
		return nil, 0, err
	}
	cmd.RequestID = id
	var ids []string
	var seq uint64
	err = e.with(ctx, project, false, func(p *kernel.Project) error {
		var events []kernel.Event
		var a *kernel.Answer
		var err error
		seq, events, a, err = e.decideAppendAll(ctx, p, cmd)
		ids = changed(events, a)
		return err
	})
	return ids, seq, err
}

// BulkRetry retries the listed Turns (kernel.BulkRetry), all or none, and
// returns the ids of the new Turns. Each old Turn's dispatch is read from
// the ledger (its input and schedule), as Retry does.
func (e *Engine) BulkRetry(ctx context.Context, project string, c kernel.Common, by kernel.AgentRef, turnIDs []string) ([]string, uint64, error) {
	cmd := kernel.BulkRetry{Common: c, RequestedBy: by}
	var ids []string
	var seq uint64
	err := e.with(ctx, project, false, func(p *kernel.Project) error {
		if a, err := kernel.Recall(p, cmd, e.cfg.Now()); err != nil || a != nil {
			ids, seq = changed(nil, a), p.Seq
			if a != nil {
				seq = a.Seq
			}
			return err
		}
		for _, id := range turnIDs {
			t := p.Turn(id)
			if t == nil || !kernel.CanRetry(p, id) {
				continue
			}
			r, err := e.ledger.Event(ctx, t.Order)
			if err != nil {
				return err
			}
			d, ok := r.Event.Data.(*kernel.TurnDispatched)
			if !ok || r.Event.ID != t.ID {
				return kernel.Errorf(kernel.Internal, "the event at ledger_seq %d is not the dispatch of turn %s", t.Order, t.ID)
			}
			nid, err := e.newTurnID()
			if err != nil {
				return err
			}
			cmd.Items = append(cmd.Items, kernel.RetryItem{TurnID: id, NewTurnID: nid, Original: d, OriginalAt: r.Event.At})
		}
		var events []kernel.Event
		var a *kernel.Answer
		var err error
		seq, events, a, err = e.decideAppendAll(ctx, p, cmd)
		ids = changed(events, a)
		return err
	})
	return ids, seq, err
}

// RetryableOf returns those of the Turns that :retry would accept now, in
// their order (kernel.CanRetry).
func (e *Engine) RetryableOf(ctx context.Context, project string, turnIDs []string) ([]string, error) {
	var out []string
	err := e.read(ctx, project, false, func(p *kernel.Project) error {
		for _, id := range turnIDs {
			if kernel.CanRetry(p, id) {
				out = append(out, id)
			}
		}
		return nil
	})
	return out, err
}

// changed is the ids of the aggregates a command changed: of its events,
// or of the remembered answer of its first request.
func changed(events []kernel.Event, a *kernel.Answer) []string {
	ids := []string{}
	switch {
	case a != nil && a.Released != nil:
		ids = append(ids, a.Released...)
	case a != nil:
		ids = append(ids, a.ID)
	}
	for _, ev := range events {
		ids = append(ids, ev.ID)
	}
	return ids
}
