package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/httpapi"
)

// TestWrongAuthorizationSchemeIsNamed: a Basic (or other) Authorization
// header is answered with what is wrong — the scheme — never as if no
// credentials had been sent; a token without a scheme is never echoed.
func TestWrongAuthorizationSchemeIsNamed(t *testing.T) {
	e := newEnv(t)
	w := e.register("p1", "worker", 1)
	const basic = "the Authorization scheme Basic is not accepted: send Authorization: Bearer <token>"
	const noForm = "the Authorization header is not of the form Bearer <token>"
	for _, tc := range []struct {
		name, method, path, auth string
		agent                    bool
		want                     string
	}{
		{"agent, Basic", "GET", "/v3r1/projects/p1/agents/worker", "Basic d29ya2VyOnNlY3JldA==", true, basic},
		{"admin, Basic", "GET", "/v3r1/projects/p1/agents/worker", "Basic YWRtaW46c2VjcmV0", false, basic},
		{"admin surface, Basic", "POST", "/admin/v1/projects/p1/agent-join-invites", "Basic YWRtaW46c2VjcmV0",
			false, basic + "; the admin surface requires Authorization: Bearer <admin token>"},
		{"agent, token without a scheme", "GET", "/v3r1/projects/p1/agents/worker", w.token, true, noForm},
		{"agent, Bearer without a token", "GET", "/v3r1/projects/p1/agents/worker", "Bearer", true, "the Authorization header has no token after Bearer"},
		{"admin surface, two headers", "POST", "/admin/v1/projects/p1/agent-join-invites", "Bearer " + adminToken + "|Bearer " + adminToken,
			false, "the Authorization header is given more than once; the admin surface requires Authorization: Bearer <admin token>"},
	} {
		req, err := http.NewRequest(tc.method, e.url+tc.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range strings.Split(tc.auth, "|") {
			req.Header.Add("Authorization", a)
		}
		if tc.agent {
			req.Header.Set(httpapi.HeaderProject, "p1")
			req.Header.Set(httpapi.HeaderAgent, "worker")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got map[string]string
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("%s: body %s: %v", tc.name, data, err)
		}
		want := map[string]string{"error": "UnauthorizedError", "message": tc.want}
		if resp.StatusCode != 401 || !cmp.Equal(got, want) {
			t.Errorf("%s: %s %s = %d %v, want 401 %v", tc.name, tc.method, tc.path, resp.StatusCode, got, want)
		}
		if strings.Contains(string(data), w.token) {
			t.Errorf("%s: the response echoes the token: %s", tc.name, data)
		}
	}
}
