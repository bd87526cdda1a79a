package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	tl "github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/client/cli"
	"github.com/turnledger/turnledger/internal/cliflag"
)

// runTurns runs `turnledger turns list|show` through the HTTP API.
func runTurns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "turnledger turns list --project P [--state S] [--target A] [--limit N] | turns show --project P TURN_ID"
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, use)
	}
	if args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdout, "Usage: "+use)
		return nil
	}
	fs := flag.NewFlagSet("turns "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a apiFlags
	a.register(fs)
	switch args[0] {
	case "list":
		state := fs.String("state", "", "only Turns in this state (queued, claimed, suspended, finished)")
		target := fs.String("target", "", "only Turns targeting this agent")
		limit := fs.Int("limit", 50, "how many Turns at most (follows the cursor past 500)")
		a.usage(fs, "turns list --project P [--state S] [--target A] [--limit N]", "Lists a project's Turns through the HTTP API, with the admin token.")
		if help, err := cliflag.Parse(fs, args[1:], stdout); help || err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: turns list takes no arguments, got %q", errUsage, strings.Join(fs.Args(), " "))
		}
		c, err := a.client()
		if err != nil {
			return err
		}
		return cli.ListTurns(ctx, c, a.project, tl.TurnQuery{State: *state, TargetAgentID: *target}, *limit, stdout)
	case "show":
		a.usage(fs, "turns show --project P TURN_ID", "Prints a Turn and its context as JSON, read through the HTTP API with the admin token.")
		// Flags may come before or after the Turn id.
		ids, help, err := cliflag.ParseInterspersed(fs, args[1:], stdout)
		if help || err != nil {
			return err
		}
		if len(ids) != 1 {
			return fmt.Errorf("%w: %s", errUsage, use)
		}
		c, err := a.client()
		if err != nil {
			return err
		}
		return cli.ShowTurn(ctx, c, a.project, ids[0], stdout)
	}
	return fmt.Errorf("%w: %s", errUsage, use)
}
