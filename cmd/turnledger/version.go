package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/nats-io/nats-server/v2/server"
)

// runVersion prints what this binary is: the module version, the VCS
// revision it was built from, the Go version and the embedded NATS server.
func runVersion(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: turnledger version takes no arguments", errUsage)
	}
	fmt.Fprintln(stdout, versionLine(debug.ReadBuildInfo()))
	return nil
}

// versionLine reads "turnledger VERSION (revision REV[, modified], built TIME)
// GOVERSION, embedded nats-server VERSION" from the build information.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	version, revision, modified, built := "(unknown)", "", false, ""
	goVersion := runtime.Version()
	if ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			case "vcs.time":
				built = s.Value
			}
		}
	}
	rev := "revision unknown"
	if revision != "" {
		rev = "revision " + revision
		if modified {
			rev += ", modified"
		}
		if built != "" {
			rev += ", committed " + built
		}
	}
	return fmt.Sprintf("turnledger %s (%s) %s, embedded nats-server %s", version, rev, goVersion, server.VERSION)
}
