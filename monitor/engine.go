package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Checks a turnledger connection runs: the "query" of a query on such a
// connection is one of these names.
const (
	EngineReady                = "ready"
	EngineLedgerHead           = "ledger_head"
	EngineProjectionLag        = "projection_lag"
	EngineExpiredClaims        = "expired_claims"
	EngineUnservedStopRequests = "unserved_stop_requests"
)

// EngineChecks lists the checks of a turnledger connection.
var EngineChecks = []string{EngineReady, EngineLedgerHead, EngineProjectionLag, EngineExpiredClaims, EngineUnservedStopRequests}

// engineTurnsLimit is the page size asked of the engine's Turn projection,
// and engineTurnsPages how many pages a check follows (with the engine's
// after_ledger_seq cursor) before it marks its result truncated.
const (
	engineTurnsLimit = 500
	engineTurnsPages = 200
)

// ParseEngineQuery reads the query of a turnledger connection: one of
// EngineChecks, and for unserved_stop_requests an optional "older_than=<d>"
// (a Go duration) that keeps only the stops asked at least that long ago.
func ParseEngineQuery(q string) (check string, olderThan time.Duration, err error) {
	fields := strings.Fields(q)
	if len(fields) == 0 || !slices.Contains(EngineChecks, fields[0]) {
		return "", 0, fmt.Errorf("query %q of a turnledger connection must be one of %s", q, strings.Join(EngineChecks, ", "))
	}
	check = fields[0]
	for _, f := range fields[1:] {
		v, ok := strings.CutPrefix(f, "older_than=")
		if !ok || check != EngineUnservedStopRequests {
			return "", 0, fmt.Errorf("query %q: %q is not an option of %s (only unserved_stop_requests takes older_than=<duration>)", q, f, check)
		}
		if olderThan, err = time.ParseDuration(v); err != nil || olderThan < 0 {
			return "", 0, fmt.Errorf("query %q: older_than must be a non-negative duration such as 60s", q)
		}
	}
	return check, olderThan, nil
}

// engineSource watches a turnledger engine through its public HTTP API only.
type engineSource struct {
	conf   ConnectionConfig
	base   string
	token  string
	client *http.Client
	now    func() time.Time
}

func newEngineSource(cc ConnectionConfig, secrets map[string]string, client *http.Client, now func() time.Time) *engineSource {
	return &engineSource{conf: cc, base: strings.TrimRight(cc.URL, "/"), token: secrets[cc.AdminTokenEnv], client: client, now: now}
}

