package natstest_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/internal/natstest"
)

// TestStartKeepsFileStreamsInStoreDir starts a server, writes to a file
// stream, stops it, and starts a second server on the same StoreDir.
func TestStartKeepsFileStreamsInStoreDir(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	s := natstest.Start(t, natstest.StoreDir(dir))
	u, err := url.Parse(s.ClientURL())
	if err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("ClientURL() = %q, want a 127.0.0.1 URL", s.ClientURL())
	}
	js, err := jetstream.New(natstest.Connect(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("CreateStream = %v", err)
	}
	if _, err := js.Publish(ctx, "s.a", []byte("x")); err != nil {
		t.Fatalf("Publish = %v", err)
	}
	s.Shutdown()
	s.WaitForShutdown()

	s2 := natstest.Start(t, natstest.StoreDir(dir))
	js2, err := jetstream.New(natstest.Connect(t, s2))
	if err != nil {
		t.Fatal(err)
	}
	st, err := js2.Stream(ctx, "S")
	if err != nil {
		t.Fatalf("Stream(S) after restart = %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stream S after restart has %d messages, want 1", info.State.Msgs)
	}
}
