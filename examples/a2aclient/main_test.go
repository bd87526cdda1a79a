package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

// TestA2AClientExample runs the example against a real serve while a Go
// worker does the work: the task comes back COMPLETED with the worker's
// message and the final payload.
func TestA2AClientExample(t *testing.T) {
	const adminToken = "example-test-admin-token"
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir, cfg.AdminToken = "127.0.0.1:0", t.TempDir(), adminToken
	cfg.Ledger.Storage = ledger.MemoryStorage
	cfg.ReapInterval = 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	st, err := serve.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	adm, err := client.New(st.URL(), client.WithAdminToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, a := range []struct {
		id     string
		grants []string
	}{{"boss", []string{"turns:dispatch"}}, {"writer", nil}} {
		if _, err := adm.RegisterAgent(ctx, "demo", client.RegisterRequest{Spec: client.AgentSpec{AgentID: a.id, Role: "worker",
			AcceptsWork: new(a.id == "writer"), Capacity: new(1), Capabilities: []string{"summarize"}, Grants: a.grants}, Provenance: client.Provenance{Kind: "test"}}); err != nil {
			t.Fatal(err)
		}
		cred, err := adm.IssueCredential(ctx, "demo", a.id)
		if err != nil {
			t.Fatal(err)
		}
		tokens[a.id] = cred.Token
	}
	wc, err := client.New(st.URL(), client.WithAgent("demo", "writer", tokens["writer"]))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	w, err := wc.NewWorker(client.WorkerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, func(ctx context.Context, job *client.Job) (client.Result, error) {
		if _, err := job.Append(ctx, "note", map[string]any{"parts": []any{map[string]any{"text": "reading the ticket"}}}); err != nil {
			return client.Result{}, err
		}
		return client.Result{FinalPayload: map[string]any{"parts": []any{map[string]any{"text": "a short summary"}}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(wctx)

	var out bytes.Buffer
	if err := run(ctx, []string{"-url", st.URL(), "-project", "demo", "-agent", "writer", "-skill", "summarize", "Summarize", "the", "ticket"}, tokens["boss"], &out); err != nil {
		t.Fatalf("run = %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"TASK_STATE_COMPLETED", "agent: reading the ticket", "artifact final: a short summary"}
	if len(lines) != len(want) || !strings.HasSuffix(lines[0], want[0]) || lines[1] != want[1] || lines[2] != want[2] {
		t.Errorf("output:\n%s\nwant lines ending %q", out.String(), want)
	}
}