func (s *engineSource) info() map[string]any {
	return map[string]any{"url": s.base, "projects": nonNil(s.conf.Projects), "admin_token_env": s.conf.AdminTokenEnv}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type readyz struct {
	Status  string `json:"status"`
	Backend struct {
		Kind       string `json:"kind"`
		Stream     string `json:"stream"`
		LedgerHead int64  `json:"ledger_head"`
		Error      string `json:"error"`
	} `json:"backend"`
	Projections struct {
		AppliedSeq int64  `json:"applied_seq"`
		Lag        int64  `json:"lag"`
		Failing    bool   `json:"failing"`
		LastError  string `json:"last_error"`
	} `json:"projections"`
	Reaper struct {
		Enabled  bool   `json:"enabled"`
		Interval string `json:"interval"`
	} `json:"reaper"`
}

// maxCauseLen bounds each cause an engine gives for not being ready, as
// quoted in a run's reason.
const maxCauseLen = 300

// notReady is the error of an engine that answers /readyz with 503: its
// status and the causes it reports (the ledger head cannot be read, the
// projector is failing).
func (r readyz) notReady() error {
	var causes []string
	if r.Backend.Error != "" {
		causes = append(causes, "ledger head: "+clip(r.Backend.Error))
	}
	if r.Projections.Failing {
		c := "projector failing"
		if r.Projections.LastError != "" {
			c += ": " + clip(r.Projections.LastError)
		}
		causes = append(causes, c)
	}
	msg := fmt.Sprintf("engine is not ready: status %q", r.Status)
	if len(causes) > 0 {
		msg += " (" + strings.Join(causes, "; ") + ")"
	}
	return errors.New(msg)
}

func clip(s string) string {
	if len(s) <= maxCauseLen {
		return s
	}
	cut := maxCauseLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

type turnSnapshot struct {
	TurnID        string `json:"turn_id"`
	State         string `json:"state"`
	StopRequested bool   `json:"stop_requested"`
	// StopRequestedAt is when the stop was asked (null from engines that do
	// not say).
	StopRequestedAt *time.Time `json:"stop_requested_at"`
	Claim           *struct {
		AgentID   string    `json:"agent_id"`
		ExpiresAt time.Time `json:"expires_at"`
	} `json:"claim"`
}

type turnPage struct {
	Items   []turnSnapshot `json:"items"`
	Next    uint64         `json:"next_after_ledger_seq"`
	HasMore bool           `json:"has_more"`
}

// get fetches path and decodes a JSON body into dst, for any status in ok.
func (s *engineSource) get(ctx context.Context, path string, auth bool, dst any, ok ...int) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return 0, err
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: read body: %w", path, err)
	}
	accepted := false
	for _, c := range ok {
		accepted = accepted || resp.StatusCode == c
	}
	if !accepted {
		var eb struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		msg := ""
		if json.Unmarshal(body, &eb) == nil && (eb.Error != "" || eb.Message != "") {
			msg = ": " + strings.TrimSpace(eb.Error+" "+eb.Message)
		}
		return resp.StatusCode, fmt.Errorf("GET %s: status %d%s", path, resp.StatusCode, msg)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: the body is not the expected JSON: %v", path, err)
	}
	return resp.StatusCode, nil
}

func (s *engineSource) readyz(ctx context.Context) (readyz, int, error) {
	var r readyz
	code, err := s.get(ctx, "/readyz", false, &r, http.StatusOK, http.StatusServiceUnavailable)
	return r, code, err
}

// turns reads the project's Turns that match filter, following the engine's
// cursor for at most engineTurnsPages pages; truncated says whether more
// were left.
func (s *engineSource) turns(ctx context.Context, project, filter string) (items []turnSnapshot, truncated bool, err error) {
	after := uint64(0)
	for page := 0; page < engineTurnsPages; page++ {
		var p turnPage
		path := fmt.Sprintf("/v3r1/projects/%s/projection/turns?%s&limit=%d", url.PathEscape(project), filter, engineTurnsLimit)
		if after > 0 {
			path += fmt.Sprintf("&after_ledger_seq=%d", after)
		}
		if _, err := s.get(ctx, path, true, &p, http.StatusOK); err != nil {
			return nil, false, err
		}
		items = append(items, p.Items...)
		if !p.HasMore || p.Next <= after {
			return items, false, nil
		}
		after = p.Next
	}
	return items, true, nil
}

func (s *engineSource) test(ctx context.Context) (map[string]any, error) {
	r, code, err := s.readyz(ctx)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, r.notReady()
	}
	details := map[string]any{"status": r.Status, "backend": r.Backend.Kind, "stream": r.Backend.Stream, "ledger_head": r.Backend.LedgerHead}
	if len(s.conf.Projects) == 0 {
		return details, nil
	}
	// The admin token is proved on every project. The engine answers an
	// empty list for a project it has never seen, so a project without a
	// registered agent (nothing can be dispatched in it: perhaps a misspelt
	// id) is named, without failing the test.
	empty := []string{}
	for _, project := range s.conf.Projects {
		var p struct {
			Items []json.RawMessage `json:"items"`
		}
		path := fmt.Sprintf("/v3r1/projects/%s/projection/agents?limit=1", url.PathEscape(project))
		if _, err := s.get(ctx, path, true, &p, http.StatusOK); err != nil {
			return nil, err
		}
		if len(p.Items) == 0 {
			empty = append(empty, project)
		}
	}
	details["projects_without_agents"] = empty
	return details, nil
}

