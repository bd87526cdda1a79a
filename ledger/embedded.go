package ledger

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures the in-process nats-server that serve uses when
// no external NATS server is given.
type EmbeddedConfig struct {
	// DataDir is where JetStream keeps its files (in DataDir/nats/jetstream;
	// DataDir/nats/LOCK keeps a second process out).
	// Required.
	DataDir string
	// Port is the loopback TCP port to listen on: 0 listens on no port at
	// all (clients connect in-process only), -1 on a random loopback port.
	// The host is always 127.0.0.1. Default 0.
	Port int
	// ServerName names the server. Default "turnledger".
	ServerName string
	// ReadyTimeout bounds the wait for the server to start. Default 10s.
	ReadyTimeout time.Duration
	// Log sends the server's log to standard error. Default off.
	Log bool
	// Sync is when JetStream flushes appended messages to stable storage:
	// SyncAlways fsyncs every message before it is acknowledged, so an
	// acknowledged event survives a power loss or a kernel crash;
	// SyncInterval fsyncs every Interval (nats-server's default, 2 minutes), so
	// an acknowledged event survives a crash of the process (the page cache
	// keeps it) but a power loss may drop what came after the last sync.
	// Default (and "") SyncAlways: see docs/reliability.md ("Durability") for
	// the cost.
	Sync Sync
	// SyncEvery is the interval of SyncInterval; 0 takes nats-server's
	// default (2 minutes).
	SyncEvery time.Duration
	// GroupCommit keeps the promise of SyncAlways with one fsync for many
	// appends (groupsync.go): the server does not fsync each message, and a
	// Store opened with Embedded.Open makes appends durable in groups
	// (Store.Durable), as serve's engine does before it answers. Only a
	// Store opened with Embedded.Open syncs: one opened otherwise on this
	// server gets the durability of SyncInterval. Ignored with SyncInterval.
	GroupCommit bool
}

// Sync is a durability setting of the embedded server (EmbeddedConfig.Sync).
type Sync string

const (
	SyncAlways   Sync = "always"
	SyncInterval Sync = "interval"
)

// DefaultEmbeddedConfig returns the configuration serve uses, with its data
// under dataDir.
func DefaultEmbeddedConfig(dataDir string) EmbeddedConfig {
	return EmbeddedConfig{
		DataDir:      dataDir,
		ServerName:   "turnledger",
		ReadyTimeout: 10 * time.Second,
		Sync:         SyncAlways,
	}
}

// Validate reports every problem of c, joined.
func (c EmbeddedConfig) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("ledger: embedded server needs a data directory"))
	}
	if c.Port < -1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("ledger: embedded server port %d must be -1 (random), 0 (none) or 1 to 65535", c.Port))
	}
	if c.ServerName == "" {
		errs = append(errs, errors.New("ledger: embedded server needs a name"))
	}
	if c.Sync != "" && c.Sync != SyncAlways && c.Sync != SyncInterval {
		errs = append(errs, fmt.Errorf("ledger: embedded server sync %q must be %q or %q", c.Sync, SyncAlways, SyncInterval))
	}
	if c.SyncEvery < 0 {
		errs = append(errs, fmt.Errorf("ledger: embedded server sync interval %v must not be negative", c.SyncEvery))
	}
	if c.ReadyTimeout <= 0 {
		errs = append(errs, fmt.Errorf("ledger: embedded server ready timeout %v must be positive", c.ReadyTimeout))
	}
	return errors.Join(errs...)
}

// Embedded is an in-process nats-server with JetStream file storage.
type Embedded struct {
	srv      *server.Server
	lock     *os.File // held while the server runs; nil where flock is unavailable
	storeDir string
	group    bool // GroupCommit with SyncAlways: Open's Stores fsync in groups
	listens  bool // on a port: other processes may write its streams

	mu     sync.Mutex
	conns  []*nats.Conn
	groups []*groupSync         // of the Stores Open made
	pipes  map[string]*pipeline // by stream: the pipeline of the first Store Open made on it
	closed bool
}

