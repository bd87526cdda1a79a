// Package cli prints what `turnledger turns`, `agents` and `feed` show of a
// running service, read through the public client: Turn lists and details,
// agent lists, and feeds followed live. Like package client it uses the
// standard library only.
package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/turnledger/turnledger/client"
)

// ListTurns prints up to limit of the project's Turns that match q as a
// table, following the cursor past the API's page of 500.
func ListTurns(ctx context.Context, c *client.Client, project string, q client.TurnQuery, limit int, w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TURN\tKIND\tSTATE\tOUTCOME\tTARGET\tREQUESTED BY\tUPDATED")
	for n := 0; n < limit; {
		q.Limit = min(limit-n, 500)
		pg, err := c.ListTurns(ctx, project, q)
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
}

// ShowTurn prints the Turn and the first 500 items of its context as JSON.
func ShowTurn(ctx context.Context, c *client.Client, project, turn string, w io.Writer) error {
	t, err := c.GetTurn(ctx, project, turn)
	if err != nil {
		return err
	}
	ctxPage, err := c.TurnContext(ctx, project, t.TurnID, 0, 500)
	if err != nil {
		return err
	}
	out := struct {
		Turn    *client.Turn         `json:"turn"`
		Context []client.ContextItem `json:"context"`
	}{t, ctxPage.Items}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// ListAgents prints up to limit (at most 500) of the project's agents as a
// table.
func ListAgents(ctx context.Context, c *client.Client, project string, limit int, w io.Writer) error {
	pg, err := c.ListAgents(ctx, project, client.AgentQuery{Limit: limit})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tROLE\tADMITTING\tCLAIMS\tCAPACITY\tPRESENCE\tCAPABILITIES")
	for _, ag := range pg.Items {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%s\t%s\n", ag.AgentID, ag.Role, ag.Admitting, ag.ActiveClaims, ag.Capacity, ag.Presence, strings.Join(ag.Capabilities, ","))
	}
	return tw.Flush()
}

// TailFeed follows feed from after over its event stream (reconnecting from
// the last event seen) and prints one FeedLine per event until ctx ends or
// the stream fails for good.
func TailFeed(ctx context.Context, c *client.Client, feed client.Feed, after uint64, w io.Writer) error {
	for it, err := range c.Follow(ctx, feed, after) {
		if err != nil {
			return err
		}
		fmt.Fprintln(w, FeedLine(it))
	}
	return nil
}

// FeedLine is one event as `feed tail` prints it:
//
//	<ledger_seq> <at> <type> <aggregate>/<id> by <actor>
func FeedLine(it client.FeedItem) string {
	actor := it.Actor.Kind
	if it.Actor.AgentID != "" {
		actor += ":" + it.Actor.AgentID
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %s %s/%s by %s", it.LedgerSeq, it.At.UTC().Format("2006-01-02T15:04:05.000Z"), it.Type, it.Aggregate, it.ID, actor)
	return b.String()
}
