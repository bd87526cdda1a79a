package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	tl "github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/client/a2abridge"
	"github.com/turnledger/turnledger/internal/cliflag"
)

// headerFlags is a repeatable "Name: value" flag.
type headerFlags map[string]string

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("a header is \"Name: value\", not %q", v)
	}
	h[strings.TrimSpace(name)] = strings.TrimSpace(value)
	return nil
}

// runA2ABridge runs `turnledger a2a-bridge`: it claims the Turns of one
// agent and forwards each to a remote A2A agent (client/a2abridge) until
// interrupted.
func runA2ABridge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("a2a-bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("TURNLEDGER_URL")
	if def == "" {
		def = "http://127.0.0.1:8000"
	}
	url := fs.String("url", def, "base URL of turnledger serve (or TURNLEDGER_URL)")
	project := fs.String("project", "", "project of the bridged agent (required)")
	agent := fs.String("agent", "", "the bridged agent: its Turns go to the remote agent (required)")
	token := fs.String("token", "", "the bridged agent's credential token (default: TURNLEDGER_AGENT_TOKEN)")
	card := fs.String("card", "", "the remote agent's card URL, or its base URL (required)")
	concurrency := fs.Int("concurrency", 0, "Turns forwarded at once (default: the agent's capacity)")
	headers := headerFlags{}
	fs.Var(headers, "remote-header", "a header sent to the remote agent, \"Name: value\" (repeatable), e.g. its Authorization")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: turnledger a2a-bridge --project P --agent A --card URL [--token T] [--concurrency N] [--remote-header H]\n\n"+
			"Claims the Turns of agent A and forwards each to the remote A2A agent whose card is at URL, until interrupted.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if help, err := cliflag.Parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: a2a-bridge takes no arguments, got %q", errUsage, strings.Join(fs.Args(), " "))
	}
	if *token == "" {
		*token = os.Getenv("TURNLEDGER_AGENT_TOKEN")
	}
	switch {
	case *project == "" || *agent == "" || *card == "":
		return fmt.Errorf("%w: --project, --agent and --card are required", errUsage)
	case *token == "":
		return fmt.Errorf("%w: the agent's credential is required: --token or TURNLEDGER_AGENT_TOKEN", errUsage)
	case *concurrency < 0:
		return fmt.Errorf("%w: --concurrency must not be negative", errUsage)
	}
	c, err := tl.New(*url, tl.WithAgent(*project, *agent, *token), tl.WithUserAgent("turnledger-a2a-bridge"))
	if err != nil {
		return err
	}
	remote, err := a2abridge.Dial(ctx, *card, nil, headers)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	b, err := a2abridge.New(a2abridge.Config{Client: c, Remote: remote, Logger: logger,
		Worker: tl.WorkerConfig{Project: *project, Agent: *agent, Capacity: *concurrency}})
	if err != nil {
		return err
	}
	logger.Info("a2a bridge: forwarding Turns", "project", *project, "agent", *agent, "remote", *card)
	return b.Run(ctx)
}
