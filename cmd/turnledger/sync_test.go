package main

import (
	"bytes"
	"strings"
	"testing"
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
