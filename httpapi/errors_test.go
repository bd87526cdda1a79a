package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBadInput drives every kind of bad request at a live instance: each gets
// the documented status and error name, and nothing reaches the ledger.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	w := e.register("p1", "worker", 1)
	other := e.register("p2", "stranger", 1)
	tv := e.dispatch(req, "worker", "k1")
	c := e.claim(w)
	head, err := e.ledger.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	good := dispatchBody("p1", "req", "worker", "k2", map[string]any{})
	withField := func(k string, v any) map[string]any {
		b := map[string]any{}
		for kk, vv := range good {
			b[kk] = vv
		}
		b[k] = v
		return b
	}
	forged := c.Claim
	forged.Token = "tlc_guess"
	otherTurn := c.Claim
	otherTurn.ProjectID = "p2"
	noAuth := as{project: "p1", agent: "req"}
	badToken := as{project: "p1", agent: "req", token: "tla_wrong"}
	wrongHeader := as{project: "p2", agent: "req", token: req.token}
	cases := []struct {
		name    string
		who     as
		method  string
		path    string
		body    any
		status  int
		errName string
	}{
		{"no credentials", asNobody, "GET", "/v3r1/projects/p1/turns/" + tv.TurnID, nil, 401, "UnauthorizedError"},
		{"agent headers without bearer", noAuth, "GET", "/v3r1/projects/p1/turns/" + tv.TurnID, nil, 401, "UnauthorizedError"},
		{"wrong token", badToken, "GET", "/v3r1/projects/p1/turns/" + tv.TurnID, nil, 401, "UnauthorizedError"},
		{"credential of another project", as{project: "p1", agent: "stranger", token: other.token}, "GET", "/v3r1/projects/p1/projection/agents", nil, 401, "UnauthorizedError"},
		{"header project differs from path", wrongHeader, "GET", "/v3r1/projects/p1/projection/agents", nil, 403, "ForbiddenError"},
		{"body project differs from path", req, "POST", "/v3r1/projects/p1/turns:dispatch", withField("target_agent", ref("p2", "worker")), 403, "ForbiddenError"},
		{"requested_by someone else", req, "POST", "/v3r1/projects/p1/turns:dispatch", withField("requested_by", ref("p1", "worker")), 403, "ForbiddenError"},
		{"dispatch without grant", w, "POST", "/v3r1/projects/p1/turns:dispatch", dispatchBody("p1", "worker", "worker", "k3", map[string]any{}), 403, "ForbiddenError"},
		{"malformed json", req, "POST", "/v3r1/projects/p1/turns:dispatch", `{"requested_by":`, 422, "ValidationError"},
		{"empty body", req, "POST", "/v3r1/projects/p1/turns:dispatch", ``, 422, "ValidationError"},
		{"unknown field", req, "POST", "/v3r1/projects/p1/turns:dispatch", withField("colour", "blue"), 422, "ValidationError"},
		{"wrong type", req, "POST", "/v3r1/projects/p1/turns:dispatch", withField("turn_kind", 7), 422, "ValidationError"},
		{"input not an object", req, "POST", "/v3r1/projects/p1/turns:dispatch", withField("input", []int{1}), 422, "ValidationError"},
		{"missing dispatch_key", req, "POST", "/v3r1/projects/p1/turns:dispatch", withField("dispatch_key", ""), 422, "ValidationError"},
		{"trailing data", req, "POST", "/v3r1/projects/p1/turns:dispatch", `{} {}`, 422, "ValidationError"},
		{"oversized body", req, "POST", "/v3r1/projects/p1/turns:dispatch", `{"input":{"x":"` + strings.Repeat("a", 2<<20) + `"}}`, 413, "PayloadTooLargeError"},
		{"dotted project id", asAdmin, "GET", "/v3r1/projects/p.1/projection/turns", nil, 422, "ValidationError"},
		{"wildcard turn id", req, "GET", "/v3r1/projects/p1/turns/t*", nil, 422, "ValidationError"},
		{"space in agent id", asAdmin, "GET", "/v3r1/projects/p1/agents/a%20b", nil, 422, "ValidationError"},
		{"unknown turn", req, "GET", "/v3r1/projects/p1/turns/nope", nil, 404, "NotFoundError"},
		{"unknown agent", req, "GET", "/v3r1/projects/p1/agents/nope", nil, 404, "NotFoundError"},
		{"unknown route", req, "GET", "/v3r1/projects/p1/nothing", nil, 404, "NotFoundError"},
		{"unknown verb", req, "POST", "/v3r1/projects/p1/turns:explode", `{}`, 404, "NotFoundError"},
		{"wrong method", req, "DELETE", "/v3r1/projects/p1/turns/" + tv.TurnID, nil, 405, "MethodNotAllowedError"},
		{"forged claim", w, "POST", "/v3r1/projects/p1/claims:renew", map[string]any{"claim": forged}, 409, "FencingError"},
		{"claim of another project", w, "POST", "/v3r1/projects/p1/claims:renew", map[string]any{"claim": otherTurn}, 403, "ForbiddenError"},
		{"foreign claim holder", req, "POST", "/v3r1/projects/p1/turns/" + tv.TurnID + "/semantic-records", map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{}}, 409, "FencingError"},
		{"claim for another agent", req, "POST", "/v3r1/projects/p1/agents/worker/claims:claim", map[string]any{"agent": ref("p1", "worker")}, 403, "ForbiddenError"},
		{"claim body names another agent", w, "POST", "/v3r1/projects/p1/agents/worker/claims:claim", map[string]any{"agent": ref("p1", "req")}, 422, "ValidationError"},
		{"bad outcome", w, "POST", "/v3r1/projects/p1/turns/" + tv.TurnID + ":finish", map[string]any{"claim": c.Claim, "outcome": "meh", "final_payload": nil, "final_record_role": ""}, 422, "ValidationError"},
		{"bad role", w, "POST", "/v3r1/projects/p1/turns/" + tv.TurnID + "/semantic-records", map[string]any{"claim": c.Claim, "role": "a b", "payload": map[string]any{}}, 422, "ValidationError"},
		{"limit zero", req, "GET", "/v3r1/projects/p1/projection/turns?limit=0", nil, 422, "ValidationError"},
		{"limit too large", req, "GET", "/v3r1/projects/p1/projection/turns?limit=501", nil, 422, "ValidationError"},
		{"limit not a number", req, "GET", "/v3r1/projects/p1/projection/feed?limit=ten", nil, 422, "ValidationError"},
		{"negative cursor", req, "GET", "/v3r1/projects/p1/turns/" + tv.TurnID + "/feed?after_ledger_seq=-1", nil, 422, "ValidationError"},
		{"unknown query parameter", req, "GET", "/v3r1/projects/p1/projection/turns?sort=asc", nil, 422, "ValidationError"},
		{"bad flag", req, "GET", "/v3r1/projects/p1/projection/turns?stop_requested_only=maybe", nil, 422, "ValidationError"},
		{"bad state filter", req, "GET", "/v3r1/projects/p1/projection/turns?state=running", nil, 422, "ValidationError"},
		{"admin route without bearer", asNobody, "POST", "/admin/v1/projects/p1/agent-join-invites", `{}`, 401, "UnauthorizedError"},
		{"admin route with agent token", as{token: req.token, agent: "", project: ""}, "POST", "/admin/v1/projects/p1/agent-join-invites", `{}`, 401, "UnauthorizedError"},
		{"verb route with the wrong method", req, "GET", "/v3r1/projects/p1/turns:dispatch", nil, 405, "MethodNotAllowedError"},
		{"options", req, "OPTIONS", "/v3r1/projects/p1/turns/" + tv.TurnID, nil, 405, "MethodNotAllowedError"},
		{"escaped slash", req, "GET", "/v3r1/projects/p1/agents%2Fworker", nil, 404, "NotFoundError"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.who, tc.method, tc.path, tc.body)
			if r.status != tc.status || r.errorName() != tc.errName {
				t.Errorf("%s %s = %d %s, want %d %s", tc.method, tc.path, r.status, r.body, tc.status, tc.errName)
			}
		})
	}
	if after, _ := e.ledger.Head(t.Context()); after != head {
		t.Errorf("bad requests moved the ledger head from %d to %d", head, after)
	}
}

