package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

type dispatchBody struct {
	RequestedBy kernel.AgentRef `json:"requested_by"`
	TargetAgent kernel.AgentRef `json:"target_agent"`
	Input       json.RawMessage `json:"input"`
	TurnKind    string          `json:"turn_kind"`
	DispatchKey string          `json:"dispatch_key"`
	Authority   struct {
		Mode        string             `json:"mode"`
		RequestID   string             `json:"request_id"`
		ParentClaim *kernel.ClaimToken `json:"parent_claim"`
	} `json:"authority"`
	kernel.Schedule
	Tags      []string      `json:"tags"`
	ContextID string        `json:"context_id"`
	Meta      *kernel.Meta  `json:"meta"`
	Trace     *kernel.Trace `json:"trace"`
}

func (s *Server) dispatch(w http.ResponseWriter, c *call) error {
	var b dispatchBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	res, err := s.engine.Dispatch(c.ctx, c.project, kernel.Dispatch{
		Common: c.common(b.Meta, b.Trace), RequestedBy: b.RequestedBy, TargetAgent: b.TargetAgent,
		Input: b.Input, TurnKind: b.TurnKind, DispatchKey: b.DispatchKey,
		Mode: b.Authority.Mode, RequestID: b.Authority.RequestID, ParentClaim: b.Authority.ParentClaim,
		Schedule: b.Schedule, Tags: b.Tags, ContextID: b.ContextID,
	})
	if err != nil {
		return err
	}
	return s.turnAfter(w, c, res.Seq, res.TurnID, res.Turn)
}

// turnAfter answers with the Turn snapshot as of seq (Server.turnAt).
func (s *Server) turnAfter(w http.ResponseWriter, c *call, seq uint64, turnID string, t *kernel.Turn) error {
	v, err := s.turnAt(c.ctx, c.project, turnID, seq, t)
	if err != nil {
		return err
	}
	return s.ok(w, v)
}

func (s *Server) readableTurn(c *call) (string, error) {
	id, err := c.id("turn_id")
	if err != nil {
		return "", err
	}
	err = s.engine.ViewFolded(c.ctx, c.project, func(p *kernel.Project) error {
		return kernel.CanReadTurn(p, c.caller, s.cfg.Now(), id)
	})
	return id, err
}

func (s *Server) getTurn(w http.ResponseWriter, c *call) error {
	id, err := s.readableTurn(c)
	if err != nil {
		return err
	}
	v, err := s.store.Turn(c.project, id)
	if err != nil {
		return named(err, "turn", id)
	}
	return s.ok(w, v)
}

func (s *Server) turnContext(w http.ResponseWriter, c *call) error {
	after, limit, err := s.cursor(c, "after_turn_seq")
	if err != nil {
		return err
	}
	id, err := s.readableTurn(c)
	if err != nil {
		return err
	}
	cp, err := s.store.Context(c.project, id, after, limit)
	if err != nil {
		return named(err, "turn", id)
	}
	pg := s.page(c, cp.Items, limit)
	pg.NextAfterTurnSeq, pg.HasMore = &cp.NextAfterTurnSeq, &cp.HasMore
	return s.ok(w, pg)
}

// cursor reads the query of a cursor-paged read: the cursor parameter named
// and limit, nothing else.
func (s *Server) cursor(c *call, name string) (uint64, int, error) {
	q, err := s.query(c, name, "limit")
	if err != nil {
		return 0, 0, err
	}
	after, err := q.seq(name)
	if err != nil {
		return 0, 0, err
	}
	limit, err := s.limit(q)
	return after, limit, err
}

// feed answers a page of a feed from its items as stored
// (projection.RawFeed): the page is encoded with no items, and the items are
// sent between its brackets as they are, instead of each decoded and
// encoded again. The body is the same, byte for byte, as page's encoding of
// the decoded items (TestFeedBodyIsThePageOfTheDecodedItems). The items go
// out as fp.Joined, in one piece, and fp's buffer is released after.
func (s *Server) feed(w http.ResponseWriter, c *call, fp projection.RawFeedPage, limit int) error {
	defer fp.Release()
	pg := s.page(c, json.RawMessage("[]"), limit)
	pg.NextAfterLedgerSeq, pg.HasMore = &fp.NextAfterLedgerSeq, &fp.HasMore
	env, err := json.Marshal(pg)
	if err != nil {
		return err
	}
	// The first `"items":[]` is the field: inside a JSON string every '"'
	// is escaped, and no field before it is named items.
	at := bytes.Index(env, []byte(`"items":[]`)) + len(`"items":[`) // just after the items' '['
	if at < len(`"items":[`) {
		return fmt.Errorf("httpapi: feed page: no items in %.80q", env)
	}
	jsonhttp.WriteBody(w, http.StatusOK, env[:at], fp.Joined, env[at:])
	return nil
}

