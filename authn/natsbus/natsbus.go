// Package natsbus carries the runtime's websocket messages over NATS (an
// authn.Bus), and starts the embedded NATS server the runtime uses when it
// is given no --nats-url.
package natsbus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/turnledger/turnledger/authn"
)

// Bus is an authn.Bus over one NATS connection.
type Bus struct{ nc *nats.Conn }

var _ authn.Bus = (*Bus)(nil)

// New wraps nc; the caller closes nc.
func New(nc *nats.Conn) *Bus { return &Bus{nc: nc} }

// Publish sends data on subject.
func (b *Bus) Publish(ctx context.Context, subject string, data []byte) error {
	return b.nc.Publish(subject, data)
}

// Subscribe calls fn for each message on subject.
func (b *Bus) Subscribe(subject string, fn func([]byte)) (func() error, error) {
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) { fn(m.Data) })
	if err != nil {
		return nil, err
	}
	// Make sure the server knows the interest before the socket is used, so
	// a message sent right after connecting is not lost.
	if err := b.nc.Flush(); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	return sub.Unsubscribe, nil
}

// Ping reports whether the connection is up.
func (b *Bus) Ping(ctx context.Context) error {
	if !b.nc.IsConnected() {
		return errors.New("nats: not connected")
	}
	return nil
}

// StartEmbedded starts an in-process NATS server on 127.0.0.1 and a random
// port (so further runtime processes on the machine can join it with
// --nats-url), without JetStream: websocket fan-out needs only core NATS.
func StartEmbedded() (*server.Server, error) {
	ns, err := server.NewServer(&server.Options{
		Host:   "127.0.0.1",
		Port:   server.RANDOM_PORT,
		NoLog:  true,
		NoSigs: true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("embedded nats: not ready after 10s")
	}
	return ns, nil
}