func TestLimitDefaultsAndBounds(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch", "projections:read")
	e.register("p1", "worker", 1)
	for i := 0; i < 60; i++ {
		e.dispatch(req, "worker", "k"+string(rune('A'+i)))
	}
	for _, tc := range []struct {
		query     string
		wantItems int
		wantLimit int
	}{
		{"", 50, 50},
		{"?limit=1", 1, 1},
		{"?limit=500", 60, 500},
	} {
		var page struct {
			Items []turn `json:"items"`
			Limit int    `json:"limit"`
		}
		e.must(req, "GET", "/v3r1/projects/p1/projection/turns"+tc.query, nil, http.StatusOK).decode(t, &page)
		if got := []int{len(page.Items), page.Limit}; !cmp.Equal(got, []int{tc.wantItems, tc.wantLimit}) {
			t.Errorf("projection/turns%s: items, limit = %v, want %d, %d", tc.query, got, tc.wantItems, tc.wantLimit)
		}
	}
	// Feed paging: after_ledger_seq walks the whole feed without repeats.
	seen := map[uint64]bool{}
	after := uint64(0)
	for pages := 0; pages < 20; pages++ {
		var page struct {
			Items []struct {
				LedgerSeq uint64 `json:"ledger_seq"`
			} `json:"items"`
			Next    uint64 `json:"next_after_ledger_seq"`
			HasMore bool   `json:"has_more"`
		}
		e.must(req, "GET", "/v3r1/projects/p1/projection/feed?limit=7&after_ledger_seq="+strconv.FormatUint(after, 10), nil, 200).decode(t, &page)
		for _, it := range page.Items {
			if seen[it.LedgerSeq] || it.LedgerSeq <= after {
				t.Fatalf("feed item %d repeated or out of order", it.LedgerSeq)
			}
			seen[it.LedgerSeq] = true
		}
		after = page.Next
		if !page.HasMore {
			break
		}
	}
	// 2 registrations, 2 credentials, 60 dispatches.
	if len(seen) != 64 {
		t.Errorf("paged through %d feed items, want 64", len(seen))
	}
}