func (s *Server) turnFeed(w http.ResponseWriter, c *call) error {
	after, limit, err := s.cursor(c, "after_ledger_seq")
	if err != nil {
		return err
	}
	id, err := s.readableTurn(c)
	if err != nil {
		return err
	}
	if wantsStream(c.r) {
		return s.streamFeed(w, c, after, limit, func(a uint64, n int) (projection.FeedPage, error) {
			fp, err := s.store.TurnFeed(c.project, id, a, n)
			return fp, named(err, "turn", id)
		}, func(c *call) error { _, err := s.readableTurn(c); return err })
	}
	fp, err := s.store.RawFeed(projection.FeedOfTurn, c.project, id, after, limit)
	if err != nil {
		return named(err, "turn", id)
	}
	return s.feed(w, c, fp, limit)
}

type requestedBody struct {
	RequestedBy kernel.AgentRef `json:"requested_by"`
	Meta        *kernel.Meta    `json:"meta"`
	Trace       *kernel.Trace   `json:"trace"`
}

type stopBody struct {
	RequestedBy kernel.AgentRef `json:"requested_by"`
	Cascade     bool            `json:"cascade"`
	Meta        *kernel.Meta    `json:"meta"`
	Trace       *kernel.Trace   `json:"trace"`
}

// stopTurn requests a stop of the Turn, or with cascade of its whole tree
// (kernel.Stop), and answers with the Turn.
func (s *Server) stopTurn(w http.ResponseWriter, c *call) error {
	id, err := c.id("turn_id")
	if err != nil {
		return err
	}
	var b stopBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	seq, err := s.engine.Stop(c.ctx, c.project, kernel.Stop{Common: c.common(b.Meta, b.Trace), TurnID: id, RequestedBy: b.RequestedBy, Cascade: b.Cascade})
	if err != nil {
		return err
	}
	return s.turnAfter(w, c, seq, id, nil)
}

func (s *Server) resumeTurn(w http.ResponseWriter, c *call) error {
	return s.manageTurn(w, c, func(common kernel.Common, id string, by kernel.AgentRef) kernel.Command {
		return kernel.Resume{Common: common, TurnID: id, RequestedBy: by}
	})
}

// manageTurn runs a management command of one Turn whose body is
// {requested_by, meta, trace}, and answers with the Turn.
func (s *Server) manageTurn(w http.ResponseWriter, c *call, cmd func(kernel.Common, string, kernel.AgentRef) kernel.Command) error {
	id, err := c.id("turn_id")
	if err != nil {
		return err
	}
	var b requestedBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	seq, err := s.engine.Execute(c.ctx, c.project, cmd(c.common(b.Meta, b.Trace), id, b.RequestedBy))
	if err != nil {
		return err
	}
	return s.turnAfter(w, c, seq, id, nil)
}

type claimBody struct {
	Agent  *kernel.AgentRef `json:"agent"`
	LeaseS int              `json:"lease_s"`
	Meta   *kernel.Meta     `json:"meta"`
	Trace  *kernel.Trace    `json:"trace"`
}

// claimResult is the response of a won claim.
type claimResult struct {
	Claim kernel.ClaimToken   `json:"claim"`
	Turn  projection.TurnView `json:"turn"`
}

func (s *Server) claim(w http.ResponseWriter, c *call) error {
	agent, err := c.id("agent_id")
	if err != nil {
		return err
	}
	wait, err := s.claimWait(c)
	if err != nil {
		return err
	}
	var b claimBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	if b.Agent == nil {
		return kernel.Errorf(kernel.Validation, "agent is required")
	}
	res, seq, err := s.claimWaiting(w, c, agent, wait, func() (*engine.ClaimResult, uint64, error) {
		return s.engine.ClaimLease(c.ctx, c.project, c.common(b.Meta, b.Trace), agent, b.Agent, b.LeaseS)
	})
	if err != nil {
		return err
	}
	if res == nil {
		return s.ok(w, nil)
	}
	v, err := s.turnAt(c.ctx, c.project, res.TurnID, seq, res.Turn)
	if err != nil {
		return err
	}
	return s.ok(w, claimResult{Claim: res.Token, Turn: v})
}

