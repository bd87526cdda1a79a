package main

import (
	"strings"
	"testing"
)

// subcommandsWithFlags lists every subcommand that parses flags, as typed.
var subcommandsWithFlags = [][]string{
	{"serve"}, {"replay"}, {"runtime"}, {"tenants", "list"}, {"tenants", "add"}, {"monitor"},
	{"catalogue"}, {"catalogue", "hash-key"}, {"catalogue", "new-key"},
	{"deployconfig", "schema"}, {"deployconfig", "validate"},
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
	}
}
