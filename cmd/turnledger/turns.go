package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	tl "github.com/turnledger/turnledger/client"
)

// runTurns runs `turnledger turns list|show` through the HTTP API.
func runTurns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "turnledger turns list --project P [--state S] [--target A] [--limit N] | turns show --project P TURN_ID"
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, use)
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
		if done, err := parseAPIFlags(fs, args[1:]); done {
			return err
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
		if done, err := parseAPIFlags(fs, args[1:]); done {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: %s", errUsage, use)
		}
		c, err := a.client()
		if err != nil {
			return err
		}
		t, err := c.GetTurn(ctx, a.project, fs.Arg(0))
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
