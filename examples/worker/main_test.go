package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorkerExample runs the example against a real server: it finishes a
// dispatched Turn with the word count of its input.
func TestWorkerExample(t *testing.T) {
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
	adm, _ := client.New(st.URL(), client.WithAdminToken(adminToken))
	mat, err := adm.RequestAgentCredentialTokens(ctx, "demo", client.TokensRequest{AgentID: "summarizer"})
	if err != nil {
		t.Fatal(err)
	}
	tv, err := adm.DispatchTurn(ctx, "demo", client.DispatchRequest{
		RequestedBy: client.AgentRef{ProjectID: "demo", AgentID: "summarizer"},
		TargetAgent: client.AgentRef{ProjectID: "demo", AgentID: "summarizer"},
		Input:       map[string]any{"text": "the quick brown fox jumps over the lazy dog"},
		TurnKind:    "summarize", DispatchKey: "d1", Authority: client.Root("r1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	var out syncBuffer
	go func() { done <- run(runCtx, []string{"-url", st.URL()}, mat.AgentCredentialToken, &out) }()
	var final client.Turn
	checkfor.Until(t, 20*time.Second, "the example to finish the Turn", func() bool {
		got, err := adm.GetTurn(ctx, "demo", tv.TurnID)
		if err == nil {
			final = *got
		}
		return err == nil && got.State == "finished"
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run = %v", err)
	}
	var payload struct {
		Words   int    `json:"words"`
		Summary string `json:"summary"`
	}
	if json.Unmarshal(final.FinalPayload, &payload) != nil || payload.Words != 9 || payload.Summary != "the quick brown fox jumps" || *final.Outcome != "succeeded" {
		t.Errorf("finished Turn = outcome %v payload %s, want succeeded with 9 words", final.Outcome, final.FinalPayload)
	}
	if !strings.Contains(out.String(), "finished "+tv.TurnID+": 9 words") {
		t.Errorf("output %q does not report the Turn", out.String())
	}
	if err := run(ctx, nil, "", &out); err == nil {
		t.Error("run without a token = nil error")
	}
}
