package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/serve"
)

// dataDir is --data, or a new temporary directory that cleanup removes.
func (b *bench) dataDir() (dir string, cleanup func(), err error) {
	if b.cfg.Data != "" {
		return b.cfg.Data, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "turnledger-bench-")
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// atScale runs the feed, replay and start scenarios on a data directory
// holding --events events.
func (b *bench) atScale(ctx context.Context) (*Result, error) {
	dir, cleanup, err := b.dataDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res := &Result{Scenario: b.cfg.Scenario, Events: b.cfg.Events}
	if err := b.fill(ctx, dir, res); err != nil {
		return nil, err
	}
	self := b.cfg.Binary
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	switch b.cfg.Scenario {
	case "replay":
		start := time.Now()
		cmd := exec.CommandContext(ctx, self, "replay", "--data", dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("turnledger replay: %v\n%s", err, out)
		}
		res.ReplayPerSec = float64(b.cfg.Events) / time.Since(start).Seconds()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			res.PeakRSSMB = float64(ru.Maxrss) / 1024
		}
	case "start", "feed":
		srv, err := startChild(ctx, self, dir)
		if err != nil {
			return nil, err
		}
		defer srv.stop()
		res.ReadySeconds = srv.ready.Seconds()
		res.PeakRSSMB = float64(rssKiB(srv.cmd.Process.Pid, "VmRSS")) / 1024
		if err := srv.awaitLoaded(ctx); err != nil {
			return nil, err
		}
		res.LoadedSeconds = srv.loaded.Seconds()
		res.LoadedRSSMB = float64(rssKiB(srv.cmd.Process.Pid, "VmRSS")) / 1024
		res.LoadedAnonMB = float64(rssKiB(srv.cmd.Process.Pid, "RssAnon")) / 1024
		if b.cfg.Scenario == "feed" {
			if err := b.feedPages(ctx, srv, res); err != nil {
				return nil, err
			}
			res.PeakRSSMB = float64(rssKiB(srv.cmd.Process.Pid, "VmHWM")) / 1024
		}
	}
	res.LedgerMB = dirMiB(filepath.Join(dir, "nats"))
	res.ProjectionsMB = dirMiB(filepath.Join(dir, "projections.db"))
	return res, nil
}

// fill makes the data directory hold at least --events events, through serve
// as users make them (lifecycles over HTTP, 4 events a Turn after the set-up).
func (b *bench) fill(ctx context.Context, dir string, res *Result) error {
	if head := ledgerHead(dir); head >= uint64(b.cfg.Events) {
		b.say("reusing %s: %d events", dir, head)
		return nil
	}
	t, err := b.start(ctx, dir)
	if err != nil {
		return err
	}
	defer t.close()
	lim, err := b.appendRate(ctx, t, b.cfg.Agents, time.Second)
	if err != nil {
		return err
	}
	res.setLimit(lim)
	shared := newHTTPClient(b.cfg.Agents)
	defer shared.CloseIdleConnections()
	adm, err := t.adminClient(shared)
	if err != nil {
		return err
	}
	f, err := b.setUp(ctx, t, adm)
	if err != nil {
		return err
	}
	setup := 2 * (b.cfg.Agents + b.cfg.Requesters*b.cfg.Projects)
	turns := int64(max(b.cfg.Events-setup, 0)+3) / 4
	b.say("making a ledger of %d events (%d Turns) in %s…", b.cfg.Events, turns, dir)
	rec := &recorder{lat: map[string][]time.Duration{}}
	stop := b.showProgress(time.Now(), 0, rec)
	if turns > 0 {
		b.drive(ctx, shared, f, rec, 24*time.Hour, 0, turns)
	}
	stop()
	if first, ok := rec.first.Load().(string); ok {
		return fmt.Errorf("making the ledger: %d errors, the first: %s", rec.errs.Load(), first)
	}
	return ctx.Err()
}

// ledgerHead is the number of events of the ledger in dir, from the
// projections' checkpoint (0 when there are none).
func ledgerHead(dir string) uint64 {
	if _, err := os.Stat(filepath.Join(dir, "projections.db")); err != nil {
		return 0
	}
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir, cfg.AdminToken, cfg.ReapInterval = "127.0.0.1:0", dir, "tladm_bench", 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := serve.Start(context.Background(), cfg)
	if err != nil {
		return 0
	}
	defer s.Close()
	h, _ := s.Ledger().Head(context.Background())
	return h
}

// child is `turnledger serve` run as a child process.
type child struct {
	cmd   *exec.Cmd
	url   string
	start time.Time
	ready time.Duration
	// loaded: until the first request of the bench project was answered
	// (serve answers 503 while the project's write model loads).
	loaded time.Duration
	admin  string
	done   chan struct{}
}

var servingLine = regexp.MustCompile(`serving on (http://\S+),`)

