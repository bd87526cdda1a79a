package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// subcommandsWithFlags lists every subcommand that parses flags, as typed.
var subcommandsWithFlags = [][]string{
	{"serve"}, {"replay"}, {"runtime"}, {"tenants", "list"}, {"tenants", "add"}, {"monitor"},
	{"catalogue"}, {"catalogue", "hash-key"}, {"catalogue", "new-key"},
	{"deployconfig", "schema"}, {"deployconfig", "validate"},
	{"feed", "tail"}, {"turns", "list"}, {"turns", "show"}, {"agents", "list"}, {"bench"}, {"a2a-bridge"},
	{"archive", "ls"}, {"archive", "verify"}, {"archive", "cat"},
}

func TestUnknownFlagIsReportedOnce(t *testing.T) {
	for _, cmd := range subcommandsWithFlags {
		code, out, stderr := runTurnledger(t, append(cmd, "--no-such-flag")...)
		all := out + stderr
		if code != 2 || strings.Count(all, "flag provided but not defined: -no-such-flag") != 1 {
			t.Errorf("turnledger %s --no-such-flag = exit %d, output %q; want exit 2 and the error once", strings.Join(cmd, " "), code, all)
		}
		if want := "see turnledger " + strings.Join(cmd, " ") + " --help"; !strings.Contains(stderr, want) {
			t.Errorf("turnledger %s --no-such-flag stderr = %q, want it to say %q", strings.Join(cmd, " "), stderr, want)
		}
	}
}

func TestHelpPrintsUsageOnce(t *testing.T) {
	for _, cmd := range subcommandsWithFlags {
		code, out, stderr := runTurnledger(t, append(cmd, "--help")...)
		if code != 0 || stderr != "" || strings.Count(out, "Usage") != 1 {
			t.Errorf("turnledger %s --help = exit %d, stdout %q, stderr %q; want exit 0 and the usage once on stdout", strings.Join(cmd, " "), code, out, stderr)
		}
		if service := cmd[0] == "serve" || cmd[0] == "runtime" || cmd[0] == "monitor" || (cmd[0] == "catalogue" && len(cmd) == 1); service && (!strings.Contains(out, "-log-format") || !strings.Contains(out, "-log-level")) {
			t.Errorf("turnledger %s --help does not list -log-format and -log-level:\n%s", cmd[0], out)
		}
	}
}

func TestReplayOfADirectoryWithoutALedgerSaysSo(t *testing.T) {
	empty := t.TempDir()
	missing := filepath.Join(empty, "nonexistent")
	for dir, want := range map[string]string{
		missing: "turnledger replay: the data directory " + missing + " does not exist, so it holds no ledger",
		empty:   "turnledger replay: " + empty + " holds no turnledger ledger",
	} {
		code, out, stderr := runTurnledger(t, "replay", "--data", dir)
		if code != 1 || !strings.HasPrefix(stderr, want) || strings.Contains(stderr, "serve running") {
			t.Errorf("replay --data %s = exit %d, stdout %q, stderr %q; want exit 1 and %q", dir, code, out, stderr, want)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("replay made %s (Stat = %v)", missing, err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("replay wrote into the empty directory: %v", ents)
	}
}

func TestTenantsReadCommandsNeverCreateAStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "no", "such", "dir", "x.db")
	for _, args := range [][]string{{"list"}, {"list", "--json"}, {"suspend", "acme"}, {"activate", "acme"}, {"delete", "acme"}} {
		code, out, stderr := runTurnledger(t, append(append([]string{"tenants"}, args...), "--db", db)...)
		want := "turnledger tenants " + args[0] + ": no runtime database at " + db
		if code != 1 || out != "" || !strings.HasPrefix(stderr, want) {
			t.Errorf("tenants %v --db %s = exit %d, stdout %q, stderr %q; want exit 1 and %q", args, db, code, out, stderr, want)
		}
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(db))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read command made directories for %s (Stat = %v)", db, err)
	}
}

func TestDeployconfigValidateFlagsAnywhereAndStdin(t *testing.T) {
	td := filepath.Join("..", "..", "deployconfig", "testdata")
	valid := filepath.Join(td, "valid", "minimal.yml")
	invalid := filepath.Join(td, "invalid", "missing-provider.yml")
	for _, tc := range []struct {
		args       []string
		code       int
		out        string
		wantStderr string
	}{
		{[]string{valid, "--quiet"}, 0, "", ""},
		{[]string{"--quiet", valid}, 0, "", ""},
		{[]string{valid, "--quiet", invalid}, 1, invalid + `:1:1: at "": missing property "provider"` + "\n", "1 of 2 files invalid, 0 unreadable\n"},
		{[]string{"--", valid}, 0, valid + ": valid\n", ""},
		{[]string{"-"}, 0, "<stdin>: valid\n", ""},
	} {
		data, err := os.ReadFile(valid)
		if err != nil {
			t.Fatal(err)
		}
		deployconfigStdin = bytes.NewReader(data)
		code, out, stderr := runTurnledger(t, append([]string{"deployconfig", "validate"}, tc.args...)...)
		if code != tc.code || out != tc.out || stderr != tc.wantStderr {
			t.Errorf("deployconfig validate %v = exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out, stderr, tc.code, tc.out, tc.wantStderr)
		}
	}
	deployconfigStdin = os.Stdin
	code, _, stderr := runTurnledger(t, "deployconfig", "validate", "--quiet")
	if code != 2 || !strings.Contains(stderr, "no FILE given") {
		t.Errorf("deployconfig validate --quiet = exit %d, stderr %q; want 2 and no FILE given", code, stderr)
	}
}

func TestDurationFlagSaysWhatADurationLooksLike(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--claim-ttl", "60"}, `turnledger serve: invalid value "60" for flag --claim-ttl: a duration needs a unit, such as 60s or 2m`},
		{[]string{"serve", "--reap-interval", "soon"}, `turnledger serve: invalid value "soon" for flag --reap-interval: not a duration: use a number and a unit, such as 30s, 2m or 1h30m`},
	} {
		code, out, stderr := runTurnledger(t, tc.args...)
		if code != 2 || out != "" || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("turnledger %v = exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, stderr, tc.want)
		}
	}
	if _, out, _ := runTurnledger(t, "serve", "--help"); !strings.Contains(out, "-claim-ttl duration") {
		t.Errorf("serve --help does not name --claim-ttl a duration:\n%s", out)
	}
}

func TestUsageErrorsNameTheCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--log-level", "loud"}, `turnledger serve: --log-level must be debug, info, warn or error, not "loud"`},
		{[]string{"serve", "--log-format", "xml"}, `turnledger serve: --log-format must be text or json, not "xml"`},
		{[]string{"feed", "tail"}, `turnledger feed: --project is required`},
	} {
		code, out, stderr := runTurnledger(t, tc.args...)
		if code != 2 || out != "" || stderr != tc.want+"\n" {
			t.Errorf("turnledger %v = exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, stderr, tc.want)
		}
	}
}
