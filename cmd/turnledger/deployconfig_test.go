package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnledger/turnledger/deployconfig"
)

func runTurnledger(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDeployconfigValidateExitStatus(t *testing.T) {
	td := filepath.Join("..", "..", "deployconfig", "testdata")
	valid := filepath.Join(td, "valid", "minimal.yml")
	invalid := filepath.Join(td, "invalid", "missing-provider.yml")
	unreadable := filepath.Join(td, "unreadable", "bad-indent.yml")
	missing := filepath.Join(t.TempDir(), "nope.yml")
	for _, tc := range []struct {
		files      []string
		want       int
		wantLine   string
		wantStderr string
	}{
		{[]string{valid}, 0, valid + ": valid", ""},
		{[]string{valid, invalid}, 1, invalid + `:1:1: at "": missing property "provider"`, "1 of 2 files invalid, 0 unreadable\n"},
		{[]string{invalid, unreadable}, 2, unreadable + ":4: syntax error: mapping values are not allowed in this context", "1 of 2 files invalid, 1 unreadable\n"},
		{[]string{missing}, 2, missing + ": cannot read: no such file or directory", "0 of 1 files invalid, 1 unreadable\n"},
	} {
		code, out, stderr := runTurnledger(t, append([]string{"deployconfig", "validate"}, tc.files...)...)
		if stderr != tc.wantStderr {
			t.Errorf("deployconfig validate %v stderr = %q, want %q", tc.files, stderr, tc.wantStderr)
		}
		if code != tc.want {
			t.Errorf("deployconfig validate %v exit = %d, want %d (output %q)", tc.files, code, tc.want, out)
		}
		if !strings.Contains(out, tc.wantLine+"\n") {
			t.Errorf("deployconfig validate %v output = %q, want a line %q", tc.files, out, tc.wantLine)
		}
	}
}

func TestDeployconfigValidateNeedsFiles(t *testing.T) {
	if code, _, _ := runTurnledger(t, "deployconfig", "validate"); code != 2 {
		t.Errorf("deployconfig validate (no files) exit = %d, want 2", code)
	}
	if code, _, _ := runTurnledger(t, "deployconfig", "frobnicate"); code != 2 {
		t.Errorf("deployconfig frobnicate exit = %d, want 2", code)
	}
}

func TestDeployconfigSchemaPrintsTheEmbeddedSchema(t *testing.T) {
	code, out, _ := runTurnledger(t, "deployconfig", "schema")
	if code != 0 {
		t.Fatalf("deployconfig schema exit = %d, want 0", code)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("deployconfig schema output is not JSON: %v", err)
	}
	if s["$schema"] != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("deployconfig schema $schema = %v, want draft-07", s["$schema"])
	}
	if out != string(deployconfig.Schema()) {
		t.Errorf("deployconfig schema printed %d bytes, want the %d bytes of the embedded schema", len(out), len(deployconfig.Schema()))
	}
}
