package client_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/turnledger/turnledger/client"
)

var errRateLimited = errors.New("rate limited")

func summarise(ctx context.Context, input []byte) (string, error) { return "", errRateLimited }

// A dispatch with a priority, a deadline, at most five attempts and a
// backoff between them.
func ExampleDispatchRequest_schedule() {
	ctx := context.Background()
	boss, _ := client.New("http://127.0.0.1:8000", client.WithAgent("demo", "planner", "tla_..."))
	prio, tries := 1, 5
	deadline := time.Now().Add(30 * time.Minute)
	t, err := boss.DispatchTurn(ctx, "demo", client.DispatchRequest{
		RequestedBy: client.AgentRef{ProjectID: "demo", AgentID: "planner"},
		TargetAgent: client.AgentRef{ProjectID: "demo", AgentID: "writer"},
		Input:       map[string]any{"text": "Summarise the release notes."},
		TurnKind:    "summarize", DispatchKey: "notes-42", Authority: client.Root("req-42"),
		Priority:     &prio,
		Deadline:     &deadline,
		MaxAttempts:  &tries,
		RetryBackoff: &client.Backoff{InitialS: 2, Factor: 3, MaxS: 60},
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("Turn %s at priority %d", t.TurnID, t.Priority)
}

// A handler that asks for another attempt when the model is rate limited,
// and fails the Turn for good on any other error.
func ExampleRetryLater() {
	writer, _ := client.New("http://127.0.0.1:8000", client.WithAgent("demo", "writer", "tla_..."))
	w, err := writer.NewWorker(client.WorkerConfig{}, func(ctx context.Context, job *client.Job) (client.Result, error) {
		summary, err := summarise(ctx, job.Turn.Input)
		if errors.Is(err, errRateLimited) {
			return client.Result{}, client.RetryLater(err) // queued again after the backoff, or dead
		}
		if err != nil {
			return client.Result{}, err // failed, no retry
		}
		return client.Result{FinalPayload: map[string]any{"summary": summary}}, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = w.Run(context.Background())
}
