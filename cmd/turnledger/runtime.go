package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/boltstore"
	"github.com/turnledger/turnledger/authn/natsbus"
	"github.com/turnledger/turnledger/serve"
	bolt "go.etcd.io/bbolt"
)

// defaultRuntimeAddr is where `turnledger runtime` listens unless --addr says otherwise.
const defaultRuntimeAddr = "127.0.0.1:8090"

// defaultRuntimeDB is the bbolt file used when neither --db nor DATABASE_URL is set.
const defaultRuntimeDB = "./data/runtime.db"

// runtimeExit is an error with an exit status; its message is printed as is.
type runtimeExit struct {
	code int
	msg  string
}

func (e *runtimeExit) Error() string { return e.msg }
func (e *runtimeExit) ExitCode() int { return e.code }

func runRuntime(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runtimeMain(ctx, args, os.Getenv, stdout, stderr)
}

// runtimeEnv lists the environment variables the runtime reads, for --help.
const runtimeEnv = `Environment (see docs/runtime.md):
  APP_ENV                  local (default), staging or production
  AUTH_MODE                dev (default), idp or hosted
  AUTH_REQUIRED            true/false; default true for idp, hosted, staging and production
  ALLOW_DEBUG_AUTH         true/false; default true only when APP_ENV=local
  ALLOW_QUERY_AUTH_TOKENS  true/false; default true when APP_ENV=local or AUTH_MODE=idp
  DEV_JWT_SECRET           HS256 secret of dev mode; must be changed in staging and production
  IDP_JWKS_URL             idp: key set URL
  IDP_AUDIENCE             idp: expected aud
  IDP_ISSUER_TEMPLATE      idp: issuer with {tenantid}
  HOSTED_AUTH_URL          hosted: base URL of the hosted auth service
  HOSTED_TENANT_CLAIM      hosted: this deployment's tenant (default "default")
  SECRET_ENCRYPTION_KEY    hosted: base64 of 32 bytes, encrypts provider profile keys
  CORS_ALLOWED_ORIGINS     comma-separated origins (or *)
  DATABASE_URL             postgres://… (runtime role), bolt:<path> or a file path (default ./data/runtime.db)
  DATABASE_ADMIN_URL       postgres://… of the schema owner: migrations at start, 'runtime migrate' and
                           'turnledger tenants' (or a bbolt path for tenants)
  DATABASE_REQUIRED        true/false; default true for idp and hosted
`

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
	dbFlag := fs.String("db", "", "postgres:// URL or bbolt database file (default: DATABASE_URL, else "+defaultRuntimeDB+")")
	natsURL := fs.String("nats-url", "", "NATS server for websocket fan-out (default: start an embedded server on a loopback port)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: turnledger runtime [flags]\n       turnledger runtime migrate [flags]     (PostgreSQL schema; see migrate --help)\n       turnledger runtime dev-issuer [flags]  (local hosted-auth stand-in; see dev-issuer --help)")
		fmt.Fprintln(fs.Output(), "\nServe the runtime authentication service: /health, /ready, /api/v1/auth/me,\n/api/v1/auth/ws-ticket, /api/v1/ws/execution and (hosted) /api/v1/provider-profiles.\n\nFlags:")
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output())
		fmt.Fprint(fs.Output(), runtimeEnv)
	}
	lim := serve.DefaultLimits()
	connFlags(fs, &lim, "the execution websocket is not cut by it")
	authFlags(fs, &lim, "per address")
	var logOpts logOptions
	logOpts.register(fs)
	if help, err := parseFlags(fs, args, stdout); help || err != nil {
		return err
	}
	if err := validateLimits(lim); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	logger, err := logOpts.logger(stderr)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &runtimeExit{code: 2, msg: fmt.Sprintf("turnledger runtime: unexpected argument %q", fs.Arg(0))}
	}

	cfg, problems := runtimeConfig(getenv)
	cfg.AuthFailures = lim.AuthFailures()
	if err := cfg.Validate(); err != nil {
		problems = append(problems, splitJoined(err)...)
	}
	db, err := resolveDB(*dbFlag, getenv("DATABASE_URL"), "DATABASE_URL")
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return configExit("runtime", problems)
	}

	logf := func(format string, a ...any) { logger.Info(fmt.Sprintf(format, a...)) }
	if getenv("APP_ENV") == "" {
		logger.Warn("turnledger runtime: APP_ENV is not set; using the local defaults (debug authentication allowed). Set APP_ENV=staging or production on a server.")
	}
	var store authn.Store
	bs, err := openRuntimeStore(ctx, db, getenv("DATABASE_ADMIN_URL"), logf)
	switch {
	case err == nil:
		defer bs.Close()
		store = bs
	case cfg.DatabaseRequired:
		return configExit("runtime", []string{"DATABASE_REQUIRED is true but the database cannot be opened: " + err.Error()})
	case isMisconfigured(err):
		return configExit("runtime", []string{err.Error()})
	default:
		logger.Warn("turnledger runtime: running without a database; tickets answer 503", "err", err)
	}
	if cfg.Mode == authn.ModeHosted && store != nil {
		if err := authn.CheckHostedTenant(ctx, cfg, store); err != nil {
			return configExit("runtime", []string{err.Error()})
		}
	}

	url := *natsURL
	if url == "" {
		ns, err := natsbus.StartEmbedded()
		if err != nil {
			return err
		}
		defer ns.Shutdown()
		url = ns.ClientURL()
		logf("turnledger runtime: embedded NATS at %s (join it with --nats-url)", url)
	}
	nc, err := nats.Connect(url, nats.Name("turnledger-runtime"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	defer nc.Close()

	srv, err := authn.NewServer(cfg, authn.Deps{Store: store, Bus: natsbus.New(nc), Logf: logf})
	if err != nil {
		return configExit("runtime", []string{err.Error()})
	}
	warnIfNotLoopback(logger, *addr)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	handler, err := withWebClient(srv, cfg, logf)
	if err != nil {
		ln.Close()
		return err
	}
	// serve's deadlines and connection cap. The execution websocket clears
	// the deadlines of its connection when it takes it over (authn/ws.go),
	// so they bound requests, not sockets.
	hs := lim.Server(handler)
	fmt.Fprintf(stdout, "turnledger runtime: listening on http://%s (AUTH_MODE=%s, APP_ENV=%s, database %s)\n", ln.Addr(), cfg.Mode, cfg.AppEnv, db)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(lim.Listen(ln)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); errors.Is(err, context.DeadlineExceeded) {
		// Asked to stop: what has not finished within the grace period is
		// cut, and the stop is still a clean one.
		logger.Warn("turnledger runtime: connections still busy 5s after the stop was asked were closed")
		return hs.Close()
	} else if err != nil {
		return err
	}
	return nil
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
	return &runtimeExit{code: 1, msg: b.String()}
}

func splitJoined(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

// runtimeConfig reads the environment: APP_ENV and AUTH_MODE choose the
// defaults, every other variable that is set overrides its default.
func runtimeConfig(getenv func(string) string) (authn.Config, []string) {
	appEnv := getenv("APP_ENV")
	if appEnv == "" {
		appEnv = authn.EnvLocal
	}
	mode := authn.Mode(getenv("AUTH_MODE"))
	if mode == "" {
		mode = authn.ModeDev
	}
	cfg := authn.Defaults(appEnv, mode)
	var problems []string
	boolVar := func(name string, dst *bool) {
		v := getenv(name)
		if v == "" {
			return
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s must be true or false, not %q", name, v))
			return
		}
		*dst = b
	}
	strVar := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	boolVar("AUTH_REQUIRED", &cfg.AuthRequired)
	boolVar("ALLOW_DEBUG_AUTH", &cfg.AllowDebugAuth)
	boolVar("ALLOW_QUERY_AUTH_TOKENS", &cfg.AllowQueryAuthTokens)
	boolVar("DATABASE_REQUIRED", &cfg.DatabaseRequired)
	strVar("DEV_JWT_SECRET", &cfg.DevJWTSecret)
	strVar("IDP_JWKS_URL", &cfg.IDPJWKSURL)
	strVar("IDP_AUDIENCE", &cfg.IDPAudience)
	strVar("IDP_ISSUER_TEMPLATE", &cfg.IDPIssuerTemplate)
	strVar("HOSTED_AUTH_URL", &cfg.HostedAuthURL)
	strVar("HOSTED_TENANT_CLAIM", &cfg.HostedTenantClaim)
	strVar("SECRET_ENCRYPTION_KEY", &cfg.SecretEncryptionKey)
	strVar("DATABASE_URL", &cfg.DatabaseURL)
	strVar("DATABASE_ADMIN_URL", &cfg.DatabaseAdminURL)
	for _, o := range strings.Split(getenv("CORS_ALLOWED_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.CORSAllowedOrigins = append(cfg.CORSAllowedOrigins, strings.TrimRight(o, "/"))
		}
	}
	return cfg, problems
}

func openStore(path string) (*boltstore.Store, error) {
	s, err := boltstore.Open(path, boltstore.Options{Timeout: 2 * time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("database %s is locked by another process (bbolt allows one writer process; stop the other `turnledger runtime` or `tenants` first)", path)
	}
	return s, err
}
