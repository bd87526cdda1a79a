package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/turnledger/turnledger/internal/cliflag"
	"github.com/turnledger/turnledger/monitor"
	"github.com/turnledger/turnledger/serve"
)

const monitorUsage = `Usage: turnledger monitor [--config FILE] [flags]

Serve the query monitor: run the configured queries on their schedules,
open errors when their checks fail, notify channels, and serve the JSON API
under /api/ (see docs/monitor.md). Secrets come from the environment
variables the configuration file names. Without --config it starts with a
built-in configuration that watches the local engine (--engine-url,
--projects; the admin token from TURNLEDGER_ADMIN_TOKEN or
<--engine-data>/admin-token).

Flags:
`

// runMonitor serves the query monitor until ctx ends.
func runMonitor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("monitor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "configuration file (JSON: connections, queries, channels); default: the built-in one")
	engineURL := fs.String("engine-url", "http://127.0.0.1:8000", "without --config: the engine to watch")
	engineData := fs.String("engine-data", "./data", "without --config: the engine's data directory, for its admin-token")
	projects := fs.String("projects", "", "without --config: comma-separated projects whose Turns to watch")
	addr := fs.String("addr", monitor.DefaultAddr, "address to serve the API on")
	dataPath := fs.String("data", "./"+monitor.DefaultDataPath, "bbolt file keeping errors and run history")
	noScheduler := fs.Bool("no-scheduler", false, "serve the API without running queries on schedule")
	var logOpts cliflag.LogOptions
	logOpts.Register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), monitorUsage)
		fs.PrintDefaults()
	}
	if help, err := cliflag.Parse(fs, args, stdout); help || err != nil {
		return err
	}
	logger, err := logOpts.Logger(stderr)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: turnledger monitor: unexpected argument %q (see --help)", errUsage, fs.Arg(0))
	}
	data, builtinToken, err := monitorConfig(configPath, *engineURL, *engineData, *projects, stdout)
	if err != nil {
		return err
	}
	file, err := monitor.ParseFile(data)
	if err != nil {
		return fmt.Errorf("%s: %w", *configPath, err)
	}
	cfg := monitor.DefaultConfig()
	cfg.File = file
	cfg.DataPath = *dataPath
	cfg.Logger = logger
	for _, name := range file.SecretEnvNames() {
		if v, ok := os.LookupEnv(name); ok {
			cfg.Secrets[name] = v
		}
	}
	if builtinToken != "" {
		cfg.Secrets[monitor.BuiltinTokenEnv] = builtinToken
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s:\n%w", *configPath, err)
	}
	m, err := monitor.Open(cfg)
	if err != nil {
		return err
	}
	defer m.Close()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		cfg.Logger.Warn("the monitor API has no authentication and is listening beyond loopback", "addr", ln.Addr().String())
	}
	fmt.Fprintf(stdout, "monitor listening on http://%s\n", ln.Addr())

	// The same deadlines and connection cap as serve's defaults (no request
	// of the monitor streams or waits).
	lim := serve.DefaultLimits()
	return m.Serve(ctx, lim.Server(m.Handler()), lim.Listen(ln), !*noScheduler)
}
