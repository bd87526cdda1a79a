package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	tl "github.com/turnledger/turnledger/client"
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
		if help, err := parseFlags(fs, args[1:], stdout); help || err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: turns list takes no arguments, got %q", errUsage, strings.Join(fs.Args(), " "))
		}
		c, err := a.client()
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TURN\tKIND\tSTATE\tOUTCOME\tTARGET\tREQUESTED BY\tUPDATED")
		q := tl.TurnQuery{State: *state, TargetAgentID: *target}
		for n := 0; n < *limit; {
			q.Limit = min(*limit-n, 500)
			pg, err := c.ListTurns(ctx, a.project, q)
			if err != nil {
				return err
			}
			for _, t := range pg.Items {
				outcome := "-"
				if t.Outcome != nil {
					outcome = *t.Outcome
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.TurnID, t.TurnKind, t.State, outcome, t.TargetAgent.AgentID, t.RequestedBy.AgentID, t.UpdatedAt.UTC().Format("2006-01-02T15:04:05Z"))
				n++
			}
			if !pg.More() || pg.NextAfterLedgerSeq == nil {
				break
			}
			q.AfterLedgerSeq = *pg.NextAfterLedgerSeq
		}
		return tw.Flush()
	case "show":
		a.usage(fs, "turns show --project P TURN_ID", "Prints a Turn and its context as JSON, read through the HTTP API with the admin token.")
		// Flags may come before or after the Turn id.
		var ids []string
		for rest := args[1:]; ; rest = fs.Args()[1:] {
			if help, err := parseFlags(fs, rest, stdout); help || err != nil {
				return err
			}
			if fs.NArg() == 0 {
				break
			}
			ids = append(ids, fs.Arg(0))
		}
		if len(ids) != 1 {
			return fmt.Errorf("%w: %s", errUsage, use)
		}
		c, err := a.client()
		if err != nil {
			return err
		}
		t, err := c.GetTurn(ctx, a.project, ids[0])
		if err != nil {
			return err
		}
		ctxPage, err := c.TurnContext(ctx, a.project, t.TurnID, 0, 500)
		if err != nil {
			return err
		}
		out := struct {
			Turn    *tl.Turn         `json:"turn"`
			Context []tl.ContextItem `json:"context"`
		}{t, ctxPage.Items}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return fmt.Errorf("%w: %s", errUsage, use)
}