// TestPayloadsOfMarkupCharacters: '<', '>' and '&' are stored as themselves,
// not escaped sixfold, so a payload within its bound always fits the ledger
// (it once grew past the NATS server's max_payload and answered 500).
func TestPayloadsOfMarkupCharacters(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1, "turns:dispatch")
	e.register("p1", "worker", 1)
	head, _ := e.ledger.Head(t.Context())
	// 256 KiB of '<' is within the payload bound and stored as is.
	// (Go's json.Marshal would escape them itself: write the body by hand.)
	body := `{"requested_by":{"project_id":"p1","agent_id":"req"},"target_agent":{"project_id":"p1","agent_id":"worker"},` +
		`"input":{"t":"` + strings.Repeat("<", 256*1024-20) + `"},"turn_kind":"summarize","dispatch_key":"lt",` +
		`"authority":{"mode":"root_request","request_id":"r"}}`
	r := e.do(req, "POST", "/v3r1/projects/p1/turns:dispatch", body)
	if r.status != 200 {
		t.Fatalf("dispatch of 256 KiB of '<' = %d %.200s, want 200", r.status, r.body)
	}
	if head2, _ := e.ledger.Head(t.Context()); head2 != head+1 {
		t.Errorf("ledger head moved from %d to %d, want +1", head, head2)
	}
}

func TestErrorsNameTheRequestedPathAndDuplicateHeadersAreRefused(t *testing.T) {
	e := newEnv(t)
	req := e.register("p1", "req", 1)
	r := e.do(req, "GET", "/v3r1/projects/p1/turns:dispatch", nil)
	if !strings.Contains(string(r.body), "/v3r1/projects/p1/turns:dispatch") {
		t.Errorf("405 message = %s, want it to name the path asked for", r.body)
	}
	hreq, _ := http.NewRequest("GET", e.url+"/v3r1/projects/p1/projection/agents", nil)
	hreq.Header.Set("X-Svc-Project-Id", "p1")
	hreq.Header.Set("X-Svc-Agent-Id", "req")
	hreq.Header.Add("Authorization", "Bearer "+req.token)
	hreq.Header.Add("Authorization", "Bearer tla_other")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("two Authorization headers = %d, want 401", resp.StatusCode)
	}
}
