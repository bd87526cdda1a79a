package a2aapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/internal/throttle"
)

// Config configures the A2A endpoints.
type Config struct {
	// PublicURL is the URL people reach the server at (behind a proxy): the
	// base of the interface URLs of the Agent Cards. Empty: the scheme and
	// Host of the request.
	PublicURL string
	// MaxBodyBytes bounds every request body.
	MaxBodyBytes int64
	// DefaultPageSize and MaxPageSize bound the pageSize of ListTasks.
	DefaultPageSize, MaxPageSize int
	// WaitTimeout bounds how long a command waits for the projections to
	// reach its ledger_seq.
	WaitTimeout time.Duration
	// SendWait is how long a blocking SendMessage waits for its task to
	// finish or to ask for input before it answers the task as it stands.
	SendWait time.Duration
	// HeartbeatInterval is how often an idle stream gets a comment line and
	// the caller's credential is checked again; WriteTimeout is how long a
	// client may take to accept one write of a stream.
	HeartbeatInterval, WriteTimeout time.Duration
	// AuthFailures is the token bucket of failed authentications, per remote
	// address and per agent endpoint (a zero Rate turns throttling off).
	AuthFailures throttle.Rate
	// AuthGuard, when set, is the throttle of failed authentications the
	// endpoint shares with the other faces of the instance (serve gives the
	// HTTP API and the MCP and A2A endpoints one), in place of one of its
	// own of AuthFailures.
	AuthGuard *faceauth.Guard
	// Now is the clock of the read policy and of the throttle.
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultConfig returns the documented defaults (those of the HTTP API
// where both have one).
func DefaultConfig() Config {
	return Config{
		MaxBodyBytes:      1 << 20,
		DefaultPageSize:   50,
		MaxPageSize:       100,
		WaitTimeout:       10 * time.Second,
		SendWait:          30 * time.Second,
		HeartbeatInterval: 15 * time.Second,
		WriteTimeout:      10 * time.Second,
		AuthFailures:      throttle.Rate{Burst: 20, Every: time.Second},
		Now:               time.Now,
		Logger:            slog.Default(),
	}
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			errs = append(errs, fmt.Errorf("a2aapi: the public URL %q must be an absolute http or https URL without query or fragment", c.PublicURL))
		}
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, errors.New("a2aapi: max body bytes must be at least 1024"))
	}
	if c.DefaultPageSize < 1 || c.MaxPageSize < c.DefaultPageSize {
		errs = append(errs, errors.New("a2aapi: page sizes must satisfy 1 <= default <= max"))
	}
	if c.WaitTimeout <= 0 || c.SendWait < 0 || c.HeartbeatInterval <= 0 || c.WriteTimeout <= 0 {
		errs = append(errs, errors.New("a2aapi: the wait timeout, heartbeat interval and write timeout must be positive, the send wait not negative"))
	}
	if c.AuthFailures.Burst < 0 || c.AuthFailures.Every < 0 {
		errs = append(errs, errors.New("a2aapi: the authentication failure rate must not be negative"))
	}
	if c.Now == nil || c.Logger == nil {
		errs = append(errs, errors.New("a2aapi: a clock and a logger are required"))
	}
	return errors.Join(errs...)
}
