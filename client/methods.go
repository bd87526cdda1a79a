package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// One method per route; each is named after the route's operationId.

// Healthz checks liveness.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, "GET", "/healthz", nil, nil, nil)
	return err
}

// Readyz returns the readiness report; a service that is not ready answers
// an *Error with status 503.
func (c *Client) Readyz(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	_, err := c.do(ctx, "GET", "/readyz", nil, nil, &out)
	return out, err
}

// OpenAPI returns the service's OpenAPI document.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	_, err := c.do(ctx, "GET", "/openapi.json", nil, nil, &out)
	return out, err
}

// Metrics returns the Prometheus exposition text of /metrics.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	req, err := c.newRequest(ctx, "GET", "/metrics", nil, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errorFrom(resp.StatusCode, resp.Header, data)
	}
	return string(data), nil
}

// Admin surface.

// RequestAgentCredentialTokens bootstraps an agent (admin).
func (c *Client) RequestAgentCredentialTokens(ctx context.Context, project string, r TokensRequest) (*CredentialMaterial, error) {
	var out CredentialMaterial
	_, err := c.do(ctx, "POST", "/admin/v1/projects/"+seg(project)+"/agent-credential-tokens:request", nil, r, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateJoinInvite creates a join invite (admin).
func (c *Client) CreateJoinInvite(ctx context.Context, project string, r InviteRequest) (*InviteCreated, error) {
	var out InviteCreated
	_, err := c.do(ctx, "POST", "/admin/v1/projects/"+seg(project)+"/agent-join-invites", nil, r, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// RedeemJoin redeems a join code (no credentials needed).
func (c *Client) RedeemJoin(ctx context.Context, joinCode string) (*CredentialMaterial, error) {
	var out CredentialMaterial
	_, err := c.do(ctx, "POST", "/admin/v1/agent-joins:redeem", nil, map[string]string{"join_code": joinCode}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// RedeemJoinByoa redeems a join code through the compatibility alias.
func (c *Client) RedeemJoinByoa(ctx context.Context, joinCode string) (*CredentialMaterial, error) {
	var out CredentialMaterial
	_, err := c.do(ctx, "POST", "/admin/v1/byoa/join:redeem", nil, map[string]string{"join_code": joinCode}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Agents and credentials.

// RegisterAgent registers an agent or replaces its spec.
func (c *Client) RegisterAgent(ctx context.Context, project string, r RegisterRequest) (*Agent, error) {
	if r.Provenance.Kind == "" {
		r.Provenance.Kind = ProvenanceClient
	}
	var out Agent
	_, err := c.do(ctx, "POST", projectPath(project, "/agents:register"), nil, r, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// IssueCredential issues a credential to an agent; the token is in the
// result, once.
func (c *Client) IssueCredential(ctx context.Context, project, agent string) (*IssuedCredential, error) {
	var out IssuedCredential
	_, err := c.do(ctx, "POST", projectPath(project, "/agents/", seg(agent), "/credentials:issue"), nil, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeCredential revokes a credential.
func (c *Client) RevokeCredential(ctx context.Context, project, agent, credentialID string) error {
	_, err := c.do(ctx, "POST", projectPath(project, "/agents/", seg(agent), "/credentials/", seg(credentialID), ":revoke"), nil, nil, nil)
	return err
}

// ListCredentials lists an agent's credentials.
func (c *Client) ListCredentials(ctx context.Context, project, agent string) (*CredentialList, error) {
	var out CredentialList
	_, err := c.do(ctx, "GET", projectPath(project, "/agents/", seg(agent), "/credentials"), nil, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetAgent returns the agent truth snapshot.
func (c *Client) GetAgent(ctx context.Context, project, agent string) (*Agent, error) {
	var out Agent
	_, err := c.do(ctx, "GET", projectPath(project, "/agents/", seg(agent)), nil, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SubmitWorkMemoryReport submits a work-memory report as the agent.
func (c *Client) SubmitWorkMemoryReport(ctx context.Context, project, agent string, r WorkMemoryReport) (*ReportResult, error) {
	if r.Kind == "" {
		r.Kind = "agent_work_memory_report_manifest.v1"
	}
	if r.Records == nil {
		r.Records = []WorkMemoryRecord{}
	}
	var out ReportResult
	_, err := c.do(ctx, "POST", projectPath(project, "/agents/", seg(agent), "/work-memory-reports"), nil, r, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) admission(ctx context.Context, project, agent, verb string, requestedBy AgentRef) (*Agent, error) {
	body := map[string]any{"agent": AgentRef{ProjectID: project, AgentID: agent}, "requested_by": requestedBy}
	var out Agent
	_, err := c.do(ctx, "POST", projectPath(project, "/management/agents/", seg(agent), ":"+verb), nil, body, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DrainAgent stops admitting new Turns to the agent.
func (c *Client) DrainAgent(ctx context.Context, project, agent string, requestedBy AgentRef) (*Agent, error) {
	return c.admission(ctx, project, agent, "drain", requestedBy)
}

// ResumeAgent admits new Turns to the agent again.
func (c *Client) ResumeAgent(ctx context.Context, project, agent string, requestedBy AgentRef) (*Agent, error) {
	return c.admission(ctx, project, agent, "resume", requestedBy)
}

// HeartbeatPresence records the agent's presence.
func (c *Client) HeartbeatPresence(ctx context.Context, project, agent string) (*Agent, error) {
	var out Agent
	body := map[string]any{"agent": AgentRef{ProjectID: project, AgentID: agent}}
	_, err := c.do(ctx, "POST", projectPath(project, "/management/agents/", seg(agent), ":heartbeat-presence"), nil, body, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ReplacePublicMetadata replaces the agent's public metadata (a JSON
// object).
func (c *Client) ReplacePublicMetadata(ctx context.Context, project, agent string, metadata any) (*Agent, error) {
	var out Agent
	_, err := c.do(ctx, "PUT", projectPath(project, "/management/agents/", seg(agent), "/public-metadata"), nil, metadata, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func feedQuery(q FeedQuery) url.Values {
	v := url.Values{}
	if q.AfterLedgerSeq > 0 {
		v.Set("after_ledger_seq", strconv.FormatUint(q.AfterLedgerSeq, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// AgentFeed returns a page of the agent's ledger feed.
func (c *Client) AgentFeed(ctx context.Context, project, agent string, q FeedQuery) (*Page[FeedItem], error) {
	var out Page[FeedItem]
	_, err := c.do(ctx, "GET", projectPath(project, "/agents/", seg(agent), "/feed"), feedQuery(q), nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Turns.

// DispatchTurn dispatches a root or child Turn. An empty project is the
// client's; an empty RequestedBy is the client's agent; a TargetAgent
// without a project is of the dispatch's project.
func (c *Client) DispatchTurn(ctx context.Context, project string, r DispatchRequest) (*Turn, error) {
	if project == "" {
		project = c.project
	}
	c.defaultRequester(&r.RequestedBy)
	if r.TargetAgent.ProjectID == "" {
		r.TargetAgent.ProjectID = project
	}
	if r.Input == nil {
		r.Input = map[string]any{}
	}
	var out Turn
	_, err := c.do(ctx, "POST", projectPath(project, "/turns:dispatch"), nil, r, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetTurn returns the Turn snapshot.
func (c *Client) GetTurn(ctx context.Context, project, turn string) (*Turn, error) {
	var out Turn
	_, err := c.do(ctx, "GET", projectPath(project, "/turns/", seg(turn)), nil, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// TurnContext returns a page of the Turn's semantic context after turn_seq
// after.
func (c *Client) TurnContext(ctx context.Context, project, turn string, after uint64, limit int) (*Page[ContextItem], error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after_turn_seq", strconv.FormatUint(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out Page[ContextItem]
	_, err := c.do(ctx, "GET", projectPath(project, "/turns/", seg(turn), "/context"), q, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// TurnFeed returns a page of the Turn's ledger feed.
func (c *Client) TurnFeed(ctx context.Context, project, turn string, q FeedQuery) (*Page[FeedItem], error) {
	var out Page[FeedItem]
	_, err := c.do(ctx, "GET", projectPath(project, "/turns/", seg(turn), "/feed"), feedQuery(q), nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// StopTurn requests a stop of the Turn.
func (c *Client) StopTurn(ctx context.Context, project, turn string, requestedBy AgentRef) (*Turn, error) {
	var out Turn
	_, err := c.do(ctx, "POST", projectPath(project, "/management/turns/", seg(turn), ":stop"), nil, map[string]any{"requested_by": requestedBy}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// StopTurnTree stops the Turn and every descendant not finished, each by
// its own event, all or none (a stop under a live claim is a stop request
// its holder sees), and returns the Turn. A tree of more than 1000 Turns
// not finished is an *Error with status 409, as is a child dispatched later
// under a Turn of the tree. requestedBy is who asks, as for StopTurn.
func (c *Client) StopTurnTree(ctx context.Context, project, turn string, requestedBy AgentRef) (*Turn, error) {
	var out Turn
	_, err := c.do(ctx, "POST", projectPath(project, "/management/turns/", seg(turn), ":stop"), nil, map[string]any{"requested_by": requestedBy, "cascade": true}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ProvideTurnInput answers a Turn suspended for input, as the client's
// credential: the Turn's requester, an agent with the management grant or
// the admin. input is encoded as a JSON object; it becomes a semantic
// record of the Turn with role "input", and the Turn goes back to its
// queue (the answer shows it queued). A Turn not awaiting input is an
// *Error with status 409. Whoever holds only the input token answers with
// ProvideInputWithToken.
func (c *Client) ProvideTurnInput(ctx context.Context, project, turnID string, input any) (*Turn, error) {
	var out Turn
	_, err := c.do(ctx, "POST", projectPath(project, "/turns/", seg(turnID), ":provide-input"), nil, map[string]any{"input": input}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// BulkStopTurns stops the Turns not finished that r.Filter matches, oldest
// dispatch first, at most r.Limit (a claimed Turn gets a stop request its
// holder sees), and says with HasMore whether more match: call again to go
// on. The filter may not ask for finished Turns or an outcome. The admin
// or an agent with the management grant may call it; r.RequestedBy left
// empty is the client's own agent.
func (c *Client) BulkStopTurns(ctx context.Context, project string, r BulkRequest) (*BulkStopResult, error) {
	c.defaultRequester(&r.RequestedBy)
	var out BulkStopResult
	_, err := c.do(ctx, "POST", projectPath(project, "/management/turns:bulk-stop"), nil, r, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// BulkRetryTurns retries the finished Turns that r.Filter matches and that
// RetryTurn would accept (outcome failed, dead, expired, timed_out or
// stopped, not retried yet, a target that admits work), oldest dispatch
// first, at most r.Limit, and returns the new Turns' ids; HasMore says
// whether more match. Who may call it is as for BulkStopTurns.
func (c *Client) BulkRetryTurns(ctx context.Context, project string, r BulkRequest) (*BulkRetryResult, error) {
	c.defaultRequester(&r.RequestedBy)
	var out BulkRetryResult
	_, err := c.do(ctx, "POST", projectPath(project, "/management/turns:bulk-retry"), nil, r, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// defaultRequester fills an empty requested_by with the client's agent.
func (c *Client) defaultRequester(r *AgentRef) {
	if *r == (AgentRef{}) && c.agent != "" {
		*r = AgentRef{ProjectID: c.project, AgentID: c.agent}
	}
}

// ResumeTurn resumes a suspended Turn.
func (c *Client) ResumeTurn(ctx context.Context, project, turn string, requestedBy AgentRef) (*Turn, error) {
	var out Turn
	_, err := c.do(ctx, "POST", projectPath(project, "/turns/", seg(turn), ":resume"), nil, map[string]any{"requested_by": requestedBy}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// RetryTurn dispatches a new Turn from a finished one whose outcome is
// failed, dead, expired, timed_out or stopped, and returns the new Turn
// (its RetryOf is turnID): the same target, kind, input, priority,
// MaxAttempts, backoff and lineage, a fresh attempt count; a ClaimBy or
// Deadline keeps its distance from the dispatch, a NotBefore is not
// repeated. A Turn is retried once: a second RetryTurn, like a retry of a
// Turn still running or succeeded, is an *Error with status 409
// (ErrConflict). Only the Turn's requester, an agent with the management
// grant or the admin may retry it; r.RequestedBy left empty is the
// client's own agent.
func (c *Client) RetryTurn(ctx context.Context, project, turnID string, r RetryRequest) (*Turn, error) {
	c.defaultRequester(&r.RequestedBy)
	var out Turn
	_, err := c.do(ctx, "POST", projectPath(project, "/turns/", seg(turnID), ":retry"), nil, r, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Claims.

// ClaimTurn claims the next Turn for the agent. With wait > 0 (at most a
// minute) the server holds the request until a Turn is available or the
// wait ends. It returns nil, nil when no Turn was available.
func (c *Client) ClaimTurn(ctx context.Context, project, agent string, wait time.Duration) (*ClaimResult, error) {
	var q url.Values
	if wait > 0 {
		q = url.Values{"wait": {wait.String()}}
	}
	var out ClaimResult
	null, err := c.do(ctx, "POST", projectPath(project, "/agents/", seg(agent), "/claims:claim"), q,
		map[string]any{"agent": AgentRef{ProjectID: project, AgentID: agent}}, &out)
	if err != nil || null {
		return nil, err
	}
	return &out, nil
}

// RenewClaim extends the claim by the server's claim TTL.
func (c *Client) RenewClaim(ctx context.Context, claim ClaimToken) (*RenewResult, error) {
	var out RenewResult
	_, err := c.do(ctx, "POST", projectPath(claim.ProjectID, "/claims:renew"), nil, map[string]any{"claim": claim}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ReleaseClaim hands a live claim back: the Turn goes back to its old place
// in the queue and the attempt does not count (a worker that stops
// gracefully); with a stop requested the Turn ends as stopped.
func (c *Client) ReleaseClaim(ctx context.Context, claim ClaimToken) (*Turn, error) {
	var out Turn
	if _, err := c.do(ctx, "POST", projectPath(claim.ProjectID, "/claims:release"), nil, map[string]any{"claim": claim}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReconcileExpiredClaims releases the project's expired claims.
func (c *Client) ReconcileExpiredClaims(ctx context.Context, project string) (*ReconcileResult, error) {
	var out ReconcileResult
	_, err := c.do(ctx, "POST", projectPath(project, "/claims:reconcile-expired"), nil, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// AppendSemanticRecord appends a record (payload encoded as a JSON object)
// under the claim.
func (c *Client) AppendSemanticRecord(ctx context.Context, claim ClaimToken, role string, payload any) (*RecordResult, error) {
	var out RecordResult
	_, err := c.do(ctx, "POST", projectPath(claim.ProjectID, "/turns/", seg(claim.TurnID), "/semantic-records"), nil,
		map[string]any{"claim": claim, "role": role, "payload": payload}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SuspendTurn suspends the claimed Turn.
func (c *Client) SuspendTurn(ctx context.Context, claim ClaimToken) (*Turn, error) {
	var out Turn
	_, err := c.do(ctx, "POST", projectPath(claim.ProjectID, "/turns/", seg(claim.TurnID), ":suspend"), nil, map[string]any{"claim": claim}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SuspendTurnForInput suspends the claimed Turn until someone answers
// wait: the Turn becomes suspended with AwaitingInput (prompt, schema,
// input_by; never the token) and the claim is released. The answer carries,
// this once, the input token and the URL that answer the wait: hand them
// to the person (or system) who should answer, who calls
// ProvideInputWithToken (or POSTs the URL with the token as the bearer).
// The Turn's requester, a management agent or the admin may answer too
// (ProvideTurnInput). Once answered, the Turn is queued again for its
// target, and the next claim reads the input in the Turn's context (a
// record with role "input"). Retried with its Idempotency-Key, the suspend
// answers the same token.
func (c *Client) SuspendTurnForInput(ctx context.Context, claim ClaimToken, wait InputWait) (*InputWaitResult, error) {
	var out InputWaitResult
	_, err := c.do(ctx, "POST", projectPath(claim.ProjectID, "/turns/", seg(claim.TurnID), ":suspend"), nil,
		map[string]any{"claim": claim, "awaiting_input": wait}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// FinishTurn finishes the claimed Turn.
func (c *Client) FinishTurn(ctx context.Context, claim ClaimToken, r FinishRequest) (*Turn, error) {
	body := struct {
		Claim ClaimToken `json:"claim"`
		FinishRequest
	}{claim, r}
	var out Turn
	_, err := c.do(ctx, "POST", projectPath(claim.ProjectID, "/turns/", seg(claim.TurnID), ":finish"), nil, body, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Projections.

func flag(v url.Values, name string, on bool) {
	if on {
		v.Set(name, "true")
	}
}

func str(v url.Values, name, s string) {
	if s != "" {
		v.Set(name, s)
	}
}

func limit(v url.Values, n int) {
	if n > 0 {
		v.Set("limit", strconv.Itoa(n))
	}
}

// ListAgents returns agent directory entries.
func (c *Client) ListAgents(ctx context.Context, project string, q AgentQuery) (*Page[Agent], error) {
	v := url.Values{}
	str(v, "agent_id", q.AgentID)
	flag(v, "enabled_only", q.EnabledOnly)
	flag(v, "accepts_work_only", q.AcceptsWorkOnly)
	str(v, "role", q.Role)
	str(v, "capability", q.Capability)
	limit(v, q.Limit)
	var out Page[Agent]
	_, err := c.do(ctx, "GET", projectPath(project, "/projection/agents"), v, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTurnOffers returns canonical Turn offers.
func (c *Client) ListTurnOffers(ctx context.Context, project string, q OfferQuery) (*Page[TurnOffer], error) {
	v := url.Values{}
	str(v, "turn_kind", q.TurnKind)
	str(v, "agent_id", q.AgentID)
	flag(v, "enabled_only", q.EnabledOnly)
	flag(v, "accepts_work_only", q.AcceptsWorkOnly)
	limit(v, q.Limit)
	var out Page[TurnOffer]
	_, err := c.do(ctx, "GET", projectPath(project, "/projection/turn-offers"), v, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTurns returns projected Turns in dispatch order.
func (c *Client) ListTurns(ctx context.Context, project string, q TurnQuery) (*Page[Turn], error) {
	v := url.Values{}
	str(v, "target_agent_id", q.TargetAgentID)
	str(v, "turn_kind", q.TurnKind)
	str(v, "state", q.State)
	str(v, "outcome", q.Outcome)
	if q.Priority != 0 {
		v.Set("priority", strconv.Itoa(q.Priority))
	}
	for _, tag := range q.Tags {
		v.Add("tag", tag)
	}
	str(v, "context_id", q.ContextID)
	flag(v, "awaiting_input", q.AwaitingInput)
	flag(v, "stop_requested_only", q.StopRequestedOnly)
	if q.NewestFirst {
		v.Set("order", "newest")
	}
	if q.AfterLedgerSeq > 0 {
		v.Set("after_ledger_seq", strconv.FormatUint(q.AfterLedgerSeq, 10))
	}
	limit(v, q.Limit)
	var out Page[Turn]
	_, err := c.do(ctx, "GET", projectPath(project, "/projection/turns"), v, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// TurnLineage returns the Turn's lineage.
func (c *Client) TurnLineage(ctx context.Context, project, turn string, n int) (*Page[LineageItem], error) {
	v := url.Values{}
	limit(v, n)
	var out Page[LineageItem]
	_, err := c.do(ctx, "GET", projectPath(project, "/projection/turns/", seg(turn), "/lineage"), v, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ProjectFeed returns a page of the project's ledger feed.
func (c *Client) ProjectFeed(ctx context.Context, project string, q FeedQuery) (*Page[FeedItem], error) {
	var out Page[FeedItem]
	_, err := c.do(ctx, "GET", projectPath(project, "/projection/feed"), feedQuery(q), nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}
