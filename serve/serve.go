// Package serve wires one turnledger service together, as `turnledger
// serve` runs it: NATS (the embedded server, or an external server or
// cluster), the ledger, the engine, the projections with their projector,
// the reaper, the metrics registry and the HTTP API with its protections
// against overload (Limits). It also rebuilds the projections of a data
// directory (Replay).
//
// A Config says what to start; DefaultConfig gives serve's defaults and
// Validate reports every problem. Only cmd/turnledger reads flags and the
// environment into a Config; tests that need a whole stack start one with
// Start too, with the ledger's stream in memory (Ledger.Storage), the data
// directory in t.TempDir(), a loopback port 0 and, where they expire claims
// without sleeping, their own clock (Now).
package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/turnledger/turnledger/a2aapi"
	"github.com/turnledger/turnledger/console"
	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/mcpapi"
	"github.com/turnledger/turnledger/projection"
)

// Config is everything a service needs. cmd/turnledger fills it from the
// flags and the environment of `turnledger serve`.
type Config struct {
	Addr        string   // listen address of the API
	DataDir     string   // projections, the admin token, and the embedded NATS store
	NATSURL     string   // an existing NATS server or cluster (comma-separated URLs); empty starts the embedded one
	NATSAuth    NATSAuth // credentials and TLS for NATSURL
	AdminToken  string   // the admin bearer; empty reads or makes DataDir/admin-token
	MetricsOpen bool     // serve /metrics to any client, not only loopback ones
	PublicURL   string   // the base of input_url and of the MCP resource metadata; empty: as the request came
	// MCPOrigins are the browser origins besides serve's own that may call
	// the MCP endpoint (mcpapi.Config.AllowedOrigins).
	MCPOrigins   []string
	ReapInterval time.Duration // 0 turns the background reaper off
	Sync         ledger.Sync   // durability of the embedded server
	// ProjectionSync is when the projection file is fsynced:
	// ProjectionSyncClose or ProjectionSyncCommit.
	ProjectionSync string
	Limits         Limits
	Kernel         engine.Config
	Ledger         ledger.Config // Ledger.Storage = ledger.MemoryStorage keeps the stream in memory (tests)
	Logger         *slog.Logger
	RequestLog     bool      // one log line per request (httpapi.RequestLog)
	Lag            LagBounds // past them /readyz answers 503
	// Retention archives old events, purges the stream below them and
	// retires old finished Turn trees (retention.go). Off by default.
	Retention RetentionConfig

	// Now, when set, is the clock of the engine, the projections and the
	// API in place of Kernel.Now and time.Now, so that a test can expire
	// claims without sleeping.
	Now func() time.Time

	// ProjectorSource, when set, wraps the ledger as the projector follows
	// it. Tests only: they hold the projector back to watch /readyz while
	// it is behind.
	ProjectorSource func(projection.Source) projection.Source
}

// DefaultConfig is serve's defaults: 127.0.0.1:8000, ./data, the embedded
// NATS server with an fsync per append, the projection file fsynced at
// shutdown, a reaper every 5 s, and logs as text on standard error.
func DefaultConfig() Config {
	return Config{
		Addr:           "127.0.0.1:8000",
		DataDir:        "./data",
		ReapInterval:   5 * time.Second,
		Sync:           ledger.SyncAlways,
		ProjectionSync: ProjectionSyncClose,
		Limits:         DefaultLimits(),
		Kernel:         engine.DefaultConfig(),
		Ledger:         ledger.DefaultConfig(),
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Lag:            LagBounds{Events: MaxProjectionLag, Stall: MaxProjectionStall},
		Retention:      RetentionConfig{CompactFreeShare: 0.5},
	}
}

