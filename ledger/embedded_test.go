package ledger_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
)

func startEmbedded(t *testing.T, cfg ledger.EmbeddedConfig) *ledger.Embedded {
	t.Helper()
	e, err := ledger.StartEmbedded(cfg)
	if err != nil {
		t.Fatalf("StartEmbedded(%+v) = %v", cfg, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func openEmbedded(t *testing.T, e *ledger.Embedded) *ledger.Store {
	t.Helper()
	nc, err := e.Connect()
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	s, err := ledger.Open(context.Background(), nc, ledger.DefaultConfig())
	if err != nil {
		t.Fatalf("Open(DefaultConfig()) = %v", err)
	}
	return s
}

// TestEmbeddedKeepsEventsAcrossRestart writes through the in-process
// connection, closes the server, starts a new one on the same data directory
// and reads the events back.
func TestEmbeddedKeepsEventsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	e := startEmbedded(t, ledger.DefaultEmbeddedConfig(dir))
	if got := e.ClientURL(); got != "" {
		t.Errorf("ClientURL() with port 0 = %q, want \"\" (no listener)", got)
	}
	s := openEmbedded(t, e)
	var want []kernel.Recorded
	var last uint64
	for n := range uint64(3) {
		ev := record("p1", "t1", n+1)
		last = mustAppend(t, s, "p1", last, ev)
		want = append(want, kernel.Recorded{Seq: last, Event: ev})
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nats", "jetstream")); err != nil {
		t.Errorf("JetStream files are not under <data>/nats/jetstream: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	if _, err := e.Connect(); err == nil {
		t.Errorf("Connect() after Close = nil error, want an error")
	}

	e2 := startEmbedded(t, ledger.DefaultEmbeddedConfig(dir))
	s2 := openEmbedded(t, e2)
	got, gotLast := readProject(t, s2, "p1", 0)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadProject(p1) after restart mismatch (-want +got):\n%s", diff)
	}
	if gotLast != last {
		t.Errorf("ReadProject(p1) after restart last = %d, want %d", gotLast, last)
	}
	// Appends go on from where they were.
	if seq := mustAppend(t, s2, "p1", last, record("p1", "t1", 4)); seq != last+1 {
		t.Errorf("Append after restart = %d, want %d", seq, last+1)
	}
}

func TestEmbeddedListensOnLoopbackOnly(t *testing.T) {
	cfg := ledger.DefaultEmbeddedConfig(t.TempDir())
	cfg.Port = -1
	e := startEmbedded(t, cfg)
	u, err := url.Parse(e.ClientURL())
	if err != nil || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" {
		t.Fatalf("ClientURL() = %q, want nats://127.0.0.1:<port>", e.ClientURL())
	}
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatalf("nats.Connect(%s) = %v", e.ClientURL(), err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		t.Errorf("connection to %s is not connected", e.ClientURL())
	}
}

func TestEmbeddedConfigValidate(t *testing.T) {
	if err := ledger.DefaultEmbeddedConfig("data").Validate(); err != nil {
		t.Errorf("DefaultEmbeddedConfig(data).Validate() = %v, want nil", err)
	}
	bad := ledger.EmbeddedConfig{Port: 70000}
	err := bad.Validate()
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 4 {
		t.Errorf("Validate(%+v) = %v, want 4 joined problems", bad, err)
	}
	if _, err := ledger.StartEmbedded(bad); err == nil {
		t.Errorf("StartEmbedded(%+v) = nil error, want an error", bad)
	}
}

func TestEmbeddedRefusesASecondServerOnTheSameDataDir(t *testing.T) {
	dir := t.TempDir()
	e := startEmbedded(t, ledger.DefaultEmbeddedConfig(dir))
	if e2, err := ledger.StartEmbedded(ledger.DefaultEmbeddedConfig(dir)); err == nil {
		e2.Close()
		t.Fatalf("StartEmbedded on a data directory in use = nil error, want an error")
	}
	// Once the first is closed, the directory is free again.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	startEmbedded(t, ledger.DefaultEmbeddedConfig(dir))
}