type fencedBody struct {
	Claim kernel.ClaimToken `json:"claim"`
	Meta  *kernel.Meta      `json:"meta"`
	Trace *kernel.Trace     `json:"trace"`
}

// renewResult is the response of a renewal: the claim with its new expiry,
// and whether a stop was requested.
type renewResult struct {
	Claim         kernel.ClaimToken `json:"claim"`
	StopRequested bool              `json:"stop_requested"`
	LedgerSeq     uint64            `json:"ledger_seq"`
}

func (s *Server) renew(w http.ResponseWriter, c *call) error {
	var b fencedBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	res, err := s.engine.Fenced(c.ctx, c.project, kernel.Renew{Common: c.common(b.Meta, b.Trace), Claim: b.Claim})
	if err != nil {
		return err
	}
	if err := s.wait(c.ctx, res.Seq); err != nil {
		return err
	}
	return s.ok(w, renewResult{Claim: res.Claim, StopRequested: res.StopRequested, LedgerSeq: res.Seq})
}

type recordBody struct {
	Claim   kernel.ClaimToken `json:"claim"`
	Payload json.RawMessage   `json:"payload"`
	Role    string            `json:"role"`
	Meta    *kernel.Meta      `json:"meta"`
	Trace   *kernel.Trace     `json:"trace"`
}

// recordResult is the response of an appended semantic record.
type recordResult struct {
	ProjectID     string `json:"project_id"`
	TurnID        string `json:"turn_id"`
	TurnSeq       uint64 `json:"turn_seq"`
	StopRequested bool   `json:"stop_requested"`
	LedgerSeq     uint64 `json:"ledger_seq"`
}

func (s *Server) appendRecord(w http.ResponseWriter, c *call) error {
	id, err := c.id("turn_id")
	if err != nil {
		return err
	}
	var b recordBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	res, err := s.engine.Fenced(c.ctx, c.project, kernel.AppendRecord{
		Common: c.common(b.Meta, b.Trace), TurnID: id, Claim: b.Claim, Role: b.Role, Payload: b.Payload,
	})
	if err != nil {
		return err
	}
	if err := s.waitNear(c.ctx, res.Seq); err != nil {
		return err
	}
	return s.ok(w, recordResult{ProjectID: c.project, TurnID: id, TurnSeq: res.TurnSeq, StopRequested: res.StopRequested, LedgerSeq: res.Seq})
}

func (s *Server) suspend(w http.ResponseWriter, c *call) error {
	id, err := c.id("turn_id")
	if err != nil {
		return err
	}
	var b suspendBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	cmd := kernel.Suspend{Common: c.common(b.Meta, b.Trace), TurnID: id, Claim: b.Claim}
	if a := b.AwaitingInput; a != nil {
		cmd.AwaitingInput = &kernel.AwaitingInput{Prompt: a.Prompt, Schema: a.Schema, InputBy: a.InputBy}
	}
	res, err := s.engine.Fenced(c.ctx, c.project, cmd)
	if err != nil {
		return err
	}
	v, err := s.turnAt(c.ctx, c.project, id, res.Seq, res.Turn)
	if err != nil {
		return err
	}
	if res.InputToken == "" {
		return s.ok(w, v)
	}
	return s.ok(w, suspendResult{TurnView: v, InputToken: res.InputToken, InputURL: s.inputURL(c, id)})
}

type suspendBody struct {
	Claim         kernel.ClaimToken `json:"claim"`
	AwaitingInput *struct {
		Prompt  string          `json:"prompt"`
		Schema  json.RawMessage `json:"schema"`
		InputBy *time.Time      `json:"input_by"`
	} `json:"awaiting_input"`
	Meta  *kernel.Meta  `json:"meta"`
	Trace *kernel.Trace `json:"trace"`
}

// suspendResult is the answer of a suspend for input: the Turn, and once,
// the input token and the URL that answers the wait with it.
type suspendResult struct {
	projection.TurnView
	InputToken string `json:"input_token"`
	InputURL   string `json:"input_url"`
}

