package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnledger/turnledger/internal/natstest"
)

func TestServeSyncFlag(t *testing.T) {
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"serve", "--data", t.TempDir(), "--sync", "sometimes"}, &out, &out); code != 2 || !strings.Contains(out.String(), "always") {
		t.Errorf("serve --sync sometimes = %d %q, want usage error 2 naming the choices", code, out.String())
	}
	for _, s := range []string{"always", "interval"} {
		dir := t.TempDir()
		base, stop := startEngine(t, dir, "127.0.0.1:0", "--sync", s)
		admin := adminClient(t, base, dir)
		agentClient(t, admin, "p1", "a", 1)
		if code := stop(); code != 0 {
			t.Errorf("serve --sync %s exited with %d", s, code)
		}
	}
}

// TestServeRefusesFlagsItsNATSCannotHonour: --replicas above 1 needs a NATS
// cluster, so the embedded server refuses it at once (not when nats-server
// would refuse the stream); --sync sets the embedded server's fsync policy,
// so with --nats-url (whose server keeps its own) it is refused rather than
// ignored. Both are usage errors (exit 2) that say what to do, and nothing
// is started: the data directory stays empty.
func TestServeRefusesFlagsItsNATSCannotHonour(t *testing.T) {
	srv := natstest.Start(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--replicas", "3"}, "--replicas 3 needs --nats-url: the embedded NATS server is a single node"},
		{[]string{"--replicas", "2", "--sync", "interval"}, "--replicas 2 needs --nats-url"},
		{[]string{"--nats-url", srv.ClientURL(), "--sync", "always"}, "--sync applies to the embedded NATS server only"},
		{[]string{"--nats-url", srv.ClientURL(), "--sync", "interval"}, "sync_interval"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		var out syncBuffer
		code := Main(t.Context(), append([]string{"serve", "--addr", "127.0.0.1:0", "--data", dir}, c.args...), &out, &out)
		if code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("serve %v = exit %d:\n%s\nwant exit 2 saying %q", c.args, code, out.String(), c.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("serve %v made its data directory (Stat = %v)", c.args, err)
		}
	}
	// What each works with is accepted: --sync with the embedded server
	// (TestServeSyncFlag), --replicas 1 with it, and --replicas 3 with
	// --nats-url (TestClusterFailoverUnderLoad).
	dir := t.TempDir()
	base, stop := startEngine(t, dir, "127.0.0.1:0", "--replicas", "1")
	agentClient(t, adminClient(t, base, dir), "p1", "a", 1)
	if code := stop(); code != 0 {
		t.Errorf("serve --replicas 1 exited with %d", code)
	}
}