// StartEmbedded starts the server and waits until it accepts connections.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	storeDir := filepath.Join(cfg.DataDir, "nats") // JetStream adds "jetstream" below it
	lock, err := lockDir(storeDir)
	if err != nil {
		return nil, err
	}
	unlock := func() {
		if lock != nil {
			lock.Close()
		}
	}
	o := &server.Options{
		ServerName:   cfg.ServerName,
		Host:         "127.0.0.1",
		Port:         cfg.Port,
		DontListen:   cfg.Port == 0,
		JetStream:    true,
		StoreDir:     storeDir,
		NoSigs:       true, // the binary handles signals
		NoLog:        !cfg.Log,
		SyncAlways:   cfg.Sync != SyncInterval && !cfg.GroupCommit,
		SyncInterval: cfg.SyncEvery,
		// The HTTP monitor, cluster, gateway and leafnode listeners stay off.
	}
	srv, err := server.NewServer(o)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("ledger: embedded server: %w", err)
	}
	if cfg.Log {
		srv.ConfigureLogger()
	}
	srv.Start()
	if !srv.ReadyForConnections(cfg.ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		unlock()
		return nil, fmt.Errorf("ledger: embedded server not ready after %v", cfg.ReadyTimeout)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		unlock()
		return nil, errors.New("ledger: embedded server started without JetStream")
	}
	return &Embedded{srv: srv, lock: lock, storeDir: storeDir, group: cfg.GroupCommit && cfg.Sync != SyncInterval, listens: cfg.Port != 0}, nil
}

// Open connects in-process and opens a Store on the connection (see Open).
// With GroupCommit the Store makes its appends durable in groups: see
// Store.Durable. Close closes the connection.
func (e *Embedded) Open(ctx context.Context, cfg Config) (*nats.Conn, *Store, error) {
	nc, err := e.Connect()
	if err != nil {
		return nil, nil, err
	}
	s, err := Open(ctx, nc, cfg)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	// Memory storage has nothing to fsync: it keeps no promise past the
	// process.
	if e.group && s.cfg.Storage == FileStorage {
		if s.group, err = newGroupSync(e.storeDir, s.cfg.Stream); err != nil {
			nc.Close()
			return nil, nil, err
		}
		e.mu.Lock()
		e.groups = append(e.groups, s.group)
		e.mu.Unlock()
	}
	e.pipeline(s)
	return nc, s, nil
}

// pipeline gives s a pipeline (pipeline.go) when it is the only writer of
// its stream: the server listens on no port, and no other Store of this
// server writes the stream (each has a connection of its own, whose
// messages the server may take in any order with another's). A second
// Store on a stream turns the first one's pipeline off.
func (e *Embedded) pipeline(s *Store) {
	if e.listens || s.mode != ExpectProject {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.pipes[s.cfg.Stream]; ok {
		if p != nil {
			p.turnOff()
		}
		return
	}
	if e.pipes == nil {
		e.pipes = map[string]*pipeline{}
	}
	s.pipe = &pipeline{}
	e.pipes[s.cfg.Stream] = s.pipe
}

// Connect opens an in-process connection (no TCP) to the server. Close closes
// it, too.
func (e *Embedded) Connect(opts ...nats.Option) (*nats.Conn, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("ledger: embedded server is closed")
	}
	opts = append([]nats.Option{nats.Name("turnledger"), nats.InProcessServer(e.srv)}, opts...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("ledger: connect to embedded server: %w", err)
	}
	e.conns = append(e.conns, nc)
	return nc, nil
}

// ClientURL is the server's loopback URL, or "" when it listens on no port.
func (e *Embedded) ClientURL() string {
	addr, ok := e.srv.Addr().(*net.TCPAddr)
	if !ok || addr == nil {
		return ""
	}
	return "nats://" + net.JoinHostPort(addr.IP.String(), strconv.Itoa(addr.Port))
}

// Close closes the connections made with Connect, then shuts the server
// down and waits until JetStream has written its state. It is safe to call
// more than once.
func (e *Embedded) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	conns, groups := e.conns, e.groups
	e.conns, e.groups = nil, nil
	e.mu.Unlock()
	for _, nc := range conns {
		nc.Close()
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	for _, g := range groups {
		g.close()
	}
	if e.lock != nil {
		return e.lock.Close()
	}
	return nil
}