// inputURL is the absolute URL of the Turn's :provide-input route: under
// Config.PublicURL, or as the client reached this server.
func (s *Server) inputURL(c *call, turnID string) string {
	return faceauth.BaseURL(c.r, s.cfg.PublicURL) + "/v3r1/projects/" + c.project + "/turns/" + turnID + ":provide-input"
}

type provideInputBody struct {
	Input json.RawMessage `json:"input"`
	Meta  *kernel.Meta    `json:"meta"`
	Trace *kernel.Trace   `json:"trace"`
}

// provideInput answers a Turn's input wait (kernel.ProvideInput), with its
// input token alone or as the admin, the requester or a management agent.
func (s *Server) provideInput(w http.ResponseWriter, c *call) error {
	id, err := c.id("turn_id")
	if err != nil {
		return err
	}
	var b provideInputBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	cmd := kernel.ProvideInput{Common: c.common(b.Meta, b.Trace), TurnID: id, Input: b.Input}
	if c.inputToken != "" {
		cmd.TokenHash = kernel.HashSecret(c.inputToken)
		cmd.Common.Idem = c.idempotency("input:" + cmd.TokenHash)
	}
	seq, err := s.engine.Execute(c.ctx, c.project, cmd)
	if err != nil {
		if c.inputToken != "" && kernel.ErrorKind(err) == kernel.Unauthorized {
			s.authFailed(c.r, c.project, "")
		}
		return err
	}
	return s.turnAfter(w, c, seq, id, nil)
}

type finishBody struct {
	Claim           kernel.ClaimToken `json:"claim"`
	Outcome         string            `json:"outcome"`
	FinalPayload    json.RawMessage   `json:"final_payload"`
	FinalRecordRole string            `json:"final_record_role"`
	Retry           bool              `json:"retry"`
	Meta            *kernel.Meta      `json:"meta"`
	Trace           *kernel.Trace     `json:"trace"`
}

func (s *Server) finish(w http.ResponseWriter, c *call) error {
	id, err := c.id("turn_id")
	if err != nil {
		return err
	}
	var b finishBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	res, err := s.engine.Fenced(c.ctx, c.project, kernel.Finish{
		Common: c.common(b.Meta, b.Trace), TurnID: id, Claim: b.Claim,
		Outcome: b.Outcome, FinalPayload: b.FinalPayload, FinalRecordRole: b.FinalRecordRole, Retry: b.Retry,
	})
	if err != nil {
		return err
	}
	return s.turnAfter(w, c, res.Seq, id, res.Turn)
}

type contextBody struct {
	Meta  *kernel.Meta  `json:"meta"`
	Trace *kernel.Trace `json:"trace"`
}

// reconcileResult lists the Turns whose expired claims were released.
type reconcileResult struct {
	ProjectID string   `json:"project_id"`
	Released  []string `json:"released_turn_ids"`
	LedgerSeq uint64   `json:"ledger_seq"`
}

func (s *Server) reconcileExpired(w http.ResponseWriter, c *call) error {
	var b contextBody
	if err := s.decode(c, &b, true); err != nil {
		return err
	}
	ids, seq, err := s.engine.ReconcileExpired(c.ctx, c.project, c.common(b.Meta, b.Trace))
	if err != nil {
		return err
	}
	if err := s.wait(c.ctx, seq); err != nil {
		return err
	}
	if ids == nil {
		ids = []string{}
	}
	return s.ok(w, reconcileResult{ProjectID: c.project, Released: ids, LedgerSeq: seq})
}

// The orders of the Turn list. The route's default stays oldest first, the
// order it has always answered in (the spec names no order, and what a spec
// route answers today does not change); order=newest is asked for, by the
// console among others.
const (
	OrderOldest = "oldest"
	OrderNewest = "newest"
)

