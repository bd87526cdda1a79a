// Command turnledger is the one binary of the project: the coordination API
// (serve, replay), the runtime authentication service (runtime, tenants), the
// query monitor (monitor), the partner subcategory listing (catalogue) and the
// deployment configuration validator (deployconfig).
//
// Each subcommand lives in a file of its own and only maps its flags and
// environment onto the configuration of the package that does the work
// (serve, bench, authn/service, monitor, catalogue, deployconfig, client/cli);
// main only sets up signals and dispatches.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	tl "github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/internal/cliflag"
)

// command is one subcommand: run gets the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "serve the agent work coordination API (embedded NATS or --nats-url)", runServe},
		{"replay", "rebuild every projection from ledger_seq 1 and swap it in", runReplay},
		{"archive", "read the archive below the retention horizon (ls|verify|cat)", runArchive},
		{"feed", "follow a feed live and print one line per event (tail)", runFeed},
		{"turns", "list or show Turns through the HTTP API (list|show)", runTurns},
		{"agents", "list agents through the HTTP API (list)", runAgents},
		{"a2a-bridge", "forward an agent's Turns to a remote A2A agent", runA2ABridge},
		{"runtime", "serve the runtime authentication service", runRuntime},
		{"tenants", "administer the runtime's tenant allowlist (add|suspend|delete|list)", runTenants},
		{"monitor", "serve the query monitor", runMonitor},
		{"catalogue", "serve the partner subcategory listing", runCatalogue},
		{"deployconfig", "validate deployment configuration files (validate|schema)", runDeployconfig},
		{"bench", "measure Turn lifecycles, feed pages, replay and start-up against the raw append rate", runBench},
		{"version", "print the version, VCS revision and embedded NATS server version", runVersion},
	}
}

// errUsage marks an error whose message is a usage text: exit status 2.
var errUsage = cliflag.ErrUsage

// exitCoder lets a subcommand choose its exit status.
type exitCoder interface{ ExitCode() int }

// exitCodeError carries an exit status and the message printed for it (as
// is; none when empty).
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string { return e.msg }
func (e *exitCodeError) ExitCode() int { return e.code }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main runs the subcommand named by args[0] and returns the exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = []string{"version"}
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ec exitCoder
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ec):
			if msg := err.Error(); msg != "" {
				fmt.Fprintln(stderr, msg)
			}
			return ec.ExitCode()
		case errors.Is(err, errUsage):
			msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
			if !strings.HasPrefix(msg, "turnledger ") {
				msg = "turnledger " + c.name + ": " + msg
			}
			fmt.Fprintln(stderr, msg)
			return 2
		default:
			fmt.Fprintf(stderr, "turnledger %s: %s\n", c.name, errorText(err))
			return 1
		}
	}
	fmt.Fprintf(stderr, "turnledger: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// errorText is err's message with the client's own "turnledger: " prefix
// dropped from the service's error inside it, since Main prints
// "turnledger <command>: " before it.
func errorText(err error) string {
	msg := err.Error()
	var ce *tl.Error
	if errors.As(err, &ce) {
		msg = strings.Replace(msg, ce.Error(), fmt.Sprintf("%d %s: %s", ce.Status, ce.Name, ce.Message), 1)
	}
	return msg
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: turnledger <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'turnledger <command> --help' for the flags of a command.")
}
