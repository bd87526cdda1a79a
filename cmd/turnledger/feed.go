package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	tl "github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/client/cli"
	"github.com/turnledger/turnledger/internal/cliflag"
)

// runFeed runs `turnledger feed tail`: it follows a feed over its event
// stream (reconnecting from the last event seen) and prints one line per
// event until interrupted; stderr says what it follows from where, each
// reconnection, and where to resume. An unknown project is an error.
func runFeed(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "tail" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "Usage: turnledger feed tail --project P [--after N] [--turn T | --agent A] [--url U] [--token T]")
			return nil
		}
		return fmt.Errorf("%w: turnledger feed tail --project P [--after N] [--turn T | --agent A]", errUsage)
	}
	fs := flag.NewFlagSet("feed tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a apiFlags
	a.register(fs)
	after := fs.Uint64("after", 0, "start after this ledger_seq")
	turn := fs.String("turn", "", "follow this Turn's feed instead of the project's")
	agent := fs.String("agent", "", "follow this agent's feed instead of the project's")
	a.usage(fs, "feed tail --project P [--after N] [--turn T | --agent A]", "Follows a feed over its event stream and prints one line per event until interrupted.")
	if help, err := cliflag.Parse(fs, args[1:], stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: feed tail takes no arguments, got %q", errUsage, strings.Join(fs.Args(), " "))
	}
	if *turn != "" && *agent != "" {
		return fmt.Errorf("%w: give --turn or --agent, not both", errUsage)
	}
	t := &cli.Tail{Feed: tl.ProjectFeedOf(a.project), Name: "the feed of project " + a.project, After: *after, Out: stdout, Log: stderr}
	switch {
	case *turn != "":
		t.Feed, t.Name = tl.TurnFeedOf(a.project, *turn), fmt.Sprintf("the feed of Turn %s in project %s", *turn, a.project)
	case *agent != "":
		t.Feed, t.Name = tl.AgentFeedOf(a.project, *agent), fmt.Sprintf("the feed of agent %s in project %s", *agent, a.project)
	}
	c, err := a.client(tl.WithHTTPClient(&http.Client{Transport: t.Transport(nil)}))
	if err != nil {
		return err
	}
	if err := cli.CheckProject(ctx, c, a.project); err != nil {
		return err
	}
	return t.Run(ctx, c)
}