func (s *Server) projectionTurns(w http.ResponseWriter, c *call) error {
	q, err := s.query(c, "target_agent_id", "turn_kind", "state", "outcome", "priority", "awaiting_input", "tag", "context_id", "stop_requested_only", "after_ledger_seq", "order", "limit")
	if err != nil {
		return err
	}
	var f projection.TurnFilter
	switch o := q.str("order"); o {
	case "", OrderOldest:
	case OrderNewest:
		f.NewestFirst = true
	default:
		return kernel.Errorf(kernel.Validation, "order must be %s or %s; not %q", OrderOldest, OrderNewest, o)
	}
	if f.TargetAgentID, err = q.id("target_agent_id"); err != nil {
		return err
	}
	f.TurnKind, f.State, f.Outcome = q.str("turn_kind"), q.str("state"), q.str("outcome")
	if err := kernel.CheckTurnState("state", f.State); err != nil {
		return err
	}
	if p := q.str("priority"); p != "" {
		if f.Priority, err = strconv.Atoi(p); err != nil || f.Priority < kernel.MinPriority || f.Priority > kernel.MaxPriority {
			return kernel.Errorf(kernel.Validation, "priority must be an integer from %d to %d; not %q", kernel.MinPriority, kernel.MaxPriority, p)
		}
	}
	f.Tags = q.lists["tag"]
	if len(f.Tags) > kernel.MaxTags {
		return kernel.Errorf(kernel.Validation, "tag may be given at most %d times", kernel.MaxTags)
	}
	for _, tag := range f.Tags {
		if err := kernel.CheckTag("tag", tag); err != nil {
			return err
		}
	}
	f.ContextID = q.str("context_id")
	if err := kernel.CheckContextID(f.ContextID); err != nil {
		return err
	}
	if f.AwaitingInputOnly, err = q.flag("awaiting_input"); err != nil {
		return err
	}
	if f.StopRequestedOnly, err = q.flag("stop_requested_only"); err != nil {
		return err
	}
	if f.AfterSeq, err = q.seq("after_ledger_seq"); err != nil {
		return err
	}
	limit, err := s.limit(q)
	if err != nil {
		return err
	}
	if f.VisibleTo, err = s.engine.TurnsVisibleTo(c.ctx, c.project, c.caller); err != nil {
		return err
	}
	tp, err := s.store.TurnsPage(c.project, f, limit)
	if err != nil {
		return err
	}
	pg := s.page(c, tp.Items, limit)
	pg.NextAfterLedgerSeq, pg.HasMore = &tp.NextAfterSeq, &tp.HasMore
	return s.ok(w, pg)
}

func (s *Server) lineage(w http.ResponseWriter, c *call) error {
	q, err := s.query(c, "limit")
	if err != nil {
		return err
	}
	limit, err := s.limit(q)
	if err != nil {
		return err
	}
	id, err := s.readableTurn(c)
	if err != nil {
		return err
	}
	visibleTo, err := s.engine.TurnsVisibleTo(c.ctx, c.project, c.caller) // the Turns of the tree the caller may read, as in the Turn list
	if err != nil {
		return err
	}
	items, err := s.store.Lineage(c.project, id, limit, visibleTo)
	if err != nil {
		return named(err, "turn", id)
	}
	return s.ok(w, s.page(c, items, limit))
}

func (s *Server) projectFeed(w http.ResponseWriter, c *call) error {
	after, limit, err := s.cursor(c, "after_ledger_seq")
	if err != nil {
		return err
	}
	if err := s.authorizeRead(c, kernel.ReadProjectWide, ""); err != nil {
		return err
	}
	if wantsStream(c.r) {
		return s.streamFeed(w, c, after, limit, func(a uint64, n int) (projection.FeedPage, error) {
			return s.store.ProjectFeed(c.project, a, n)
		}, func(c *call) error { return s.authorizeRead(c, kernel.ReadProjectWide, "") })
	}
	fp, err := s.store.RawFeed(projection.FeedOfProject, c.project, "", after, limit)
	if err != nil {
		return err
	}
	return s.feed(w, c, fp, limit)
}

func (s *Server) authorizeRead(c *call, action, agentID string) error {
	return s.engine.ViewFolded(c.ctx, c.project, func(p *kernel.Project) error {
		return kernel.AuthorizeRead(p, c.caller, s.cfg.Now(), action, agentID)
	})
}

type retryBody struct {
	RequestedBy kernel.AgentRef `json:"requested_by"`
	Meta        *kernel.Meta    `json:"meta"`
	Trace       *kernel.Trace   `json:"trace"`
}

// retryTurn dispatches a new Turn from a finished one (kernel.Retry) and
// answers the new Turn's snapshot.
func (s *Server) retryTurn(w http.ResponseWriter, c *call) error {
	id, err := c.id("turn_id")
	if err != nil {
		return err
	}
	var b retryBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	res, err := s.engine.Retry(c.ctx, c.project, kernel.Retry{Common: c.common(b.Meta, b.Trace), TurnID: id, RequestedBy: b.RequestedBy})
	if err != nil {
		return err
	}
	return s.turnAfter(w, c, res.Seq, res.TurnID, res.Turn)
}

