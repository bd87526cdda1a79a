// Package cli prints what `turnledger turns`, `agents` and `feed` show of a
// running service, read through the public client: Turn lists and details,
// agent lists, and feeds followed live (with their connections reported). Like package client it uses the
// standard library only.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
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

// CheckProject answers an error naming the project when it has no event
// yet: the API keeps no list of projects apart from their events, and a
// feed of a project that does not exist would wait in silence.
func CheckProject(ctx context.Context, c *client.Client, project string) error {
	pg, err := c.ProjectFeed(ctx, project, client.FeedQuery{Limit: 1})
	if err != nil {
		return err
	}
	if len(pg.Items) == 0 {
		return fmt.Errorf("project %q is unknown: it has no events (a mistyped --project?)", project)
	}
	return nil
}

// Tail is `feed tail`: it follows Feed after After and prints one FeedLine
// per event to Out, and to Log what a person watching needs besides: the
// feed it follows and from where, each lost connection and reconnection,
// and at the end the ledger_seq to resume after. Log hears of connections
// only through a client whose HTTP transport is Transport's.
type Tail struct {
	Feed     client.Feed
	Name     string // the feed as Log names it: "the feed of project demo"
	After    uint64
	Out, Log io.Writer

	mu        sync.Mutex
	connected bool // a connection has been made before
	failing   bool // the last attempt failed or the connection was lost
}

// Run follows the feed until ctx ends (then it returns nil) or the stream
// fails for good.
func (t *Tail) Run(ctx context.Context, c *client.Client) error {
	last := t.After
	for it, err := range c.Follow(ctx, t.Feed, t.After) {
		if err != nil {
			if last > t.After {
				t.resume(last)
			}
			return err
		}
		fmt.Fprintln(t.Out, FeedLine(it))
		last = it.LedgerSeq
	}
	t.resume(last)
	return nil
}

func (t *Tail) resume(last uint64) {
	fmt.Fprintf(t.Log, "stopped at ledger_seq %d; to go on from there: --after %d\n", last, last)
}

// Transport returns base (nil: http.DefaultTransport) reporting to Log
// each connection of the event stream, and each one lost.
func (t *Tail) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Header.Get("Accept") != "text/event-stream" {
			return base.RoundTrip(req)
		}
		after := req.Header.Get("Last-Event-ID")
		if after == "" {
			after = strconv.FormatUint(t.After, 10)
		}
		resp, err := base.RoundTrip(req)
		switch {
		case err != nil:
			t.lost(req.Context(), err.Error())
		case resp.StatusCode == http.StatusOK:
			t.mu.Lock()
			verb := "following"
			if t.connected {
				verb = "reconnected to"
			}
			t.connected, t.failing = true, false
			t.mu.Unlock()
			fmt.Fprintf(t.Log, "%s %s after ledger_seq %s\n", verb, t.Name, after)
			resp.Body = &watchedBody{ReadCloser: resp.Body, ctx: req.Context(), t: t}
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			t.lost(req.Context(), resp.Status) // Follow tries again; anything else ends it with its error
		}
		return resp, err
	})
}

// lost reports a failed attempt or a dropped connection once, until the
// next connection.
func (t *Tail) lost(ctx context.Context, why string) {
	if ctx.Err() != nil {
		return // the end the user asked for
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failing {
		return
	}
	t.failing = true
	if t.connected {
		fmt.Fprintf(t.Log, "lost %s (%s); reconnecting\n", t.Name, why)
	} else {
		fmt.Fprintf(t.Log, "cannot reach %s (%s); trying again\n", t.Name, why)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// watchedBody is a stream's body that reports its end.
type watchedBody struct {
	io.ReadCloser
	ctx context.Context
	t   *Tail
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		why := err.Error()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			why = "the connection closed"
		}
		b.t.lost(b.ctx, why)
	}
	return n, err
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
