package main

import (
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
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/projection"
)

// serviceConfig is everything `serve` needs, read from flags and the
// environment by serve.go.
type serviceConfig struct {
	Addr         string        // listen address of the API
	DataDir      string        // projections, the admin token, and the embedded NATS store
	NATSURL      string        // an existing NATS server; empty starts the embedded one
	AdminToken   string        // from TURNLEDGER_ADMIN_TOKEN; empty reads or makes DataDir/admin-token
	ReapInterval time.Duration // 0 turns the background reaper off
	Sync         ledger.Sync   // durability of the embedded server (--sync)
	Kernel       kernel.Config
	Ledger       ledger.Config
	Logger       *slog.Logger
}

func defaultServiceConfig() serviceConfig {
	return serviceConfig{
		Addr:         "127.0.0.1:8000",
		DataDir:      "./data",
		ReapInterval: 5 * time.Second,
		Sync:         ledger.SyncAlways,
		Kernel:       kernel.DefaultConfig(),
		Ledger:       ledger.DefaultConfig(),
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
}

// service is one running turnledger: NATS (embedded or external), the
// ledger, the engine, the projector, the reaper and the HTTP API.
type service struct {
	cfg       serviceConfig
	embedded  *ledger.Embedded
	nc        *nats.Conn
	ledger    *ledger.Store
	store     *projection.Store
	engine    *kernel.Engine
	projector *projection.Projector
	api       *httpapi.Server
	http      *http.Server
	listener  net.Listener
	tokenPath string // where the admin token is kept, when it came from a file
	healed    bool   // the projection file was damaged and is being rebuilt (reliability.go)
	healUntil uint64 // the ledger head when it was; not ready before the rebuild reaches it

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	lastReap   time.Time
	reapedN    int
	lastReapEr string
}

// startService opens every part and starts serving. Close stops it.
func startService(ctx context.Context, cfg serviceConfig) (_ *service, err error) {
	s := &service{cfg: cfg}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
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
	if s.embedded, s.nc, s.ledger, err = openLedger(ctx, cfg.DataDir, cfg.NATSURL, cfg.Ledger, cfg.Sync); err != nil {
		return nil, err
	}
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
	if s.engine, err = kernel.NewEngine(s.ledger, cfg.Kernel); err != nil {
		return nil, err
	}
	s.projector = projection.NewProjector(s.store, s.ledger)
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.projector.Run(runCtx)
	}()
	if err := s.engine.Preload(ctx, mustProjects(s.store)); err != nil {
		return nil, err
	}
	if cfg.ReapInterval > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.reap(runCtx)
		}()
	}

	hcfg := httpapi.DefaultConfig()
	hcfg.AdminTokenHash = kernel.HashSecret(token)
	hcfg.Ready = s.ready
	hcfg.Diagnostics = s.diagnostics
	hcfg.Now = cfg.Kernel.Now
	hcfg.Logger = cfg.Logger
	if s.api, err = httpapi.New(s.engine, s.store, hcfg); err != nil {
		return nil, err
	}
	if s.listener, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s.http = &http.Server{Handler: s.api, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
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
func openLedger(ctx context.Context, dataDir, natsURL string, cfg ledger.Config, sync ledger.Sync) (emb *ledger.Embedded, nc *nats.Conn, l *ledger.Store, err error) {
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
		if emb, err = ledger.StartEmbedded(ecfg); err != nil {
			return nil, nil, nil, err
		}
		if nc, err = emb.Connect(); err != nil {
			return nil, nil, nil, err
		}
	} else if nc, err = nats.Connect(natsURL, nats.Name("turnledger"), nats.MaxReconnects(-1)); err != nil {
		return nil, nil, nil, fmt.Errorf("connect to NATS at %s: %w", redactURL(natsURL), err)
	}
	if l, err = ledger.Open(ctx, nc, cfg); err != nil {
		return nil, nil, nil, err
	}
	return emb, nc, l, nil
}

// URL is the base URL of the API.
func (s *service) URL() string { return "http://" + s.listener.Addr().String() }

// Close stops serving and closes every part, the last opened first.
func (s *service) Close() error {
	var errs []error
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

// reap releases expired claims every interval until ctx ends.
func (s *service) reap(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.engine.Preload(ctx, mustProjects(s.store)); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("reaper: load projects", "err", err)
		}
		n, err := s.engine.Reap(ctx)
		s.mu.Lock()
		s.lastReap, s.reapedN = s.cfg.Kernel.Now().UTC(), s.reapedN+n
		s.lastReapEr = ""
		if err != nil {
			s.lastReapEr = err.Error()
		}
		s.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("reaper", "err", err)
		}
	}
}