// Validate reports every problem of c, joined. The parts' own
// configurations (Kernel, Ledger) are checked by the parts as Start opens
// them.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("serve: a listen address (Addr) is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("serve: a data directory (DataDir) is required"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("serve: a logger is required"))
	}
	if c.ReapInterval < 0 {
		errs = append(errs, errors.New("serve: the reap interval must not be negative"))
	}
	switch c.ProjectionSync {
	case ProjectionSyncClose, ProjectionSyncCommit:
	default:
		errs = append(errs, fmt.Errorf("serve: ProjectionSync must be %q or %q, not %q", ProjectionSyncClose, ProjectionSyncCommit, c.ProjectionSync))
	}
	switch c.Sync {
	case ledger.SyncAlways, ledger.SyncInterval:
	default:
		errs = append(errs, fmt.Errorf("serve: Sync must be %q or %q, not %q", ledger.SyncAlways, ledger.SyncInterval, c.Sync))
	}
	if c.NATSURL == "" && c.Ledger.Replicas > 1 {
		errs = append(errs, fmt.Errorf("serve: %d replicas need an external NATS cluster (NATSURL): the embedded server is a single node", c.Ledger.Replicas))
	}
	errs = append(errs, c.Limits.Validate(), c.NATSAuth.Validate(c.NATSURL), c.Retention.validate())
	return errors.Join(errs...)
}

// Service is one running turnledger: NATS (embedded or external), the
// ledger, the engine, the projector, the reaper and the HTTP API.
type Service struct {
	cfg       Config
	embedded  *ledger.Embedded
	nc        *nats.Conn
	ledger    *ledger.Store
	store     *projection.Store
	engine    *engine.Engine
	projector *projection.Projector
	reaper    *engine.Reaper
	archived  *ledger.Archived  // the ledger read through its archive, when there is one (retention.go)
	retention *engine.Retention // nil until started
	api       *httpapi.Server
	mcp       *mcpapi.Handler
	a2a       *a2aapi.Handler
	http      *http.Server
	listener  net.Listener
	tokenPath string    // where the admin token is kept, when it came from a file
	healed    bool      // the projection file was damaged and is being rebuilt (reliability.go)
	healUntil uint64    // the ledger head when it was; not ready before the rebuild reaches it
	heads     headProbe // the ledger head for the diagnostics of pages where the ledger does not know it (ledger.Store.KnownHead), one read shared by pages that wait together

	cancel context.CancelFunc
	wg     sync.WaitGroup
	lag    lagWatch
	trends *trendRing // the last hour, for GET /admin/v1/trends (trends.go)
}