// bulkBody is the body of the bulk actions: a filter of the Turn list, a
// limit, a reason.
type bulkBody struct {
	RequestedBy kernel.AgentRef `json:"requested_by"`
	Filter      struct {
		State         string `json:"state"`
		TargetAgentID string `json:"target_agent_id"`
		TurnKind      string `json:"turn_kind"`
		Tag           string `json:"tag"`
		Outcome       string `json:"outcome"`
		AwaitingInput bool   `json:"awaiting_input"`
	} `json:"filter"`
	Limit  *int          `json:"limit"`
	Reason string        `json:"reason"`
	Meta   *kernel.Meta  `json:"meta"`
	Trace  *kernel.Trace `json:"trace"`
}

// DefaultBulkLimit is the limit of a bulk action that names none.
const DefaultBulkLimit = 100

// bulk reads a bulk action's body and its filter.
func (s *Server) bulk(c *call) (bulkBody, projection.TurnFilter, int, error) {
	var b bulkBody
	var f projection.TurnFilter
	if err := s.decode(c, &b, false); err != nil {
		return b, f, 0, err
	}
	limit := DefaultBulkLimit
	if b.Limit != nil {
		limit = *b.Limit
	}
	if limit < 1 || limit > kernel.MaxBulk {
		return b, f, 0, kernel.Errorf(kernel.Validation, "limit must be from 1 to %d", kernel.MaxBulk)
	}
	fl := b.Filter
	if err := kernel.CheckTurnState("filter.state", fl.State); err != nil {
		return b, f, 0, err
	}
	if fl.Outcome != "" && !slices.Contains(kernel.AllOutcomes, fl.Outcome) {
		return b, f, 0, kernel.Errorf(kernel.Validation, "filter.outcome must be one of %s; not %q", strings.Join(kernel.AllOutcomes, ", "), fl.Outcome)
	}
	if fl.TargetAgentID != "" && !kernel.ValidID(fl.TargetAgentID) {
		return b, f, 0, kernel.Errorf(kernel.Validation, "filter.target_agent_id %q must be 1 to 128 letters, digits, '_' or '-'", fl.TargetAgentID)
	}
	if fl.Tag != "" {
		if err := kernel.CheckTag("filter.tag", fl.Tag); err != nil {
			return b, f, 0, err
		}
		f.Tags = []string{fl.Tag}
	}
	if err := textFieldLen("reason", b.Reason, kernel.MaxTextLen); err != nil {
		return b, f, 0, err
	}
	f.State, f.TargetAgentID, f.TurnKind, f.Outcome, f.AwaitingInputOnly = fl.State, fl.TargetAgentID, fl.TurnKind, fl.Outcome, fl.AwaitingInput
	return b, f, limit, nil
}

func textFieldLen(name, v string, max int) error {
	if len(v) > max {
		return kernel.Errorf(kernel.Validation, "%s must be at most %d bytes", name, max)
	}
	return nil
}

// bulkCommon is the command's common part, the reason in its meta.
func bulkCommon(c *call, b bulkBody) kernel.Common {
	meta := b.Meta
	if b.Reason != "" && (meta == nil || meta.Reason == "") {
		m := kernel.Meta{Reason: b.Reason}
		if meta != nil {
			m = *meta
			m.Reason = b.Reason
		}
		meta = &m
	}
	return c.common(meta, b.Trace)
}

// matching walks the Turn list of f, oldest dispatch first, and returns up
// to limit Turns that keep says to take, and whether more remain.
func (s *Server) matching(c *call, f projection.TurnFilter, limit int, keep func([]projection.TurnView) ([]string, error)) ([]string, bool, error) {
	var out []string
	for {
		pg, err := s.store.TurnsPage(c.project, f, projection.MaxLimit)
		if err != nil {
			return nil, false, err
		}
		ids, err := keep(pg.Items)
		if err != nil {
			return nil, false, err
		}
		for _, id := range ids {
			if len(out) == limit {
				return out, true, nil
			}
			out = append(out, id)
		}
		if !pg.HasMore {
			return out, false, nil
		}
		f.AfterSeq = pg.NextAfterSeq
	}
}

