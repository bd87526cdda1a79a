// Command a2aclient is a runnable example of an A2A client calling a
// turnledger agent with the official Go SDK: it resolves the agent's card,
// sends one message (a new task), waits for the task to finish or to ask
// for input, and prints its state, its agent messages and its artifacts.
//
//	go run ./examples/a2aclient -url http://127.0.0.1:8000 -project demo -agent writer -skill summarize "Summarize the ticket"
//
// The calling agent's credential token is read from TURNLEDGER_AGENT_TOKEN;
// that agent needs the turns:dispatch grant (see docs/a2a.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv("TURNLEDGER_AGENT_TOKEN"), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "a2aclient:", err)
		os.Exit(1)
	}
}

// bearer sets the Authorization header of every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func run(ctx context.Context, args []string, token string, out io.Writer) error {
	fs := flag.NewFlagSet("a2aclient", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8000", "base URL of turnledger")
	project := fs.String("project", "demo", "project of the agent")
	agent := fs.String("agent", "writer", "the agent to ask")
	skill := fs.String("skill", "", "the skill (turn_kind) to ask for")
	contextID := fs.String("context", "", "the contextId of the conversation")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if token == "" {
		return errors.New("set TURNLEDGER_AGENT_TOKEN to the calling agent's credential token")
	}
	if fs.NArg() == 0 {
		return errors.New("give the message's text")
	}

	// The agent's card, then a client from it; every request carries the bearer.
	base := *url + "/a2a/projects/" + *project + "/agents/" + *agent
	hc := &http.Client{Transport: bearer{token}}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, base)
	if err != nil {
		return err
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc))
	if err != nil {
		return err
	}
	defer c.Destroy()

	// A message without a taskId is a new task: a Turn dispatched to the agent.
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Join(fs.Args(), " ")))
	msg.ContextID = *contextID
	if *skill != "" {
		msg.SetMeta("skill", *skill)
	}
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg}) // blocks until finished or waiting for input
	if err != nil {
		return err
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		return fmt.Errorf("the agent answered a %T, not a task", res)
	}
	fmt.Fprintf(out, "task %s: %s\n", task.ID, task.Status.State)
	for _, m := range task.History {
		if m.Role == a2a.MessageRoleAgent {
			fmt.Fprintf(out, "agent: %s\n", text(m.Parts))
		}
	}
	for _, a := range task.Artifacts {
		fmt.Fprintf(out, "artifact %s: %s\n", a.ID, text(a.Parts))
	}
	if m := task.Status.Message; m != nil {
		fmt.Fprintf(out, "status: %s\n", text(m.Parts))
	}
	return nil
}

// text shows parts: text as it is, anything else as JSON.
func text(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		if t := p.Text(); t != "" {
			out = append(out, t)
			continue
		}
		b, _ := p.MarshalJSON()
		out = append(out, string(b))
	}
	return strings.Join(out, " ")
}