// Start opens every part and starts serving. Close stops it.
func Start(ctx context.Context, cfg Config) (_ *Service, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now != nil {
		cfg.Kernel.Now = cfg.Now
	}
	s := &Service{cfg: cfg, lag: lagWatch{bounds: cfg.Lag}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	if err := checkProjectionsFree(cfg.DataDir); err != nil {
		return nil, err
	}
	token := cfg.AdminToken
	if token == "" {
		if token, s.tokenPath, err = adminToken(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	if len(cfg.Kernel.SecretKey) == 0 {
		if cfg.Kernel.SecretKey, err = secretKey(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	if cfg.Retention.RetainFinished > 0 {
		cfg.Ledger.AllowPurge = true // a new stream may be purged below the archived horizon
	}
	if s.embedded, s.nc, s.ledger, err = openLedger(ctx, cfg.DataDir, cfg.NATSURL, cfg.NATSAuth, cfg.Ledger, cfg.Sync); err != nil {
		return nil, err
	}
	s.heads.fetch = s.ledger.Head
	if err := s.openArchive(ctx); err != nil {
		return nil, err
	}
	s.compactProjections(filepath.Join(cfg.DataDir, "projections.db"))
	if err := s.openProjections(filepath.Join(cfg.DataDir, "projections.db")); err != nil {
		return nil, err
	}
	if head, err := s.ledger.Head(ctx); err != nil {
		return nil, err
	} else if cp := s.store.Checkpoint(); cp > head {
		return nil, fmt.Errorf("the projections in %s are at ledger_seq %d but the ledger ends at %d: the ledger is not the one they were folded from (its NATS data was lost or replaced); run `turnledger replay` to rebuild them from this ledger", cfg.DataDir, cp, head)
	} else if s.healed {
		s.healUntil = head
	}
	metrics := newMetrics() // the one Prometheus registry (metrics.go)
	if s.engine, err = engine.New(timedLedger{s.readLedger(), metrics.appends}, cfg.Kernel); err != nil {
		return nil, err
	}
	s.engine.KeepSnapshots(s.store, snapshotEvery)
	var src projection.Source = s.readLedger()
	if cfg.ProjectorSource != nil {
		src = cfg.ProjectorSource(src)
	}
	src = newTurnTap(metrics.turns, cfg.Kernel.Now).source(src) // the Turn metrics (trends.go)
	s.trends = newTrendRing(metrics.reg, cfg.Kernel.Now)
	s.projector = projection.NewProjector(s.store, src)
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.projector.Run(runCtx)
	}()
	projects, err := s.store.Projects()
	if err != nil {
		return nil, err
	}
	// The write models load in the background (see kernel/load.go): serve
	// listens at once, and a request of a project still loading is answered
	// 503 with Retry-After after a short wait.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.engine.Preload(runCtx, projects); err != nil && runCtx.Err() == nil {
			cfg.Logger.Warn("load write models", "err", err)
		}
	}()
	s.reaper = engine.NewReaper(s.engine, s.store, cfg.ReapInterval, cfg.Logger)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.reaper.Run(runCtx)
	}()
	s.startRetention(runCtx)

	hcfg := httpapi.DefaultConfig()
	hcfg.AdminTokenHash = kernel.HashSecret(token)
	hcfg.Ready = s.ready
	hcfg.Diagnostics = s.diagnostics
	hcfg.Trends = s.trends.Trends
	hcfg.Now = cfg.Kernel.Now
	hcfg.Metrics = httpapi.MetricsConfig{Handler: metrics.handler(), FromAnywhere: cfg.MetricsOpen, Observer: metrics}
	hcfg.Logger = cfg.Logger
	hcfg.PublicURL = cfg.PublicURL
	cfg.Limits.apply(&hcfg)
	// One throttle of failed authentications for every face: an address
	// has one budget of wrong tokens, whichever face it tries them on.
	hcfg.AuthGuard = faceauth.NewGuard(hcfg.AuthFailures, hcfg.Now)
	mcfg := mcpapi.DefaultConfig()
	mcfg.Now, mcfg.Logger, mcfg.MaxBodyBytes, mcfg.AuthGuard = hcfg.Now, hcfg.Logger, hcfg.MaxBodyBytes, hcfg.AuthGuard
	mcfg.AllowedOrigins, mcfg.PublicURL = cfg.MCPOrigins, cfg.PublicURL
	if s.mcp, err = mcpapi.New(s.engine, s.store, mcfg); err != nil {
		return nil, err
	}
	acfg := a2aapi.DefaultConfig()
	acfg.Now, acfg.Logger, acfg.MaxBodyBytes, acfg.AuthGuard, acfg.PublicURL = hcfg.Now, hcfg.Logger, hcfg.MaxBodyBytes, hcfg.AuthGuard, cfg.PublicURL
	if s.a2a, err = a2aapi.New(s.engine, s.store, acfg); err != nil {
		return nil, err
	}
	hcfg.Mounts = []httpapi.Mount{{Prefix: mcpapi.PathPrefix, Handler: s.mcp, Project: mcpapi.ProjectOf}, {Prefix: mcpapi.MetadataPrefix, Handler: s.mcp},
		{Prefix: a2aapi.PathPrefix, Handler: s.a2a, Project: a2aapi.ProjectOf}}
	if s.api, err = httpapi.New(s.engine, s.store, hcfg); err != nil {
		return nil, err
	}
	metrics.watch(s)
	metrics.watchRetention(s)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.trends.run(runCtx)
	}()
	if s.listener, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s.listener = cfg.Limits.Listen(s.listener)
	var handler http.Handler = console.Mount(s.api)
	if cfg.RequestLog {
		handler = httpapi.RequestLog(cfg.Logger, handler)
	}
	s.http = cfg.Limits.Server(handler)
	s.http.ErrorLog = slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(s.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("http server stopped", "err", err)
		}
	}()
	return s, nil
}

