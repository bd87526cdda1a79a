package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
)

// apiDoc validates responses against the OpenAPI document.
type apiDoc struct {
	c     *jsonschema.Compiler
	paths []docPath
	seen  map[string]bool // operations whose 200 was validated
}

type docPath struct {
	template string
	re       *regexp.Regexp
	methods  map[string]string // method → operationId
}

func loadDoc(t *testing.T) *apiDoc {
	t.Helper()
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(httpapi.OpenAPI()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", raw); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	json.Unmarshal(httpapi.OpenAPI(), &doc)
	d := &apiDoc{c: c, seen: map[string]bool{}}
	param := regexp.MustCompile(`\\\{[a-z_]+\\\}`)
	for tmpl, item := range doc.Paths {
		re := "^" + param.ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/:]+`) + "$"
		dp := docPath{template: tmpl, re: regexp.MustCompile(re), methods: map[string]string{}}
		for method, op := range item {
			dp.methods[strings.ToUpper(method)] = op.OperationID
		}
		d.paths = append(d.paths, dp)
	}
	return d
}

func pointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// validate checks a response body against the document: a 200 against the
// operation's schema, any other status against ErrorBody.
func (d *apiDoc) validate(t *testing.T, method, rawPath string, status int, body []byte) {
	t.Helper()
	u, _ := url.Parse(rawPath)
	var match *docPath
	for i := range d.paths {
		if _, ok := d.paths[i].methods[method]; ok && d.paths[i].re.MatchString(u.Path) {
			if match != nil {
				t.Fatalf("%s %s matches two paths of the document: %s and %s", method, u.Path, match.template, d.paths[i].template)
			}
			match = &d.paths[i]
		}
	}
	if match == nil {
		t.Fatalf("%s %s is in no path of the document", method, u.Path)
	}
	loc := "openapi.json#/components/schemas/ErrorBody"
	if status == 200 {
		loc = "openapi.json#/paths/" + url.PathEscape(pointer(match.template)) + "/" + strings.ToLower(method) + "/responses/200/content/application~1json/schema"
		d.seen[match.methods[method]] = true
	}
	sch, err := d.c.Compile(loc)
	if err != nil {
		t.Fatalf("compile %s: %v", loc, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s answered %d with a body that is not JSON: %s", method, rawPath, status, body)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s %s = %d %s\ndoes not match the document (%s): %v", method, rawPath, status, body, match.methods[method], err)
	}
}

// validateRequest checks a request body the lifecycle sends against the
// operation's request schema, so the document's request schemas accept
// what the server accepts.
func (d *apiDoc) validateRequest(t *testing.T, method, rawPath string, body any) {
	t.Helper()
	u, _ := url.Parse(rawPath)
	for _, dp := range d.paths {
		if _, ok := dp.methods[method]; !ok || !dp.re.MatchString(u.Path) {
			continue
		}
		loc := "openapi.json#/paths/" + url.PathEscape(pointer(dp.template)) + "/" + strings.ToLower(method) + "/requestBody/content/application~1json/schema"
		sch, err := d.c.Compile(loc)
		if err != nil {
			t.Fatalf("%s %s sends a body but the document has no request schema: %v", method, u.Path, err)
		}
		raw, _ := json.Marshal(body)
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err := sch.Validate(inst); err != nil {
			t.Errorf("request %s %s %s\ndoes not match the document: %v", method, u.Path, raw, err)
		}
		return
	}
}

// TestOpenAPIValidatesLifecycle runs every route through a lifecycle and
// validates each request body and each response against the document's
// schemas.
func TestOpenAPIValidatesLifecycle(t *testing.T) {
	e := newEnvOn(t, natstest.Start(t).ClientURL(), &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}, withKnownTrends)
	d := loadDoc(t)
	call := func(who as, method, path string, body any, want int) response {
		t.Helper()
		if body != nil && want == 200 {
			d.validateRequest(t, method, path, body)
		}
		r := e.must(who, method, path, body, want)
		d.validate(t, method, path, r.status, r.body)
		return r
	}
	boss := e.register("p", "boss", 2, kernel.GrantDispatch, kernel.GrantManage, kernel.GrantRead)
	w := e.register("p", "w", 2)
	const p = "/v3r1/projects/p"

	call(asNobody, "GET", "/healthz", nil, 200)
	call(asNobody, "GET", "/readyz", nil, 200)
	call(asNobody, "GET", "/openapi.json", nil, 200)
	call(asNobody, "GET", "/metrics", nil, 404)
	call(asAdmin, "POST", p+"/agents:register", map[string]any{
		"spec": map[string]any{"agent_id": "x", "role": "worker", "description": "", "enabled": true, "accepts_work": true,
			"capacity": 1, "capabilities": []string{"summarize"}, "grants": []string{}, "public_metadata": map[string]any{}},
		"provenance": map[string]any{"kind": "test", "external_ref": "", "payload_hash": nil}, "meta": nil, "trace": nil,
	}, 200)
	var issued struct {
		Credential struct {
			CredentialID string `json:"credential_id"`
		} `json:"credential"`
	}
	call(asAdmin, "POST", p+"/agents/x/credentials:issue", nil, 200).decode(t, &issued)
	call(w, "GET", p+"/agents/w/credentials", nil, 200)
	call(asAdmin, "POST", p+"/agents/x/credentials/"+issued.Credential.CredentialID+":revoke", nil, 200)
	call(w, "GET", p+"/agents/w", nil, 200)
	call(w, "POST", p+"/agents/w/work-memory-reports", map[string]any{
		"kind": "agent_work_memory_report_manifest.v1", "request_id": "wm-1", "summary": "s",
		"records":       []any{map[string]any{"role": "observation", "payload": map[string]any{"a": 1}, "source_refs": []any{}}},
		"final_payload": nil, "declared_project_id": "p", "declared_agent_id": "w",
	}, 200)
	adm := map[string]any{"agent": ref("p", "w"), "requested_by": ref("p", "boss")}
	call(boss, "POST", p+"/management/agents/w:drain", adm, 200)
	call(boss, "POST", p+"/management/agents/w:resume", adm, 200)
	call(w, "POST", p+"/management/agents/w:heartbeat-presence", nil, 200)
	call(boss, "PUT", p+"/management/agents/w/public-metadata", map[string]any{"team": "a"}, 200)

	call(w, "POST", p+"/agents/w/claims:claim", map[string]any{"agent": ref("p", "w")}, 200) // null
	var tv turn
	call(boss, "POST", p+"/turns:dispatch", dispatchBody("p", "boss", "w", "k1", map[string]any{"q": 1}), 200).decode(t, &tv)
	call(w, "GET", p+"/turns/"+tv.TurnID, nil, 200)
	var c claimed
	call(w, "POST", p+"/agents/w/claims:claim?wait=1s", map[string]any{"agent": ref("p", "w"), "meta": map[string]any{"note": "n"}, "trace": map[string]any{"trace_id": "t"}}, 200).decode(t, &c)
	call(w, "POST", p+"/claims:renew", map[string]any{"claim": c.Claim}, 200)
	call(w, "POST", p+"/claims:release", map[string]any{"claim": c.Claim}, 200)
	call(w, "POST", p+"/agents/w/claims:claim", map[string]any{"agent": ref("p", "w"), "lease_s": 30}, 200).decode(t, &c)
	call(w, "POST", p+"/turns/"+tv.TurnID+"/semantic-records", map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{"x": 1}}, 200)
	call(w, "GET", p+"/turns/"+tv.TurnID+"/context", nil, 200)
	call(w, "GET", p+"/turns/"+tv.TurnID+"/feed?limit=2", nil, 200)
	child := dispatchBody("p", "w", "w", "child", map[string]any{})
	child["authority"] = map[string]any{"mode": "child_derivation", "parent_claim": c.Claim}
	var kid turn
	call(w, "POST", p+"/turns:dispatch", child, 200).decode(t, &kid)
	call(w, "GET", p+"/projection/turns/"+kid.TurnID+"/lineage", nil, 200)
	call(w, "POST", p+"/turns/"+tv.TurnID+":suspend", map[string]any{"claim": c.Claim}, 200)
	call(boss, "POST", p+"/turns/"+tv.TurnID+":resume", map[string]any{"requested_by": ref("p", "boss")}, 200)
	call(w, "POST", p+"/agents/w/claims:claim", map[string]any{"agent": ref("p", "w")}, 200).decode(t, &c)
	call(boss, "POST", p+"/management/turns/"+c.Turn.TurnID+":stop", map[string]any{"requested_by": ref("p", "boss")}, 200)
	call(w, "POST", p+"/turns/"+c.Turn.TurnID+":finish", map[string]any{"claim": c.Claim, "outcome": "succeeded", "final_payload": map[string]any{"ok": true}, "final_record_role": "final"}, 200)
	call(w, "POST", p+"/agents/w/claims:claim", map[string]any{"agent": ref("p", "w")}, 200).decode(t, &c)
	var waiting struct {
		InputToken string `json:"input_token"`
	}
	call(w, "POST", p+"/turns/"+c.Turn.TurnID+":suspend", map[string]any{"claim": c.Claim, "awaiting_input": map[string]any{"prompt": "ok?", "schema": nil, "input_by": nil}}, 200).decode(t, &waiting)
	call(as{project: "p", token: waiting.InputToken}, "POST", p+"/turns/"+c.Turn.TurnID+":provide-input", map[string]any{"input": map[string]any{"ok": true}}, 200)
	call(w, "POST", p+"/agents/w/claims:claim", map[string]any{"agent": ref("p", "w")}, 200).decode(t, &c)
	call(w, "POST", p+"/turns/"+c.Turn.TurnID+":finish", map[string]any{"claim": c.Claim, "outcome": "failed"}, 200)
	call(asAdmin, "POST", p+"/turns/"+c.Turn.TurnID+":retry", map[string]any{"requested_by": ref("p", "boss")}, 200)
	call(asAdmin, "POST", p+"/management/turns:bulk-stop", map[string]any{"requested_by": ref("p", "boss"), "filter": map[string]any{"state": "queued"}, "limit": 5}, 200)
	call(asAdmin, "POST", p+"/management/turns:bulk-retry", map[string]any{"requested_by": ref("p", "boss"), "filter": map[string]any{}, "reason": "again"}, 200)
	call(w, "POST", p+"/claims:reconcile-expired", nil, 200)
	call(w, "GET", p+"/agents/w/feed", nil, 200)
	call(boss, "GET", p+"/projection/feed?after_ledger_seq=3&limit=5", nil, 200)
	call(boss, "GET", p+"/projection/agents?enabled_only=true", nil, 200)
	call(boss, "GET", p+"/projection/turn-offers?agent_id=w", nil, 200)
	call(boss, "GET", p+"/projection/turns?state=finished", nil, 200)

	call(asAdmin, "POST", "/admin/v1/projects/p/agent-credential-tokens:request", map[string]any{"agent_id": "boot"}, 200)
	var inv struct {
		JoinCode string `json:"join_code"`
	}
	invite := map[string]any{"agent_id": "j1", "profile_kind": "byoa", "runtime_kind": "go", "spec": map[string]any{"capacity": 1}}
	call(asAdmin, "POST", "/admin/v1/projects/p/agent-join-invites", invite, 200).decode(t, &inv)
	call(asNobody, "POST", "/admin/v1/agent-joins:redeem", map[string]any{"join_code": inv.JoinCode}, 200)
	invite["agent_id"] = "j2"
	call(asAdmin, "POST", "/admin/v1/projects/p/agent-join-invites", invite, 200).decode(t, &inv)
	call(asNobody, "POST", "/admin/v1/byoa/join:redeem", map[string]any{"join_code": inv.JoinCode}, 200)

	// Errors have the error body.
	call(asNobody, "GET", p+"/turns/"+tv.TurnID, nil, 401)
	call(w, "GET", p+"/projection/feed", nil, 403)
	call(asAdmin, "GET", p+"/turns/nope", nil, 404)
	call(asAdmin, "GET", "/admin/v1/projects", nil, 200)
	call(asAdmin, "GET", "/admin/v1/trends", nil, 200)
	call(w, "POST", p+"/turns/"+tv.TurnID+":finish", map[string]any{"claim": c.Claim, "outcome": "succeeded"}, 409)
	call(w, "POST", p+"/agents/w/claims:claim?wait=2m", map[string]any{"agent": ref("p", "w")}, 422)

	// Every operation answered 200 at least once, except /metrics, which
	// this server does not enable (see the metrics tests).
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	json.Unmarshal(httpapi.OpenAPI(), &doc)
	for _, item := range doc.Paths {
		for _, op := range item {
			if !d.seen[op.OperationID] && op.OperationID != "metrics" {
				t.Errorf("the lifecycle never validated a 200 of %s", op.OperationID)
			}
		}
	}
}

// TestOpenAPIServed: /openapi.json needs no credentials and is the document.
func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t)
	resp, err := http.Get(e.url + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, httpapi.OpenAPI()) {
		t.Errorf("GET /openapi.json = %d %s, want 200 application/json and the document", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
