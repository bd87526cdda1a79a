package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

func TestVersionCommandAndFlag(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, stderr := runTurnledger(t, args...)
		if code != 0 || stderr != "" {
			t.Errorf("turnledger %v = exit %d, stderr %q; want 0 and nothing", args, code, stderr)
		}
		if !strings.HasPrefix(out, "turnledger ") || !strings.Contains(out, "embedded nats-server "+server.VERSION) {
			t.Errorf("turnledger %v printed %q, want a version line naming nats-server %s", args, out, server.VERSION)
		}
	}
}

func TestVersionLineReadsBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/turnledger/turnledger", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "6e9df4c0"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-11-25T04:00:00Z"}}}
	want := "turnledger v0.3.0 (revision 6e9df4c0, modified, committed 2026-11-25T04:00:00Z) go1.26.0, embedded nats-server " + server.VERSION
	if got := versionLine(bi, true); got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
	if got := versionLine(nil, false); !strings.HasPrefix(got, "turnledger (unknown) (revision unknown) ") {
		t.Errorf("versionLine without build info = %q", got)
	}
}
