package serve

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/turnledger/turnledger/client"
)

// TestPagesOfTheSoleWriterReportTheHeadTheyKnow: with its embedded server,
// serve's ledger is the only writer of the stream, so a page's diagnostics
// take the head the ledger knows (ledger.Store.KnownHead) instead of asking
// the server for it, once per page; they still report what the head shows.
func TestPagesOfTheSoleWriterReportTheHeadTheyKnow(t *testing.T) {
	ctx := t.Context()
	cfg := DefaultConfig()
	cfg.Addr, cfg.DataDir, cfg.AdminToken = "127.0.0.1:0", t.TempDir(), "tladm_test"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	adm, err := client.New(s.URL(), client.WithAdminToken(cfg.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a1", "a2", "a3"} {
		if _, err := adm.RegisterAgent(ctx, "p", client.RegisterRequest{
			Spec: client.AgentSpec{AgentID: id, Role: "test", Description: "test"}, Provenance: client.Provenance{Kind: "manual"}}); err != nil {
			t.Fatal(err)
		}
	}

	nc, err := s.Embedded().Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var infos atomic.Int64
	sub, err := nc.Subscribe("$JS.API.STREAM.INFO.>", func(*nats.Msg) { infos.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	const pages = 20
	for range pages {
		pg, err := adm.ProjectFeed(ctx, "p", client.FeedQuery{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(pg.Items) != 2 || len(pg.Diagnostics) != 0 {
			t.Fatalf("a page of the caught-up feed = %d items, diagnostics %+v; want 2 items and none", len(pg.Items), pg.Diagnostics)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Anything else of serve may read the stream's state now and then (the
	// metrics, readiness); the pages did not, once each.
	if n := infos.Load(); n >= pages/2 {
		t.Errorf("%d pages asked the server for the stream's state %d times; the sole writer knows its head", pages, n)
	}
}
