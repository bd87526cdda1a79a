// Package service runs the runtime authentication service as `turnledger
// runtime` runs it: its store (a bbolt file, or PostgreSQL migrated and
// granted through the schema owner's URL), NATS for the execution
// websocket's fan-out (an embedded server, or an external one), the authn
// server with the browser client under /app/, and serve's deadlines and
// connection cap. cmd/turnledger reads the flags and the environment into a
// Config and calls Run; `turnledger tenants` opens its store with
// OpenTenantAdmin.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/natsbus"
)

// Config is what Run needs.
type Config struct {
	Addr     string       // listen address (host:port)
	DB       DB           // the store (ResolveDB)
	AdminURL string       // DATABASE_ADMIN_URL: the schema owner's postgres:// URL, for migrations at start
	NATSURL  string       // NATS for the websocket fan-out; empty starts an embedded server on a loopback port
	Auth     authn.Config // the authn server's configuration, valid
	Limits   Limits       // the deadlines and the connection cap (the throttle is Auth.AuthFailures)
	Logger   *slog.Logger
}

// Limits bound the HTTP server: its deadlines (Server) and how many
// connections it holds open at once (Listen). serve.Limits is one.
type Limits interface {
	Server(http.Handler) *http.Server
	Listen(net.Listener) net.Listener
}

// ConfigError is a problem of the configuration or of the database found
// as the service starts: it does not start.
type ConfigError struct{ Problem string }

func (e *ConfigError) Error() string { return e.Problem }

// Run serves until ctx ends, then stops within 5 s, cutting what is still
// busy then. It prints the address it listens on to stdout.
func Run(ctx context.Context, cfg Config, stdout io.Writer) error {
	logger := cfg.Logger
	logf := func(format string, a ...any) { logger.Info(fmt.Sprintf(format, a...)) }
	var store authn.Store
	bs, err := OpenStore(ctx, cfg.DB, cfg.AdminURL, logf)
	switch {
	case err == nil:
		defer bs.Close()
		store = bs
	case cfg.Auth.DatabaseRequired:
		return &ConfigError{"DATABASE_REQUIRED is true but the database cannot be opened: " + err.Error()}
	case IsMisconfigured(err):
		return &ConfigError{err.Error()}
	default:
		logger.Warn("turnledger runtime: running without a database; tickets answer 503", "err", err)
	}
	if cfg.Auth.Mode == authn.ModeHosted && store != nil {
		if err := authn.CheckHostedTenant(ctx, cfg.Auth, store); err != nil {
			return &ConfigError{err.Error()}
		}
	}

	url := cfg.NATSURL
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

	srv, err := authn.NewServer(cfg.Auth, authn.Deps{Store: store, Bus: natsbus.New(nc), Logf: logf})
	if err != nil {
		return &ConfigError{err.Error()}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	handler, err := WithWebClient(srv, cfg.Auth, logf)
	if err != nil {
		ln.Close()
		return err
	}
	// serve's deadlines and connection cap. The execution websocket clears
	// the deadlines of its connection when it takes it over (authn/ws.go),
	// so they bound requests, not sockets.
	hs := cfg.Limits.Server(handler)
	fmt.Fprintf(stdout, "turnledger runtime: listening on http://%s (AUTH_MODE=%s, APP_ENV=%s, database %s)\n", ln.Addr(), cfg.Auth.Mode, cfg.Auth.AppEnv, cfg.DB)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(cfg.Limits.Listen(ln)) }()
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

// redactURL hides a password in a URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