// openLedger connects to NATS — the embedded server with its store under
// dataDir/nats, or the server at natsURL — and opens the ledger on it. On
// error everything opened is closed again.
func openLedger(ctx context.Context, dataDir, natsURL string, auth NATSAuth, cfg ledger.Config, sync ledger.Sync) (emb *ledger.Embedded, nc *nats.Conn, l *ledger.Store, err error) {
	defer func() {
		if err != nil {
			if nc != nil {
				nc.Close()
			}
			if emb != nil {
				emb.Close()
			}
		}
	}()
	if natsURL == "" {
		ecfg := ledger.DefaultEmbeddedConfig(filepath.Join(dataDir, "nats"))
		ecfg.Sync = sync
		// --sync always: an append is durable once a shared fsync covers
		// it, and the engine answers only then (ledger/groupsync.go).
		ecfg.GroupCommit = true
		if emb, err = ledger.StartEmbedded(ecfg); err != nil {
			return nil, nil, nil, err
		}
		if nc, l, err = emb.Open(ctx, cfg); err != nil {
			return nil, nil, nil, err
		}
		return emb, nc, l, nil
	}
	if nc, err = nats.Connect(natsURL, auth.Options()...); err != nil {
		return nil, nil, nil, fmt.Errorf("connect to NATS at %s: %w", RedactURLs(natsURL), err)
	}
	if l, err = ledger.Open(ctx, nc, cfg); err != nil {
		return nil, nil, nil, err
	}
	return emb, nc, l, nil
}

// Run starts the service, says on out where it serves, its ledger, its
// projections and its admin token, serves until ctx ends, and closes it.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	s, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	backend := "embedded NATS (JetStream under " + cfg.DataDir + "/nats)"
	if cfg.NATSURL != "" {
		backend = "NATS at " + RedactURLs(cfg.NATSURL)
	}
	fmt.Fprintf(out, "turnledger serving on %s, ledger on %s, projections in %s/projections.db\n", s.URL(), backend, cfg.DataDir)
	fmt.Fprintf(out, "web console: %s/console/ (sign in with the admin bearer token)\n", s.URL())
	if s.tokenPath != "" {
		fmt.Fprintf(out, "admin bearer token: in %s (set TURNLEDGER_ADMIN_TOKEN to choose your own)\n", s.tokenPath)
	} else {
		fmt.Fprintln(out, "admin bearer token: from TURNLEDGER_ADMIN_TOKEN")
	}
	<-ctx.Done()
	fmt.Fprintln(out, "shutting down")
	return s.Close()
}

// URL is the base URL of the API.
func (s *Service) URL() string { return "http://" + s.listener.Addr().String() }

// AdminTokenPath is the file the admin token was read from or written to,
// or "" when Config.AdminToken gave it.
func (s *Service) AdminTokenPath() string { return s.tokenPath }

// Handler is the service's whole HTTP handler (the API, the console, the
// request log), as its server serves it.
func (s *Service) Handler() http.Handler { return s.http.Handler }

// API is the HTTP API.
func (s *Service) API() *httpapi.Server { return s.api }

// Ledger is the ledger the engine appends to.
func (s *Service) Ledger() *ledger.Store { return s.ledger }

// Store is the projection store.
func (s *Service) Store() *projection.Store { return s.store }

// NATS is the connection to the NATS server the ledger is on.
func (s *Service) NATS() *nats.Conn { return s.nc }

// Embedded is the embedded NATS server, nil with an external one (the
// bench opens a ledger of its own on it, committing in groups as serve's).
func (s *Service) Embedded() *ledger.Embedded { return s.embedded }

// Reaper is the reaper of expired claims.
func (s *Service) Reaper() *engine.Reaper { return s.reaper }

// Config is the configuration the service runs with.
func (s *Service) Config() Config { return s.cfg }

// Close stops serving and closes every part, the last opened first.
func (s *Service) Close() error {
	var errs []error
	if s.api != nil {
		s.api.StopWaiting() // long polls and event streams end, so Shutdown does not wait for them
	}
	if s.mcp != nil {
		s.mcp.StopWaiting() // likewise MCP's waiting claims and streams
	}
	if s.a2a != nil {
		s.a2a.StopWaiting()
	}
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, s.http.Shutdown(ctx))
		cancel()
	} else if s.listener != nil {
		s.listener.Close()
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	if s.engine != nil && s.store != nil {
		// The next start loads the write models from here (kernel/snapshot.go).
		if err := s.engine.SaveSnapshots(); err != nil {
			s.cfg.Logger.Warn("save write-model snapshots", "err", err)
		}
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	if s.nc != nil {
		s.nc.Close()
	}
	if s.embedded != nil {
		errs = append(errs, s.embedded.Close())
	}
	return errors.Join(errs...)
}

// Readiness is the body of /readyz: each part's own report.
type Readiness struct {
	Status      string              `json:"status"` // "ready" or "not_ready"
	Backend     ledger.Report       `json:"backend"`
	Projections projection.Health   `json:"projections"`
	Reaper      engine.ReaperStatus `json:"reaper"`
	// Stream is the ledger stream's own status: its replicas, storage and
	// leader (absent when it cannot be read).
	Stream *ledger.StreamStatus `json:"stream,omitempty"`
	Lag    LagReport            `json:"projection_lag"`
	// WriteModelsLoading is how many projects are still loading their write
	// model; their requests are answered 503 with Retry-After meanwhile.
	WriteModelsLoading int `json:"write_models_loading"`
	// Retention is the retention's horizon, archive and last run.
	Retention engine.RetentionStatus `json:"retention"`
}

// snapshotEvery: a load that folded this many events after the project's
// snapshot saves a new one; serve also saves them when it stops.
const snapshotEvery = 20_000

// probeTimeout bounds the ledger look-ups of /readyz and of the diagnostics,
// so that an unreachable NATS server makes them answer quickly, not hang.
const probeTimeout = 2 * time.Second

func (s *Service) ready(ctx context.Context) (any, bool) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	r := Readiness{Status: "ready", Backend: s.ledger.Report(ctx), Reaper: s.reaper.Status(), WriteModelsLoading: s.engine.Loading(), Retention: s.retention.Status()}
	r.Backend.Kind = "embedded"
	if s.embedded == nil {
		r.Backend.Kind, r.Backend.URL = "external", RedactURLs(s.cfg.NATSURL)
	}
	if stream, err := s.ledger.Status(ctx); err == nil {
		r.Stream = &stream
	}
	r.Projections = s.projector.Health(r.Backend.LedgerHead)
	if r.Backend.Error == "" {
		if r.Lag = s.lag.check(s.cfg.Kernel.Now(), r.Backend.LedgerHead, r.Projections.AppliedSeq); !r.Lag.WithinBound {
			r.Status = "not_ready"
		}
	}
	if r.Backend.Error != "" || r.Projections.Failing {
		r.Status = "not_ready"
	}
	s.readyProjections(&r)
	return r, r.Status == "ready"
}

func (s *Service) diagnostics(ctx context.Context) []httpapi.Diagnostic {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d []httpapi.Diagnostic
	head, known := s.ledger.KnownHead()
	var err error
	if !known {
		head, err = s.heads.get(ctx)
	}
	h := s.projector.Health(head)
	if err != nil {
		h.Lag = 0 // unknown without the head
	}
	for _, p := range h.Problems() {
		d = append(d, httpapi.Diagnostic{Code: p.Code, Message: p.Message})
	}
	if err != nil {
		d = append(d, httpapi.Diagnostic{Code: "ledger_unreachable", Message: "the ledger head cannot be read: " + err.Error()})
	}
	return d
}

// ReadAdminToken reads the admin token a service keeps in dataDir (an
// error wrapping os.ErrNotExist when there is none).
func ReadAdminToken(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// adminToken reads the admin token kept in the data directory, or makes one
// (256 random bits) and keeps it there with mode 0600.
func adminToken(dir string) (token, path string, err error) {
	path = filepath.Join(dir, "admin-token")
	b, err := os.ReadFile(path)
	if err == nil {
		if t := string(bytes.TrimRight(b, "\r\n ")); t != "" {
			return t, path, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("read admin token: %w", err)
	}
	var raw [32]byte
	if _, err := io.ReadFull(rand.Reader, raw[:]); err != nil {
		return "", "", err
	}
	token = "tladm_" + base64.RawURLEncoding.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("write admin token: %w", err)
	}
	return token, path, nil
}

// redactURL hides a password in a NATS URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// The ledger is what the projections fold and rebuild from.
var (
	_ projection.Source = (*ledger.Store)(nil)
	_ projection.Reader = (*ledger.Store)(nil)
	_ engine.Ledger     = (*ledger.Store)(nil)
)
