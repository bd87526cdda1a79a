// Package browsertest gives tests a real headless Chromium driven through
// the DevTools protocol (chromedp): Start one per test, then Navigate, Run
// chromedp actions, wait for the page, take Screenshots and read the
// requests the page made. Nothing in it knows a particular page, so the
// runtime client's tests and the serve console's tests can share it.
//
// The browser is Debian's chromium (.ci/chromium.sh installs it when
// /usr/bin/chromium is missing); TURNLEDGER_CHROMIUM names another binary.
// It runs headless with a fresh profile in t.TempDir(), no sandbox (CI runs
// as root), no GPU, no QUIC and none of its background network traffic, so
// every request it makes is one the page made. With no browser, Start fails
// the test with a message saying how to get one; it never skips.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// EnvChromium names a Chromium binary to use instead of the default.
const EnvChromium = "TURNLEDGER_CHROMIUM"

// Browser is one headless Chromium with one tab.
type Browser struct {
	ctx     context.Context
	timeout time.Duration

	mu       sync.Mutex
	requests []string
}

// Options configure Start.
type Options struct {
	// Timeout bounds each Run; default 20 s.
	Timeout time.Duration
	// Width and Height of the window; default 1200×900.
	Width, Height int
}

// FindChromium returns the browser binary: $TURNLEDGER_CHROMIUM, else
// /usr/bin/chromium, else chromium or chromium-browser on PATH.
func FindChromium() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium: install Debian's chromium (bash .ci/test does, through .ci/chromium.sh) or set %s", EnvChromium)
}

// Start launches a browser for t, closed when t ends.
func Start(t testing.TB, o Options) *Browser {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 20 * time.Second
	}
	if o.Width == 0 {
		o.Width, o.Height = 1200, 900
	}
	bin, err := FindChromium()
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(o.Width, o.Height),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(func(string, ...any) {}))
	b := &Browser{ctx: ctx, timeout: o.Timeout}
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	// The first call starts the browser, which lives as long as the context
	// of that call: it must be ctx itself, not a child with a deadline.
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("browsertest: start %s: %v", bin, err)
	}
	err = chromedp.Listen(ctx, func(ev any) {
		var r string
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			r = e.Request.Method + " " + e.Request.URL
		case *network.EventWebSocketCreated:
			r = "WS " + e.URL
		default:
			return
		}
		b.mu.Lock()
		b.requests = append(b.requests, r)
		b.mu.Unlock()
	})
	if err != nil {
		t.Fatalf("browsertest: listen: %v", err)
	}
	return b
}

// Context is the tab's context, for chromedp calls of your own.
func (b *Browser) Context() context.Context { return b.ctx }

// Do runs actions within the timeout and fails t on an error.
func (b *Browser) Do(t testing.TB, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
}

// Run runs one action that has a result within the timeout, failing t on an
// error. (A function, as methods cannot have type parameters.)
func Run[T any](t testing.TB, b *Browser, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	return v
}

// Navigate loads url and waits for its load event.
func (b *Browser) Navigate(t testing.TB, url string) {
	t.Helper()
	b.Do(t, chromedp.Navigate(url))
}

// WaitVisible waits until the element matching the CSS selector is visible.
func (b *Browser) WaitVisible(t testing.TB, selector string) {
	t.Helper()
	b.Do(t, chromedp.WaitVisible(chromedp.CSS(selector)))
}

// Click clicks the element matching the CSS selector.
func (b *Browser) Click(t testing.TB, selector string) {
	t.Helper()
	b.Do(t, chromedp.Click(chromedp.CSS(selector)))
}

// Text returns the visible text of the element matching the CSS selector,
// waiting for it.
func (b *Browser) Text(t testing.TB, selector string) string {
	t.Helper()
	return Run(t, b, chromedp.Text(chromedp.CSS(selector)))
}

// Eval evaluates a JavaScript expression and returns its result as T.
func Eval[T any](t testing.TB, b *Browser, expr string) T {
	t.Helper()
	return Run(t, b, chromedp.Evaluate[T](expr))
}

// Location returns the page's current URL.
func (b *Browser) Location(t testing.TB) string {
	t.Helper()
	return Run(t, b, chromedp.Location())
}

// Screenshot saves a PNG of the whole page as name.png in dir ($TURNLEDGER_SCREENSHOTS,
// else a temporary directory of t) and returns its path.
func (b *Browser) Screenshot(t testing.TB, name string) string {
	t.Helper()
	png := Run(t, b, chromedp.FullScreenshot(100))
	dir := os.Getenv("TURNLEDGER_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name)+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("browsertest: write screenshot: %v", err)
	}
	return path
}

// Requests returns every request the page has made so far, as "METHOD URL",
// websockets as "WS URL".
func (b *Browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}
