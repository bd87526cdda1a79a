package httpapi

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRouteReferenceMatchesRouter checks docs/api.md against the route
// table: every route the router serves has exactly one line there, and every
// line names a route of the table.
func TestRouteReferenceMatchesRouter(t *testing.T) {
	table := tableRoutes()
	doc := referenceRoutes(t, "../docs/api.md")
	sort.Strings(table)
	sort.Strings(doc)
	if diff := cmp.Diff(table, doc); diff != "" {
		t.Errorf("routes of the table (-) and of docs/api.md (+) differ:\n%s", diff)
	}
}

// tableRoutes returns "METHOD /path/{param}" for every route of the table.
func tableRoutes() []string {
	var routes []string
	for _, rt := range new(Server).routes() {
		routes = append(routes, rt.method+" "+openAPIPath(rt.path))
	}
	return routes
}

// referenceRow is a table row of docs/api.md: | METHOD | `path` | ...
var referenceRow = regexp.MustCompile("^\\| (GET|POST|PUT|PATCH|DELETE) \\| `([^`]+)` \\|")

// referenceRoutes reads "METHOD /path/{param}" for every table row of the
// route reference, with its `P` prefix written out.
func referenceRoutes(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the route reference: %v", err)
	}
	var routes []string
	for _, line := range strings.Split(string(data), "\n") {
		m := referenceRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		p := m[2]
		if rest, ok := strings.CutPrefix(p, "P/"); ok {
			p = "/v3r1/projects/{project_id}/" + rest
		}
		routes = append(routes, m[1]+" "+p)
	}
	if len(routes) == 0 {
		t.Fatalf("%s has no route rows", path)
	}
	return routes
}

func TestDocPattern(t *testing.T) {
	for in, want := range map[string]string{
		"/healthz": "/healthz",
		"/v3r1/projects/:project_id/turns/:turn_id:resume":                              "/v3r1/projects/{project_id}/turns/{turn_id}:resume",
		"/v3r1/projects/:project_id/turns:dispatch":                                     "/v3r1/projects/{project_id}/turns:dispatch",
		"/v3r1/projects/:project_id/agents/:agent_id/credentials/:credential_id:revoke": "/v3r1/projects/{project_id}/agents/{agent_id}/credentials/{credential_id}:revoke",
	} {
		if got := openAPIPath(in); got != want {
			t.Errorf("openAPIPath(%q) = %q, want %q", in, got, want)
		}
	}
}
