package ledger

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/internal/natstest"
)

// TestStreamWideFirstEventIsGuarded: in ExpectStream mode a Store that
// believed the stream empty gets ErrConflict and writes nothing, and the first
// event's message id makes the server keep only one of two first writes even
// where it would not check "last sequence 0".
func TestStreamWideFirstEventIsGuarded(t *testing.T) {
	srv := natstest.Start(t)
	cfg := DefaultConfig()
	cfg.Storage = MemoryStorage
	cfg.Expect = ExpectStream
	a, b := openOn(t, srv, cfg), openOn(t, srv, cfg)
	ev := heartbeat("a1")
	if _, err := a.Append(context.Background(), "p1", 0, ev); err != nil {
		t.Fatalf("first Append = %v", err)
	}
	// b read the stream before a wrote: head 0, p1 at 0. It reads again
	// before it trusts a head of 0, and finds p1 moved.
	b.heads.learn(0, "p1", 0)
	if _, err := b.Append(context.Background(), "p1", 0, ev); !errors.Is(err, ErrConflict) {
		t.Errorf("Append(p1, 0) by a Store that saw an empty stream = %v, want ErrConflict", err)
	}
	// The same message id, without the sequence check: the server keeps
	// one, and Append reports the other as a conflict.
	ack, err := a.js.PublishMsg(context.Background(), &nats.Msg{Subject: "tl.p1.agent", Data: []byte("{}")}, jetstream.WithMsgID(a.firstMsgID()))
	if err != nil || !ack.Duplicate {
		t.Errorf("publish with the first event's message id = %+v, %v; want a duplicate", ack, err)
	}
	if h, err := a.Head(context.Background()); err != nil || h != 1 {
		t.Errorf("Head() = %d, %v, want 1, nil", h, err)
	}
}