func (s *engineSource) run(ctx context.Context, q string) (Result, error) {
	query, olderThan, err := ParseEngineQuery(q)
	if err != nil {
		return Result{}, err
	}
	switch query {
	case EngineReady, EngineLedgerHead, EngineProjectionLag:
		r, code, err := s.readyz(ctx)
		if err != nil {
			return Result{}, err
		}
		switch query {
		case EngineReady:
			if code != http.StatusOK {
				return Result{}, r.notReady()
			}
			return oneRow([]string{"status", "backend", "stream", "ledger_head", "applied_seq", "lag", "reaper_enabled"},
				r.Status, r.Backend.Kind, r.Backend.Stream, r.Backend.LedgerHead, r.Projections.AppliedSeq, r.Projections.Lag, r.Reaper.Enabled), nil
		case EngineLedgerHead:
			return oneRow([]string{"stream", "backend", "ledger_head"}, r.Backend.Stream, r.Backend.Kind, r.Backend.LedgerHead), nil
		default:
			return oneRow([]string{"ledger_head", "applied_seq", "lag"}, r.Backend.LedgerHead, r.Projections.AppliedSeq, r.Projections.Lag), nil
		}
	case EngineExpiredClaims:
		res := Result{Columns: []string{"project_id", "turn_id", "agent_id", "expires_at", "expired_seconds"}, Rows: []map[string]any{}}
		now := s.now()
		for _, p := range s.conf.Projects {
			items, truncated, err := s.turns(ctx, p, "state=claimed")
			if err != nil {
				return Result{}, err
			}
			for _, t := range items {
				if t.State != "claimed" || t.Claim == nil || !t.Claim.ExpiresAt.Before(now) {
					continue
				}
				res.Rows = append(res.Rows, map[string]any{
					"project_id": p, "turn_id": t.TurnID, "agent_id": t.Claim.AgentID,
					"expires_at":      t.Claim.ExpiresAt.UTC().Format(time.RFC3339Nano),
					"expired_seconds": now.Sub(t.Claim.ExpiresAt).Seconds(),
				})
			}
			res.Truncated = res.Truncated || truncated
		}
		res.RowCount = len(res.Rows)
		return res, nil
	case EngineUnservedStopRequests:
		res := Result{Columns: []string{"project_id", "turn_id", "state", "agent_id", "stop_requested_at", "pending_seconds"}, Rows: []map[string]any{}}
		now := s.now()
		for _, p := range s.conf.Projects {
			items, truncated, err := s.turns(ctx, p, "stop_requested_only=true")
			if err != nil {
				return Result{}, err
			}
			for _, t := range items {
				if !t.StopRequested || t.State == "finished" {
					continue
				}
				var at, pending any
				if t.StopRequestedAt != nil {
					at, pending = t.StopRequestedAt.UTC().Format(time.RFC3339Nano), now.Sub(*t.StopRequestedAt).Seconds()
					if now.Sub(*t.StopRequestedAt) < olderThan {
						continue
					}
				}
				agent := any(nil)
				if t.Claim != nil {
					agent = t.Claim.AgentID
				}
				res.Rows = append(res.Rows, map[string]any{"project_id": p, "turn_id": t.TurnID, "state": t.State, "agent_id": agent,
					"stop_requested_at": at, "pending_seconds": pending})
			}
			res.Truncated = res.Truncated || truncated
		}
		res.RowCount = len(res.Rows)
		return res, nil
	}
	return Result{}, fmt.Errorf("unknown turnledger check %q", query)
}

func oneRow(cols []string, vals ...any) Result {
	row := map[string]any{}
	for i, c := range cols {
		row[c] = vals[i]
	}
	return Result{Columns: cols, Rows: []map[string]any{row}, RowCount: 1}
}
