// Package client is the Go client of the turnledger coordination API. It
// uses the standard library only and imports no server package, so a
// program that uses it gets no server dependencies.
//
// A Client is made by New with the base URL and the credentials it sends:
// an agent's three headers (WithAgent) or the admin bearer (WithAdminToken).
// It has one method per route of the API, named after the route's OpenAPI
// operationId, with ctx first; request and response types mirror the JSON
// of the OpenAPI document (GET /openapi.json). A refused request returns an
// *Error carrying the HTTP status and the service's error name and message:
//
//	t, err := c.GetTurn(ctx, "demo", id)
//	var ce *client.Error
//	if errors.As(err, &ce) && ce.Status == 404 { ... }
//	if errors.Is(err, client.ErrNotFound) { ... } // the same, by error name
//
// A mutating call made with a ctx from WithIdempotencyKey sends the key as
// the Idempotency-Key header, so that it is safe to retry (Retryable says
// when a retry can help).
//
// Beyond the routes: ClaimTurn long-polls (wait), a Worker claims Turns and
// runs a handler with automatic claim renewal, cancellation and graceful
// shutdown (its claims, renewals, records and finishes are retried with
// their Idempotency-Key; a claim refused for good, such as a revoked
// credential's 401, ends Worker.Run with that *Error), and Follow iterates
// over a feed through its event stream, reconnecting from the last
// ledger_seq seen.
//
// # Registering an agent and getting its token
//
// An agent's program authenticates with three things: its project, its
// agent id and a credential token (WithAgent). The token is shown once,
// when it is made; the service keeps only its hash. It is made in one of
// three ways, each by someone other than the program, who hands it over
// (examples/worker reads it from TURNLEDGER_AGENT_TOKEN):
//
//   - The operator, with the admin token (data/admin-token of serve),
//     bootstraps the agent in one call: RequestAgentCredentialTokens
//     registers it when it is new (with the spec given, or the defaults)
//     and answers a fresh token in CredentialMaterial.AgentCredentialToken
//     (the same with curl is in docs/client.md).
//   - An agent already registered (RegisterAgent, by the admin or an agent
//     with the agents:register grant) gets a token from IssueCredential,
//     asked by the admin or by an agent with the credentials:issue grant;
//     IssuedCredential.Token holds it.
//   - The operator creates a join invite (CreateJoinInvite), whose one-time
//     join code travels to the program; the program redeems it with
//     RedeemJoin on a client made without credentials, which registers the
//     agent from the invite's spec and answers its token.
//
// The first way, from the operator's side and then the agent's:
//
//	adm, _ := client.New(url, client.WithAdminToken(adminToken))
//	mat, err := adm.RequestAgentCredentialTokens(ctx, "demo", client.TokensRequest{
//		AgentID: "writer",
//		Spec:    &client.AgentSpec{Capabilities: []string{"summarize"}, Capacity: new(2)},
//	})
//	// … hand mat.AgentCredentialToken to the agent's program, which makes:
//	w, _ := client.New(url, client.WithAgent("demo", "writer", mat.AgentCredentialToken))
//
// A token expires (Credential.ExpiresAt) and can be revoked
// (RevokeCredential); ListCredentials shows an agent's credentials without
// their tokens. RegisterRequest, TokensRequest and InviteRequest take the
// one spec shape, AgentSpec; RegisterRequest also says where the
// registration came from (Provenance, whose kinds are listed with it).
//
// # Scheduling
//
// A DispatchRequest may carry a schedule; every field is optional and a nil
// one is not sent (docs/scheduling.md says more):
//
//	prio, tries := 1, 5
//	deadline := time.Now().Add(10 * time.Minute)
//	t, err := c.DispatchTurn(ctx, "demo", client.DispatchRequest{
//		// ... requested_by, target, input, kind, key, authority ...
//		Priority:     &prio,     // 1 runs first, 5 last; default 3
//		Deadline:     &deadline, // not finished then: outcome timed_out
//		MaxAttempts:  &tries,    // claims allowed; default no limit
//		RetryBackoff: &client.Backoff{InitialS: 2, Factor: 3, MaxS: 120},
//	})
//
// NotBefore keeps the Turn from being claimed before a time, and ClaimBy
// ends a Turn still never claimed at that time with outcome expired. A
// claim that expires on the last of MaxAttempts ends the Turn as dead. The
// Turn snapshot shows the schedule back (Priority, NotBefore, ClaimBy,
// Deadline, MaxAttempts, RetryBackoff) and RetryOf.
//
// A handler asks for another attempt by returning RetryLater(err): the
// Worker finishes the Turn as failed with FinishRequest.Retry, and the
// service queues it again once its backoff has passed (NotBefore shows
// when), or ends it with outcome dead when MaxAttempts are spent. Any other
// error fails the Turn for good:
//
//	func(ctx context.Context, job *client.Job) (client.Result, error) {
//		if err := callModel(ctx); errors.Is(err, errRateLimited) {
//			return client.Result{}, client.RetryLater(err)
//		}
//		...
//	}
//
// RetryTurn dispatches a new Turn from a finished one that failed, died,
// expired, timed out or was stopped; a Turn is retried once (a second
// RetryTurn is a 409, ErrConflict).
//
// # Waiting for people
//
// A handler that needs an answer from a person suspends its Turn with
// Job.AwaitInput (SuspendTurnForInput outside a Worker), which returns the
// input token and URL once. The handler hands them to the person (a chat
// message, an e-mail, a form) and returns: the Worker neither renews nor
// finishes a Turn that waits for input. The answer queues the Turn again,
// and it comes back to a handler through a claim with the answer in its
// context (role "input"; Job.LatestInput reads it):
//
//	func(ctx context.Context, job *client.Job) (client.Result, error) {
//		answer, err := job.LatestInput(ctx)
//		if err != nil {
//			return client.Result{}, err
//		}
//		if answer == nil {
//			wait, err := job.AwaitInput(ctx, "Approve the refund?", schema, nil)
//			if err != nil {
//				return client.Result{}, err
//			}
//			return client.Result{}, notify(ctx, wait.InputURL, wait.InputToken)
//		}
//		... // answer is the JSON object the person sent
//	}
//
// Whoever holds the token answers with ProvideInputWithToken(ctx, url,
// token, input), which sends no other credential; the Turn's requester, an
// agent with the management grant or the admin answer with
// ProvideTurnInput. ListTurns with TurnQuery.AwaitingInput lists what waits.
//
// # Trees, tags and bulk actions
//
// StopTurnTree stops a Turn and every descendant not finished, all or none.
// DispatchRequest.Tags labels a Turn (TurnQuery.Tags filters the list by
// them). BulkStopTurns and BulkRetryTurns act on the Turns a BulkFilter
// matches, at most Limit a call, oldest first; HasMore says to call again.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Client calls the coordination API. It is safe for concurrent use.
type Client struct {
	base    string
	http    *http.Client
	project string // agent credentials: the three headers
	agent   string
	token   string
	admin   string // the admin bearer, when no agent credentials
	// inputToken, set by ProvideInputWithToken only, is sent alone.
	inputToken string
	ua         string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the http.Client requests go through (default
// http.DefaultClient). Do not give it a Timeout shorter than the longest
// long-poll wait or stream you use; bound calls with their ctx instead.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithAgent makes the client authenticate as an agent: X-Svc-Project-Id,
// X-Svc-Agent-Id and Authorization: Bearer <token>.
func WithAgent(project, agent, token string) Option {
	return func(c *Client) { c.project, c.agent, c.token = project, agent, token }
}

// WithAdminToken makes the client authenticate with the admin bearer.
func WithAdminToken(token string) Option { return func(c *Client) { c.admin = token } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// New returns a client of the API at baseURL (e.g. http://127.0.0.1:8000).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q must be an absolute http or https URL", baseURL)
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), http: http.DefaultClient, ua: "turnledger-go-client"}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Agent returns the project and agent the client authenticates as (empty
// for an admin client).
func (c *Client) Agent() (project, agent string) { return c.project, c.agent }

// newRequest builds a request with the client's credentials.
func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		var b []byte
		switch v := body.(type) {
		case json.RawMessage:
			b = v
		default:
			var err error
			if b, err = json.Marshal(body); err != nil {
				return nil, fmt.Errorf("client: encode %s %s: %w", method, path, err)
			}
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.ua != "" {
		req.Header.Set("User-Agent", c.ua)
	}
	setIdempotencyKey(ctx, req)
	switch {
	case c.inputToken != "":
		req.Header.Set("Authorization", "Bearer "+c.inputToken)
	case c.agent != "":
		req.Header.Set("X-Svc-Project-Id", c.project)
		req.Header.Set("X-Svc-Agent-Id", c.agent)
		req.Header.Set("Authorization", "Bearer "+c.token)
	case c.admin != "":
		req.Header.Set("Authorization", "Bearer "+c.admin)
	}
	return req, nil
}

// do sends a request and decodes a 200 answer into out (when not nil). It
// reports whether the body was JSON null.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) (null bool, err error) {
	req, err := c.newRequest(ctx, method, path, q, body)
	if err != nil {
		return false, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := readBody(resp)
	if err != nil {
		return false, fmt.Errorf("client: %s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, errorFrom(resp.StatusCode, resp.Header, data)
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return true, nil
	}
	if out == nil {
		return false, nil
	}
	if err := decode(data, out); err != nil {
		return false, fmt.Errorf("client: %s %s: decode response: %w", method, path, err)
	}
	return false, nil
}

// readBody reads a response's body into a buffer of its Content-Length,
// when the server sent one within reason, instead of growing one as
// io.ReadAll does (a feed page of 100 is about 50 KiB).
func readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= 16<<20 {
		data := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return nil, err
		}
		return data, nil
	}
	return io.ReadAll(resp.Body)
}

// decode decodes a response by the v1 API of encoding/json's v2
// implementation (github.com/go-json-experiment/json/v1: encoding/json's
// semantics in one pass over the input, about half the time for a page of
// feed items); a body it refuses is decoded again by encoding/json, whose
// error the client reports.
func decode(data []byte, out any) error {
	if jsonv1.Unmarshal(data, out) == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// projectPath is /v3r1/projects/{project} followed by the parts, each
// path-escaped.
func projectPath(project string, parts ...string) string {
	var b strings.Builder
	b.WriteString("/v3r1/projects/")
	b.WriteString(url.PathEscape(project))
	for _, p := range parts {
		b.WriteString(p)
	}
	return b.String()
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }
