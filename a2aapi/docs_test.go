package a2aapi_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCurlSectionOfTheDocs runs docs/a2a.md's curl block as it is written
// (bash, curl, jq) against a test server, and compares what it prints with
// the comment lines that follow its commands.
func TestCurlSectionOfTheDocs(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("docs/a2a.md's curl block needs %s: %v", tool, err)
		}
	}
	doc, err := os.ReadFile("../docs/a2a.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "a test runs this block as it is:\n\n```sh\n")
	block, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatal("docs/a2a.md has no curl block a test runs")
	}
	var want []string
	prev := ""
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "# ") && prev != "" && !strings.HasPrefix(prev, "#") {
			want = append(want, strings.TrimPrefix(line, "# "))
		}
		prev = line
	}

	e := newEnv(t, nil)
	boss := e.agent("demo", "boss", false, "turns:dispatch")
	e.agent("demo", "writer", true)
	script := strings.ReplaceAll(block, "http://127.0.0.1:8000", e.url)
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "TOKEN="+boss, "NO_PROXY=*", "no_proxy=*")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the curl block: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the curl block printed (-docs +got):\n%s", diff)
	}
}
