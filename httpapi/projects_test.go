package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAdminListProjects(t *testing.T) {
	e := newEnv(t)
	var empty struct {
		Items []struct {
			ProjectID string `json:"project_id"`
		} `json:"items"`
		Diagnostics []any `json:"diagnostics"`
	}
	e.must(asAdmin, http.MethodGet, "/admin/v1/projects", nil, http.StatusOK).decode(t, &empty)
	if empty.Items == nil || len(empty.Items) != 0 || empty.Diagnostics == nil {
		t.Errorf("GET /admin/v1/projects on a new ledger = %+v, want empty items and diagnostics arrays", empty)
	}

	w := e.register("zeta", "w", 1)
	e.register("alpha", "a", 1)
	e.register("mid-1", "m", 1)
	var got struct {
		Items []struct {
			ProjectID string `json:"project_id"`
		} `json:"items"`
	}
	e.must(asAdmin, http.MethodGet, "/admin/v1/projects", nil, http.StatusOK).decode(t, &got)
	var ids []string
	for _, it := range got.Items {
		ids = append(ids, it.ProjectID)
	}
	if diff := cmp.Diff([]string{"alpha", "mid-1", "zeta"}, ids); diff != "" {
		t.Errorf("project ids (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name      string
		who       as
		path      string
		status    int
		errorName string
	}{
		{"no bearer", asNobody, "/admin/v1/projects", http.StatusUnauthorized, "UnauthorizedError"},
		{"an agent", w, "/admin/v1/projects", http.StatusUnauthorized, "UnauthorizedError"},
		{"unknown query", asAdmin, "/admin/v1/projects?limit=5", http.StatusUnprocessableEntity, "ValidationError"},
	} {
		r := e.do(tc.who, http.MethodGet, tc.path, nil)
		if r.status != tc.status || r.errorName() != tc.errorName {
			t.Errorf("%s: GET %s = %d %s, want %d %s", tc.name, tc.path, r.status, r.body, tc.status, tc.errorName)
		}
	}
	if r := e.do(asAdmin, http.MethodPost, "/admin/v1/projects", nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /admin/v1/projects = %d %s, want 405", r.status, r.body)
	}
}