func startChild(ctx context.Context, self, dir string) (*child, error) {
	return startChildWith(ctx, []string{self}, dir, nil, nil)
}

// startChildWith is startChild with the command argv (the binary, or a
// wrapper such as taskset and its arguments before it), serve's flags extra
// after the bench's, and env added to the environment.
func startChildWith(ctx context.Context, argv []string, dir string, extra, env []string) (*child, error) {
	start := time.Now()
	args := append(argv[1:len(argv):len(argv)], "serve", "--data", dir, "--addr", "127.0.0.1:0", "--reap-interval", "0")
	cmd := exec.CommandContext(ctx, argv[0], append(args, extra...)...)
	cmd.Env = append(append(os.Environ(), "TURNLEDGER_ADMIN_TOKEN=tladm_bench"), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, start: start, admin: "tladm_bench", done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		defer close(c.done)
		go func() { cmd.Wait(); pw.Close() }()
		buf := make([]byte, 4096)
		var out []byte
		for {
			n, err := pr.Read(buf)
			out = append(out, buf[:n]...)
			if m := servingLine.FindSubmatch(out); m != nil {
				found <- string(m[1])
				io.Copy(io.Discard, pr)
				return
			}
			if err != nil {
				close(found)
				return
			}
		}
	}()
	var ok bool
	select {
	case c.url, ok = <-found:
	case <-time.After(5 * time.Minute):
	}
	if !ok {
		cmd.Process.Kill()
		return nil, errors.New("serve did not start")
	}
	a, err := c.client()
	if err != nil {
		c.stop()
		return nil, err
	}
	for {
		if _, err := a.Readyz(ctx); err == nil {
			break
		}
		if ctx.Err() != nil || time.Since(start) > 10*time.Minute {
			c.stop()
			return nil, errors.New("serve did not become ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.ready = time.Since(start)
	return c, nil
}

// awaitLoaded asks for a feed page of the bench project until it is
// answered (not 503) and sets c.loaded.
func (c *child) awaitLoaded(ctx context.Context) error {
	adm, err := c.client()
	if err != nil {
		return err
	}
	for {
		_, err := adm.ProjectFeed(ctx, "bench0", client.FeedQuery{Limit: 1})
		var ce *client.Error
		if err == nil {
			c.loaded = time.Since(c.start)
			return nil
		}
		if !errors.As(err, &ce) || ce.Status != http.StatusServiceUnavailable || ctx.Err() != nil || time.Since(c.start) > 10*time.Minute {
			return fmt.Errorf("the first request of the bench project: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// client is a client of c with the admin bearer.
func (c *child) client() (*client.Client, error) {
	return client.New(c.url, client.WithAdminToken(c.admin), client.WithHTTPClient(newHTTPClient(1)), client.WithUserAgent("turnledger-bench"))
}

func (c *child) stop() {
	c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
	}
}

// feedPages reads project feed pages of 100 at random cursors of the ledger's
// end part (the last tenth), as a reader following a long ledger does:
// through the client (decoded, as a program gets them), then as many as
// bytes on a connection of their own (feedPage), which is serve's part.
// quietGC keeps the bench process's own garbage collector out of the page
// latencies it measures of a serve child, and returns what undoes it: the
// process collects only once its heap reaches 512 MiB. With the default it
// holds about 2 MiB while it reads, and so collected every few pages, and a
// page read during a collection took the reader's pauses into its latency
// (the raw pages' p99 was 3.0-3.3 ms with it, 1.0-1.9 ms without it, the
// serve unchanged).
func quietGC() (undo func()) {
	pct := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(512 << 20)
	return func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	}
}

func (b *bench) feedPages(ctx context.Context, c *child, res *Result) error {
	adm, err := c.client()
	if err != nil {
		return err
	}
	n := min(b.cfg.Events, 1_000_000)
	defer quietGC()()
	var lat []time.Duration
	for i := range 2000 {
		after := uint64(n - n/10 + rand.IntN(max(n/10, 1)))
		if i < 100 { // warm up
			after = uint64(rand.IntN(n))
		}
		t0 := time.Now()
		if _, err := adm.ProjectFeed(ctx, "bench0", client.FeedQuery{AfterLedgerSeq: after, Limit: 100}); err != nil {
			return fmt.Errorf("feed page: %w", err)
		}
		if i >= 100 {
			lat = append(lat, time.Since(t0))
		}
	}
	res.FeedP50, res.FeedP99 = quantile(lat, 0.5), quantile(lat, 0.99)
	raw, err := readPages(ctx, []*child{c}, 1, 1, uint64(n), len(lat), 0, false)
	if err != nil {
		return err
	}
	res.FeedRawP50, res.FeedRawP99 = raw.P50, raw.P99
	return nil
}

func dirMiB(path string) float64 {
	var n int64
	filepath.Walk(path, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return float64(n) / (1 << 20)
}