func mustProjects(st *projection.Store) []string {
	ps, _ := st.Projects()
	return ps
}

// readiness is the body of /readyz.
type readiness struct {
	Status      string          `json:"status"` // "ready" or "not_ready"
	Backend     backendReport   `json:"backend"`
	Projections projectionState `json:"projections"`
	Reaper      reaperReport    `json:"reaper"`
}

type backendReport struct {
	Kind        string `json:"kind"` // "embedded" or "external"
	URL         string `json:"url,omitempty"`
	Server      string `json:"server_version"`
	Stream      string `json:"stream"`
	Expectation string `json:"expectation"` // "project" or "stream"
	LedgerHead  uint64 `json:"ledger_head"`
	Error       string `json:"error,omitempty"`
}

type projectionState struct {
	AppliedSeq uint64 `json:"applied_seq"`
	Lag        uint64 `json:"lag"`
	Failing    bool   `json:"failing"`
	LastError  string `json:"last_error,omitempty"`
	Rebuilding bool   `json:"rebuilding,omitempty"` // a damaged file was moved aside and is being rebuilt
}

type reaperReport struct {
	Enabled       bool       `json:"enabled"`
	Interval      string     `json:"interval"`
	ClaimTTL      string     `json:"claim_ttl"`
	LastRunAt     *time.Time `json:"last_run_at"`
	ReleasedTotal int        `json:"released_total"`
	LastError     string     `json:"last_error,omitempty"`
}

// probeTimeout bounds the ledger look-ups of /readyz and of the diagnostics,
// so that an unreachable NATS server makes them answer quickly, not hang.
const probeTimeout = 2 * time.Second

func (s *service) ready(ctx context.Context) (any, bool) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	r := readiness{Status: "ready"}
	r.Backend = backendReport{Kind: "embedded", Server: s.nc.ConnectedServerVersion(), Stream: s.cfg.Ledger.Stream, Expectation: string(s.ledger.Mode())}
	if s.embedded == nil {
		r.Backend.Kind, r.Backend.URL = "external", redactURL(s.cfg.NATSURL)
	}
	head, err := s.ledger.Head(ctx)
	if err != nil {
		r.Status, r.Backend.Error = "not_ready", err.Error()
	}
	r.Backend.LedgerHead = head
	st := s.projector.Status()
	r.Projections = projectionState{AppliedSeq: st.Checkpoint, Failing: st.Failing, LastError: st.LastError}
	if head > st.Checkpoint {
		r.Projections.Lag = head - st.Checkpoint
	}
	if st.Failing {
		r.Status = "not_ready"
	}
	s.readyProjections(&r)
	s.mu.Lock()
	r.Reaper = reaperReport{Enabled: s.cfg.ReapInterval > 0, Interval: s.cfg.ReapInterval.String(), ClaimTTL: s.cfg.Kernel.ClaimTTL.String(),
		ReleasedTotal: s.reapedN, LastError: s.lastReapEr}
	if !s.lastReap.IsZero() {
		t := s.lastReap
		r.Reaper.LastRunAt = &t
	}
	s.mu.Unlock()
	return r, r.Status == "ready"
}

func (s *service) diagnostics(ctx context.Context) []httpapi.Diagnostic {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d []httpapi.Diagnostic
	st := s.projector.Status()
	if st.Failing {
		d = append(d, httpapi.Diagnostic{Code: "projection_failing", Message: "the projector cannot follow the ledger: " + st.LastError})
	}
	if head, err := s.ledger.Head(ctx); err != nil {
		d = append(d, httpapi.Diagnostic{Code: "ledger_unreachable", Message: "the ledger head cannot be read: " + err.Error()})
	} else if head > st.Checkpoint {
		d = append(d, httpapi.Diagnostic{Code: "projection_lag", Message: fmt.Sprintf("projections are %d events behind the ledger (applied %d, head %d)", head-st.Checkpoint, st.Checkpoint, head)})
	}
	return d
}

// adminToken reads the admin token kept in the data directory, or makes one
// (256 random bits) and keeps it there with mode 0600.
func adminToken(dir string) (token, path string, err error) {
	path = filepath.Join(dir, "admin-token")
	b, err := os.ReadFile(path)
	if err == nil {
		if t := string(trimNL(b)); t != "" {
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

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
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
	_ kernel.Ledger     = (*ledger.Store)(nil)
)
