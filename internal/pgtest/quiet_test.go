package pgtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// permissionLine is what PostgreSQL's tools print when they start in a
// directory their user cannot read.
const permissionLine = "could not change directory"

// privateDir is a directory only the user running the tests may enter: when
// that is root, the postgres user the tools run as cannot read it, as it
// cannot read a clone in a private home.
func privateDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCIScriptStartsPostgresQuietlyFromAPrivateDirectory: .ci/test sources
// .ci/postgres.sh from the clone; started from a directory the postgres user
// cannot read, the script starts the server and creates the database without
// printing "could not change directory ... Permission denied".
func TestCIScriptStartsPostgresQuietlyFromAPrivateDirectory(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "..", ".ci", "postgres.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// As .ci/test does: strict mode, source the script; the EXIT trap it
	// sets stops the server and removes its files when this shell ends.
	cmd := exec.Command("bash", "-c", `set -euo pipefail; . "$1"; echo "url=$TURNLEDGER_TEST_POSTGRES_URL"`, "bash", script)
	cmd.Dir = privateDir(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sourcing .ci/postgres.sh from %s: %v\n%s", cmd.Dir, err, out)
	}
	if !strings.Contains(string(out), "--- started postgresql") || !strings.Contains(string(out), "url=postgres://postgres@127.0.0.1:") {
		t.Errorf(".ci/postgres.sh output =\n%s\nwant it to start PostgreSQL and export its URL", out)
	}
	if strings.Contains(string(out), permissionLine) {
		t.Errorf(".ci/postgres.sh from a directory the postgres user cannot read printed %q:\n%s", permissionLine, out)
	}
}

// TestStartIsQuietFromAPrivateDirectory: pgtest's own server, started while
// the test runs in a directory the postgres user cannot read, logs no
// "could not change directory" either (initdb's output and the server's log).
func TestStartIsQuietFromAPrivateDirectory(t *testing.T) {
	t.Chdir(privateDir(t))
	u, in, err := start()
	if err != nil {
		t.Fatalf("start from a private directory: %v", err)
	}
	if u == "" {
		t.Errorf("start = no URL")
	}
	logs := map[string][]byte{}
	for _, name := range []string{"initdb.log", "server.log"} {
		b, err := os.ReadFile(filepath.Join(in.dir, name))
		if err != nil {
			t.Error(err)
		}
		logs[name] = b
	}
	in.stop()
	for name, b := range logs {
		if strings.Contains(string(b), permissionLine) {
			t.Errorf("%s of a server started from a private directory holds %q:\n%s", name, permissionLine, b)
		}
	}
	if _, err := os.Stat(in.dir); !os.IsNotExist(err) {
		t.Errorf("stop left %s (Stat = %v)", in.dir, err)
	}
}
