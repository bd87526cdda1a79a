package catalogue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/turnledger/turnledger/internal/graceful"
	"github.com/turnledger/turnledger/internal/reqlog"
)

// ListenAndServe serves cfg on addr, as `turnledger catalogue` does, until
// ctx ends: one log line per request to logger (the partner key travels in
// a header, which is never logged), deadlines on every request, and a line
// on out once it listens. An empty cfg.BaseURL is http://<the address
// listened on>.
func ListenAndServe(ctx context.Context, cfg Config, addr string, logger *slog.Logger, out io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://" + ln.Addr().String()
	}
	srv, err := New(cfg)
	if err != nil {
		return err
	}
	handler := reqlog.Handler(logger, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Path {
			reqlog.Route(r, Path, "")
		}
		srv.ServeHTTP(w, r)
	}))
	hs := &http.Server{
		Handler:           handler,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	graceful.CloseFreshConns(hs) // a client's spare connection does not hold the stop up
	fmt.Fprintf(out, "turnledger catalogue: %d cities, %d subcategories, %d partner keys; listening on http://%s%s\n",
		len(cfg.Catalogue.Cities), len(cfg.Catalogue.Subcategories), len(cfg.Keys), ln.Addr(), Path)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