// bulkStop stops the Turns not finished that match the filter, oldest
// first, up to limit (kernel.BulkStop); calling it again goes on.
func (s *Server) bulkStop(w http.ResponseWriter, c *call) error {
	b, f, limit, err := s.bulk(c)
	if err != nil {
		return err
	}
	if f.State == kernel.StateFinished || f.Outcome != "" {
		return kernel.Errorf(kernel.Validation, "bulk-stop stops Turns not finished: filter.state finished and filter.outcome match none")
	}
	if err := s.caughtUp(c); err != nil {
		return err
	}
	ids, more, err := s.matching(c, f, limit, func(items []projection.TurnView) ([]string, error) {
		var ids []string
		for _, v := range items {
			if stoppable(v) {
				ids = append(ids, v.TurnID)
			}
		}
		return ids, nil
	})
	if err != nil {
		return err
	}
	stopped, seq, err := s.engine.BulkStop(c.ctx, c.project, kernel.BulkStop{Common: bulkCommon(c, b), TurnIDs: ids, RequestedBy: b.RequestedBy})
	if err != nil {
		return err
	}
	if err := s.wait(c.ctx, seq); err != nil {
		return err
	}
	if len(stopped) < len(ids) || c.idemKey != "" {
		// Turns finished meanwhile, or a retry answered from memory: look
		// again whether any remain.
		_, more, err = s.matching(c, f, 0, func(items []projection.TurnView) ([]string, error) {
			for _, v := range items {
				if stoppable(v) {
					return []string{v.TurnID}, nil
				}
			}
			return nil, nil
		})
		if err != nil {
			return err
		}
	}
	if stopped == nil {
		stopped = []string{}
	}
	return s.ok(w, bulkStopResult{Stopped: stopped, HasMore: more})
}

// bulkRetry retries the finished Turns that match the filter and that
// :retry accepts, oldest first, up to limit (kernel.BulkRetry), and answers
// the new Turns' ids; calling it again goes on.
func (s *Server) bulkRetry(w http.ResponseWriter, c *call) error {
	b, f, limit, err := s.bulk(c)
	if err != nil {
		return err
	}
	if f.State != "" && f.State != kernel.StateFinished || f.Outcome != "" && !kernel.Retryable(f.Outcome) {
		return kernel.Errorf(kernel.Validation, "bulk-retry retries finished Turns whose outcome is failed, dead, expired, timed_out or stopped")
	}
	f.State = kernel.StateFinished
	if err := s.caughtUp(c); err != nil {
		return err
	}
	retryable := func(items []projection.TurnView) ([]string, error) {
		ids := make([]string, 0, len(items))
		for _, v := range items {
			ids = append(ids, v.TurnID)
		}
		return s.engine.RetryableOf(c.ctx, c.project, ids)
	}
	ids, more, err := s.matching(c, f, limit, retryable)
	if err != nil {
		return err
	}
	retried, seq, err := s.engine.BulkRetry(c.ctx, c.project, bulkCommon(c, b), b.RequestedBy, ids)
	if err != nil {
		return err
	}
	if err := s.wait(c.ctx, seq); err != nil {
		return err
	}
	if c.idemKey != "" || len(retried) < len(ids) {
		if _, more, err = s.matching(c, f, 0, retryable); err != nil {
			return err
		}
	}
	if retried == nil {
		retried = []string{}
	}
	return s.ok(w, bulkRetryResult{Retried: retried, HasMore: more})
}

// stoppable reports whether bulk-stop acts on the Turn: not finished, and
// not already asked to stop (its holder will).
func stoppable(v projection.TurnView) bool {
	return v.State != kernel.StateFinished && !(v.State == kernel.StateClaimed && v.StopRequested)
}

type bulkStopResult struct {
	Stopped []string `json:"stopped"`
	HasMore bool     `json:"has_more"`
}

type bulkRetryResult struct {
	Retried []string `json:"retried"`
	HasMore bool     `json:"has_more"`
}

// releaseClaim hands a live claim back (kernel.ReleaseClaim) and answers
// with the Turn, back in its queue.
func (s *Server) releaseClaim(w http.ResponseWriter, c *call) error {
	var b fencedBody
	if err := s.decode(c, &b, false); err != nil {
		return err
	}
	res, err := s.engine.Fenced(c.ctx, c.project, kernel.ReleaseClaim{Common: c.common(b.Meta, b.Trace), Claim: b.Claim})
	if err != nil {
		return err
	}
	return s.turnAfter(w, c, res.Seq, b.Claim.TurnID, res.Turn)
}
