package mcpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/internal/throttle"
)

// Config configures the MCP endpoint.
type Config struct {
	// AllowedOrigins are the browser origins ("https://app.example") besides
	// the server's own that may call the endpoint; any other Origin is 403.
	AllowedOrigins []string
	// PublicURL is the URL people reach the server at (behind a proxy); the
	// base of the resource metadata URL. Empty: the scheme and Host of the
	// request.
	PublicURL string
	// MaxBodyBytes bounds every request body.
	MaxBodyBytes int64
	// DefaultLimit and MaxLimit bound the limit of pages.
	DefaultLimit, MaxLimit int
	// WaitTimeout bounds how long a command waits for the projections to
	// reach its ledger_seq.
	WaitTimeout time.Duration
	// MaxClaimWait is the longest wait_s of claim_turn.
	MaxClaimWait time.Duration
	// TaskPollInterval is the pollIntervalMs of tasks.
	TaskPollInterval time.Duration
	// AuthFailures is the token bucket of failed authentications, per remote
	// address and per agent (a zero Rate turns throttling off).
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
		MaxBodyBytes:     1 << 20,
		DefaultLimit:     50,
		MaxLimit:         1000,
		WaitTimeout:      10 * time.Second,
		MaxClaimWait:     60 * time.Second,
		TaskPollInterval: 2 * time.Second,
		AuthFailures:     throttle.Rate{Burst: 20, Every: time.Second},
		Now:              time.Now,
		Logger:           slog.Default(),
	}
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	for _, o := range c.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			errs = append(errs, fmt.Errorf("mcpapi: allowed origin %q must be scheme://host[:port]", o))
		}
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			errs = append(errs, fmt.Errorf("mcpapi: the public URL %q must be an absolute http or https URL without query or fragment", c.PublicURL))
		}
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, errors.New("mcpapi: max body bytes must be at least 1024"))
	}
	if c.DefaultLimit < 1 || c.MaxLimit < c.DefaultLimit {
		errs = append(errs, errors.New("mcpapi: limits must satisfy 1 <= default <= max"))
	}
	if c.WaitTimeout <= 0 || c.MaxClaimWait < 0 || c.TaskPollInterval <= 0 {
		errs = append(errs, errors.New("mcpapi: the wait timeout and the task poll interval must be positive, the claim wait not negative"))
	}
	if c.AuthFailures.Burst < 0 || c.AuthFailures.Every < 0 {
		errs = append(errs, errors.New("mcpapi: the authentication failure rate must not be negative"))
	}
	if c.Now == nil || c.Logger == nil {
		errs = append(errs, errors.New("mcpapi: a clock and a logger are required"))
	}
	return errors.Join(errs...)
}
