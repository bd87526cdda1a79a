package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	tl "github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/checkfor"
)

// TestServeClientWorkerFollowAndMetrics drives the whole binary's serve with
// the Go client: a Worker finishes a Turn, Follow sees it live, a long-poll
// claim and an event stream show up in /metrics, and serve stops cleanly
// while both are open.
func TestServeClientWorkerFollowAndMetrics(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir)
	ctx := context.Background()
	adm, err := tl.New(base, tl.WithAdminToken(engineAdminToken(t, dir)))
	if err != nil {
		t.Fatal(err)
	}
	mat, err := adm.RequestAgentCredentialTokens(ctx, "demo", tl.TokensRequest{AgentID: "summarizer"})
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := tl.New(base, tl.WithAgent("demo", "summarizer", mat.AgentCredentialToken))

	followCtx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	finished := make(chan tl.FeedItem, 1)
	go func() {
		for it, err := range adm.Follow(followCtx, tl.ProjectFeedOf("demo"), 0) {
			if err != nil {
				return
			}
			if it.Type == "turn.finished" {
				finished <- it // and keep the stream open
			}
		}
	}()

	w, err := agent.NewWorker(tl.WorkerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Wait: 10 * time.Second}, func(ctx context.Context, job *tl.Job) (tl.Result, error) {
		if _, err := job.Append(ctx, "progress", map[string]any{"step": 1}); err != nil {
			return tl.Result{}, err
		}
		return tl.Result{FinalPayload: map[string]any{"ok": true}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	// The worker waits in a long poll; /metrics counts it.
	checkfor.Until(t, 10*time.Second, "the long poll to show in /metrics", func() bool {
		text, err := adm.Metrics(ctx)
		return err == nil && strings.Contains(text, "turnledger_claim_long_polls_waiting 1")
	})
	tv, err := adm.DispatchTurn(ctx, "demo", tl.DispatchRequest{
		RequestedBy: tl.AgentRef{ProjectID: "demo", AgentID: "summarizer"}, TargetAgent: tl.AgentRef{ProjectID: "demo", AgentID: "summarizer"},
		Input: map[string]any{"text": "hello"}, TurnKind: "summarize", DispatchKey: "d1", Authority: tl.Root("r1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case it := <-finished:
		if it.ID != tv.TurnID {
			t.Errorf("Follow saw turn.finished of %s, want %s", it.ID, tv.TurnID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Follow did not see the Turn finish")
	}
	// The finish is counted when its response is written, which may come
	// after Follow saw the event.
	var text string
	checkfor.Until(t, 10*time.Second, "the finish to be counted", func() bool {
		text, err = adm.Metrics(ctx)
		return err == nil && strings.Contains(text, `turnledger_commands_total{command="finishTurn",result="ok"} 1`)
	})
	for _, want := range []string{
		`turnledger_commands_total{command="dispatchTurn",result="ok"} 1`,
		`turnledger_commands_total{command="finishTurn",result="ok"} 1`,
		`turnledger_command_duration_seconds_count{command="claimTurn"}`,
		"turnledger_append_duration_seconds_count",
		"turnledger_projection_lag_events",
		"turnledger_claims_live 0",
		"turnledger_claims_expired_unreleased 0",
		"turnledger_sse_subscribers 1",
		"go_goroutines",
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// serve stops while the worker's long poll and the stream are open.
	checkfor.Until(t, 10*time.Second, "the worker to wait again", func() bool {
		text, err := adm.Metrics(ctx)
		return err == nil && strings.Contains(text, "turnledger_claim_long_polls_waiting 1")
	})
	if code := stop(); code != 0 {
		t.Errorf("serve exited with %d", code)
	}
	stopWorker()
	<-wdone
}
