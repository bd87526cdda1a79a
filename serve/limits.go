package serve

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/graceful"
	"github.com/turnledger/turnledger/internal/throttle"
	"github.com/turnledger/turnledger/projection"
)

// Limits are serve's protections against overload and abuse; the README's
// reliability section documents each default. A zero bound is no bound, and
// a zero timeout no deadline (serve's flags refuse a zero timeout: only the
// bench's "protections off" serve runs without deadlines).
type Limits struct {
	MaxInFlight        int           // requests served at once by the instance
	MaxProjectInFlight int           // requests of one project served at once
	AuthFailureBurst   int           // failed authentications allowed in a burst, per address and per agent
	AuthFailureEvery   time.Duration // one more failure allowed per this
	MaxConns           int           // open connections; more wait in the listen backlog
	ReadTimeout        time.Duration // whole request, body included
	WriteTimeout       time.Duration // whole response; streams extend their own
	MemoryLimit        ByteSize      // soft memory limit of the process (GOMEMLIMIT)
	MaxPageBytes       ByteSize      // stored bytes of the items of one feed, context or Turn list page
}

// DefaultLimits are serve's defaults.
func DefaultLimits() Limits {
	d := httpapi.DefaultConfig()
	return Limits{
		MaxInFlight:        d.MaxInFlight,
		MaxProjectInFlight: d.MaxProjectInFlight,
		AuthFailureBurst:   d.AuthFailures.Burst,
		AuthFailureEvery:   d.AuthFailures.Every,
		MaxConns:           10_000,
		ReadTimeout:        30 * time.Second,
		WriteTimeout:       30 * time.Second,
		MemoryLimit:        1 << 30,
		MaxPageBytes:       projection.DefaultMaxPageBytes,
	}
}

// AuthFailures is the failed-authentication throttle's rate.
func (l Limits) AuthFailures() throttle.Rate {
	return throttle.Rate{Burst: l.AuthFailureBurst, Every: l.AuthFailureEvery}
}

// Validate reports every problem of l, joined.
func (l Limits) Validate() error {
	var errs []error
	if l.MaxInFlight < 0 || l.MaxProjectInFlight < 0 || l.AuthFailureBurst < 0 || l.MaxConns < 0 || l.AuthFailureEvery < 0 ||
		l.ReadTimeout < 0 || l.WriteTimeout < 0 || l.MemoryLimit < 0 {
		errs = append(errs, errors.New("limits must not be negative"))
	}
	if l.MaxPageBytes < 1024 || l.MaxPageBytes > 1<<30 {
		errs = append(errs, errors.New("--max-page-bytes must be from 1KiB to 1GiB"))
	}
	return errors.Join(errs...)
}

// apply sets the API's bounds.
func (l Limits) apply(c *httpapi.Config) {
	c.MaxInFlight, c.MaxProjectInFlight = l.MaxInFlight, l.MaxProjectInFlight
	c.AuthFailures = l.AuthFailures()
}

// projection returns the projection store's configuration with serve's
// page byte budget.
func (l Limits) projection() projection.Config {
	c := projection.DefaultConfig()
	c.MaxPageBytes = int(l.MaxPageBytes)
	return c
}

// SetMemoryLimit sets the process's soft memory limit, unless GOMEMLIMIT is
// in the environment (the Go runtime has applied it already).
func (l Limits) SetMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" || l.MemoryLimit <= 0 {
		return
	}
	debug.SetMemoryLimit(int64(l.MemoryLimit))
}

// Listen wraps ln so that at most MaxConns connections are open at once.
func (l Limits) Listen(ln net.Listener) net.Listener {
	if l.MaxConns <= 0 {
		return ln
	}
	return &capListener{Listener: ln, slots: make(chan struct{}, l.MaxConns)}
}

// Server returns an HTTP server of h with serve's deadlines. Its Shutdown
// closes at once the connections no request has arrived on
// (graceful.CloseFreshConns).
func (l Limits) Server(h http.Handler) *http.Server {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: l.ReadTimeout, WriteTimeout: l.WriteTimeout, IdleTimeout: 2 * time.Minute}
	graceful.CloseFreshConns(hs)
	return hs
}

// capListener holds Accept while MaxConns connections are open.
type capListener struct {
	net.Listener
	slots chan struct{}
}

func (c *capListener) Accept() (net.Conn, error) {
	c.slots <- struct{}{}
	conn, err := c.Listener.Accept()
	if err != nil {
		<-c.slots
		return nil, err
	}
	return &capConn{Conn: conn, release: func() { <-c.slots }}, nil
}

type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// ByteSize is a number of bytes. As a flag.Value it reads and writes a
// whole number with an optional KiB, MiB or GiB suffix.
type ByteSize int64

func (b *ByteSize) String() string {
	switch n := int64(*b); {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *ByteSize) Set(s string) error {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if v, ok := strings.CutSuffix(s, suffix); ok {
			s, mult = v, m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return errors.New("want a whole number of bytes, optionally with KiB, MiB or GiB")
	}
	*b = ByteSize(n * mult)
	return nil
}
