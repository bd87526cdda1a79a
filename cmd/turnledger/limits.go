package main

import (
	"errors"
	"flag"
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
	"github.com/turnledger/turnledger/internal/throttle"
	"github.com/turnledger/turnledger/projection"
)

// limits are serve's protections against overload and abuse; docs/limits.md
// documents each default.
type limits struct {
	MaxInFlight        int           // requests served at once by the instance
	MaxProjectInFlight int           // requests of one project served at once
	AuthFailureBurst   int           // failed authentications allowed in a burst, per address and per agent
	AuthFailureEvery   time.Duration // one more failure allowed per this
	MaxConns           int           // open connections; more wait in the listen backlog
	ReadTimeout        time.Duration // whole request, body included
	WriteTimeout       time.Duration // whole response; streams extend their own
	MemoryLimit        byteSize      // soft memory limit of the process (GOMEMLIMIT)
	MaxPageBytes       byteSize      // stored bytes of the items of one feed, context or Turn list page
}

func defaultLimits() limits {
	d := httpapi.DefaultConfig()
	return limits{
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

func (l *limits) flags(fs *flag.FlagSet) {
	fs.IntVar(&l.MaxInFlight, "max-in-flight", l.MaxInFlight, "requests served at once; beyond it 503 with Retry-After (0: no bound)")
	fs.IntVar(&l.MaxProjectInFlight, "max-project-in-flight", l.MaxProjectInFlight, "requests of one project served at once; beyond it 503 with Retry-After (0: no bound)")
	l.authFlags(fs, "per address and per agent")
	l.connFlags(fs, "long polls and streams extend their own")
	fs.Var(&l.MaxPageBytes, "max-page-bytes", "stored bytes of the items of one feed, context or Turn list page, e.g. 4MiB; a page stops before the item that would pass it, with has_more (it always holds one item)")
	fs.Var(&l.MemoryLimit, "memory-limit", "soft memory limit of the process, e.g. 512MiB or 2GiB (GOMEMLIMIT in the environment wins; 0: none)")
}

// authFlags are the flags of the failed-authentication throttle (serve's
// and runtime's); per says what a bucket is kept for.
func (l *limits) authFlags(fs *flag.FlagSet, per string) {
	fs.IntVar(&l.AuthFailureBurst, "auth-failure-burst", l.AuthFailureBurst, "failed authentications allowed "+per+" before 429 with Retry-After (0: no throttle)")
	fs.DurationVar(&l.AuthFailureEvery, "auth-failure-every", l.AuthFailureEvery, "one more failed authentication allowed per this long")
}

// connFlags are the flags of the connection cap and the deadlines (serve's
// and runtime's); streams says what the write deadline does not cut.
func (l *limits) connFlags(fs *flag.FlagSet, streams string) {
	fs.IntVar(&l.MaxConns, "max-conns", l.MaxConns, "open client connections at most; more wait to be accepted (0: no bound)")
	fs.DurationVar(&l.ReadTimeout, "read-timeout", l.ReadTimeout, "time to read a whole request, body included")
	fs.DurationVar(&l.WriteTimeout, "write-timeout", l.WriteTimeout, "time to write a response ("+streams+")")
}

// authFailures is the throttle's rate.
func (l limits) authFailures() throttle.Rate {
	return throttle.Rate{Burst: l.AuthFailureBurst, Every: l.AuthFailureEvery}
}

func (l limits) validate() error {
	var errs []error
	if l.MaxInFlight < 0 || l.MaxProjectInFlight < 0 || l.AuthFailureBurst < 0 || l.MaxConns < 0 || l.AuthFailureEvery < 0 {
		errs = append(errs, errors.New("limits must not be negative"))
	}
	if l.ReadTimeout <= 0 || l.WriteTimeout <= 0 {
		errs = append(errs, errors.New("--read-timeout and --write-timeout must be positive"))
	}
	if l.MaxPageBytes < 1024 || l.MaxPageBytes > 1<<30 {
		errs = append(errs, errors.New("--max-page-bytes must be from 1KiB to 1GiB"))
	}
	return errors.Join(errs...)
}

// apply sets the API's bounds.
func (l limits) apply(c *httpapi.Config) {
	c.MaxInFlight, c.MaxProjectInFlight = l.MaxInFlight, l.MaxProjectInFlight
	c.AuthFailures = l.authFailures()
}

// projection returns the projection store's configuration with serve's
// page byte budget.
func (l limits) projection() projection.Config {
	c := projection.DefaultConfig()
	c.MaxPageBytes = int(l.MaxPageBytes)
	return c
}

// setMemoryLimit sets the process's soft memory limit, unless GOMEMLIMIT is
// in the environment (the Go runtime has applied it already).
func (l limits) setMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" || l.MemoryLimit <= 0 {
		return
	}
	debug.SetMemoryLimit(int64(l.MemoryLimit))
}

// listen wraps ln so that at most MaxConns connections are open at once.
func (l limits) listen(ln net.Listener) net.Listener {
	if l.MaxConns <= 0 {
		return ln
	}
	return &capListener{Listener: ln, slots: make(chan struct{}, l.MaxConns)}
}

// server returns the HTTP server with serve's deadlines.
func (l limits) server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: l.ReadTimeout, WriteTimeout: l.WriteTimeout, IdleTimeout: 2 * time.Minute}
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

// byteSize is a flag of bytes: a whole number with an optional KiB, MiB or
// GiB suffix.
type byteSize int64

func (b *byteSize) String() string {
	switch n := int64(*b); {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Set(s string) error {
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
	*b = byteSize(n * mult)
	return nil
}
