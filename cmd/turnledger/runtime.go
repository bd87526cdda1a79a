package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turnledger/turnledger/authn/service"
	"github.com/turnledger/turnledger/internal/cliflag"
	"github.com/turnledger/turnledger/serve"
)

// defaultRuntimeAddr is where `turnledger runtime` listens unless --addr says otherwise.
const defaultRuntimeAddr = "127.0.0.1:8090"

func runRuntime(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runtimeMain(ctx, args, os.Getenv, stdout, stderr)
}

func runtimeMain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "migrate":
			return runtimeMigrate(ctx, args[1:], getenv, stdout, stderr)
		case "dev-issuer":
			return runtimeDevIssuer(ctx, args[1:], getenv, stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("runtime", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", defaultRuntimeAddr, "listen address (host:port); loopback by default")
	dbFlag := fs.String("db", "", "postgres:// URL or bbolt database file (default: DATABASE_URL, else "+service.DefaultDBPath+")")
	natsURL := fs.String("nats-url", "", "NATS server for websocket fan-out (default: start an embedded server on a loopback port)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: turnledger runtime [flags]\n       turnledger runtime migrate [flags]     (PostgreSQL schema; see migrate --help)\n       turnledger runtime dev-issuer [flags]  (local hosted-auth stand-in; see dev-issuer --help)")
		fmt.Fprintln(fs.Output(), "\nServe the runtime authentication service: /health, /ready, /api/v1/auth/me,\n/api/v1/auth/ws-ticket, /api/v1/ws/execution and (hosted) /api/v1/provider-profiles.\n\nFlags:")
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output())
		fmt.Fprint(fs.Output(), service.EnvHelp)
	}
	lim := serve.DefaultLimits()
	connFlags(fs, &lim, "the execution websocket is not cut by it")
	authFlags(fs, &lim, "per address")
	var logOpts cliflag.LogOptions
	logOpts.Register(fs)
	if help, err := cliflag.Parse(fs, args, stdout); help || err != nil {
		return err
	}
	if err := validateLimits(lim); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	logger, err := logOpts.Logger(stderr)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitCodeError{code: 2, msg: fmt.Sprintf("turnledger runtime: unexpected argument %q", fs.Arg(0))}
	}

	cfg, problems := service.AuthConfigFromEnv(getenv, lim.AuthFailures())
	db, err := service.ResolveDB(*dbFlag, getenv("DATABASE_URL"), "DATABASE_URL")
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return configExit("runtime", problems)
	}

	if getenv("APP_ENV") == "" {
		logger.Warn("turnledger runtime: APP_ENV is not set; using the local defaults (debug authentication allowed). Set APP_ENV=staging or production on a server.")
	}
	cliflag.WarnIfNotLoopback(logger, *addr)
	err = service.Run(ctx, service.Config{Addr: *addr, DB: db, AdminURL: getenv("DATABASE_ADMIN_URL"), NATSURL: *natsURL, Auth: cfg, Limits: lim, Logger: logger}, stdout)
	if ce := (*service.ConfigError)(nil); errors.As(err, &ce) {
		return configExit("runtime", []string{ce.Problem})
	}
	return err
}

// configExit prints one line per problem and exits with status 1.
func configExit(cmd string, problems []string) error {
	var b strings.Builder
	for i, p := range problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "turnledger %s: %s", cmd, p)
	}
	return &exitCodeError{code: 1, msg: b.String()}
}
