// Package stacktest starts the whole server stack in a test, wired as
// `turnledger serve` wires it: an embedded nats-server with JetStream
// (memory storage), the ledger, the engine, a bbolt projection in
// t.TempDir() folded by a projector, and the HTTP API on a loopback port.
// Tests of the public surface (the client, the example worker) use it.
package stacktest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
)

// AdminToken is the admin bearer of every stack.
const AdminToken = "stacktest-admin-token"

// Stack is a running server.
type Stack struct {
	URL   string
	API   *httpapi.Server
	Store *projection.Store
}

// Config changes the defaults of a stack; zero fields keep them.
type Config struct {
	ClaimTTL time.Duration
	Metrics  httpapi.MetricsConfig
	// Now is the clock of the engine, the projections and the API (default
	// time.Now), so that a test can expire claims without sleeping.
	Now func() time.Time
}

// Start starts a stack that stops when the test ends.
func Start(t testing.TB, cfg Config) *Stack {
	t.Helper()
	srv := natstest.Start(t)
	nc := natstest.ConnectURL(t, srv.ClientURL())
	lcfg := ledger.DefaultConfig()
	lcfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(context.Background(), nc, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := projection.DefaultConfig()
	pcfg.NoSync = true
	if cfg.Now != nil {
		pcfg.Now = cfg.Now
	}
	store, err := projection.Open(filepath.Join(t.TempDir(), "projections.db"), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	kcfg := engine.DefaultConfig()
	if cfg.ClaimTTL > 0 {
		kcfg.ClaimTTL = cfg.ClaimTTL
	}
	if cfg.Now != nil {
		kcfg.Now = cfg.Now
	}
	engine, err := engine.New(l, kcfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		projection.NewProjector(store, l).Run(ctx)
	}()
	hcfg := httpapi.DefaultConfig()
	hcfg.AdminTokenHash = kernel.HashSecret(AdminToken)
	hcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	hcfg.Metrics = cfg.Metrics
	if cfg.Now != nil {
		hcfg.Now = cfg.Now
	}
	api, err := httpapi.New(engine, store, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		api.StopWaiting()
		hs.Close()
		cancel()
		wg.Wait()
		store.Close()
	})
	return &Stack{URL: hs.URL, API: api, Store: store}
}
