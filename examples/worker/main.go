// Command worker is a runnable example of an agent written with the Go
// client: it claims the Turns dispatched to its agent (long polls, up to the
// agent's capacity at once), appends a progress record, and finishes each
// with a small summary of its input. Its claims are renewed on their own; a
// stop request cancels the work; Ctrl-C lets running Turns finish first.
//
//	go run ./examples/worker -url http://127.0.0.1:8000 -project demo -agent summarizer
//
// The agent's credential token is read from TURNLEDGER_AGENT_TOKEN (get one
// with the admin surface, see docs/client.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/turnledger/turnledger/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv("TURNLEDGER_AGENT_TOKEN"), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// run parses the flags and works until ctx ends.
func run(ctx context.Context, args []string, token string, out io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8000", "base URL of turnledger")
	project := fs.String("project", "demo", "project of the agent")
	agent := fs.String("agent", "summarizer", "agent to work as")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if token == "" {
		return errors.New("set TURNLEDGER_AGENT_TOKEN to the agent's credential token")
	}
	c, err := client.New(*url, client.WithAgent(*project, *agent, token))
	if err != nil {
		return err
	}
	w, err := c.NewWorker(client.WorkerConfig{Logger: slog.New(slog.NewTextHandler(out, nil))}, func(ctx context.Context, job *client.Job) (client.Result, error) {
		return summarize(ctx, job, out)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "worker %s/%s waiting for Turns at %s\n", *project, *agent, *url)
	return w.Run(ctx)
}

// summarize is the handler: it counts the words of input.text.
func summarize(ctx context.Context, job *client.Job, out io.Writer) (client.Result, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(job.Turn.Input, &in); err != nil {
		return client.Result{}, fmt.Errorf("input is not {\"text\": ...}: %w", err)
	}
	fmt.Fprintf(out, "claimed %s (%s)\n", job.Turn.TurnID, job.Turn.TurnKind)
	words := strings.Fields(in.Text)
	if _, err := job.Append(ctx, "progress", map[string]any{"words_seen": len(words)}); err != nil {
		return client.Result{}, err
	}
	summary := strings.Join(words[:min(len(words), 5)], " ")
	fmt.Fprintf(out, "finished %s: %d words\n", job.Turn.TurnID, len(words))
	return client.Result{FinalPayload: map[string]any{"words": len(words), "summary": summary}}, nil
}
