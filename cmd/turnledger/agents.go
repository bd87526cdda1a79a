package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/turnledger/turnledger/client/cli"
	"github.com/turnledger/turnledger/internal/cliflag"
)

// runAgents runs `turnledger agents list` through the HTTP API.
func runAgents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "turnledger agents list --project P [--limit N]"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(stdout, "Usage: "+use)
		return nil
	}
	if len(args) == 0 || args[0] != "list" {
		return fmt.Errorf("%w: %s", errUsage, use)
	}
	fs := flag.NewFlagSet("agents list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a apiFlags
	a.register(fs)
	limit := fs.Int("limit", 500, "how many agents at most (1 to 500)")
	a.usage(fs, "agents list --project P [--limit N]", "Lists a project's agents through the HTTP API, with the admin token.")
	if help, err := cliflag.Parse(fs, args[1:], stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: agents list takes no arguments, got %q", errUsage, strings.Join(fs.Args(), " "))
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	return cli.ListAgents(ctx, c, a.project, *limit, stdout)
}
