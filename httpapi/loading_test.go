package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
)

// heldLedger is the real ledger whose project reads wait for a gate: a
// project's write model stays loading until the test opens it.
type heldLedger struct {
	*ledger.Store
	gate chan struct{}
}

func (h heldLedger) ReadProject(ctx context.Context, project string, after uint64, fn func(kernel.Recorded) error) (uint64, error) {
	select {
	case <-h.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return h.Store.ReadProject(ctx, project, after, fn)
}

// TestRequestsWhileLoadingAre503: an instance whose write model of the
// project is still loading answers its requests 503 with Retry-After (and
// appends nothing); once loaded, the same requests succeed.
func TestRequestsWhileLoadingAre503(t *testing.T) {
	srv := natstest.Start(t)
	clk := &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	a := newEnvOn(t, srv.ClientURL(), clk)
	a.register("p1", "worker", 1)

	// A second instance over the same NATS server, its project reads held.
	lcfg := ledger.DefaultConfig()
	lcfg.Storage = ledger.MemoryStorage
	l, err := ledger.Open(t.Context(), natstest.ConnectURL(t, srv.ClientURL()), lcfg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg := projection.DefaultConfig()
	pcfg.NoSync = true
	store, err := projection.Open(filepath.Join(t.TempDir(), "projections.db"), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); projection.NewProjector(store, l).Run(ctx) }()
	gate := make(chan struct{})
	kcfg := engine.DefaultConfig()
	kcfg.Now, kcfg.LoadWait = clk.Now, 20*time.Millisecond
	engine, err := engine.New(heldLedger{l, gate}, kcfg)
	if err != nil {
		t.Fatal(err)
	}
	hcfg := httpapi.DefaultConfig()
	hcfg.AdminTokenHash = kernel.HashSecret(adminToken)
	hcfg.Now = clk.Now
	hcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	api, err := httpapi.New(engine, store, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() { api.StopWaiting(); hs.Close(); cancel(); <-done; store.Close() })
	b := &env{t: t, url: hs.URL, clock: clk, ledger: l, store: store, engine: engine, api: api}

	before := a.ledgerLast(t, "p1")
	body := map[string]any{"spec": map[string]any{"agent_id": "late", "role": "worker", "description": "", "enabled": true,
		"accepts_work": true, "capacity": 1, "capabilities": []string{}, "grants": []string{}, "public_metadata": map[string]any{}},
		"provenance": map[string]any{"kind": "test", "external_ref": "", "payload_hash": nil}}
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v3r1/projects/p1/agents/worker", nil},
		{"POST", "/v3r1/projects/p1/agents:register", body},
	} {
		r := b.do(asAdmin, req.method, req.path, req.body)
		if r.status != 503 || r.errorName() != string(kernel.Unavailable) {
			t.Errorf("%s %s while loading = %d %s, want 503 %s", req.method, req.path, r.status, r.body, kernel.Unavailable)
		}
	}
	req, _ := http.NewRequest("GET", hs.URL+"/v3r1/projects/p1/agents/worker", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("while loading: %d with Retry-After %q, want 503 with a Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if got := a.ledgerLast(t, "p1"); got != before {
		t.Errorf("a request refused while loading appended: last ledger_seq %d, want %d", got, before)
	}
	close(gate)
	if err := engine.Preload(t.Context(), []string{"p1"}); err != nil {
		t.Fatal(err)
	}
	b.must(asAdmin, "GET", "/v3r1/projects/p1/agents/worker", nil, 200)
	b.must(asAdmin, "POST", "/v3r1/projects/p1/agents:register", body, 200)
}
