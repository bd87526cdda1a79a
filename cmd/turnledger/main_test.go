package main

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"

	"github.com/turnledger/turnledger/internal/pgtest"
)

// envChildMain makes the test binary run Main on its arguments instead of
// the tests, so that tests start `turnledger` as a process of its own without
// building the binary: rtProcess starts runtimes this way, and the crash
// tests start serve and kill it with SIGKILL.
const envChildMain = "TURNLEDGER_TEST_CHILD_MAIN"

// TestMain is the package's one TestMain: the child process, or the tests
// followed by stopping the PostgreSQL server pgtest may have started.
func TestMain(m *testing.M) {
	if os.Getenv(envChildMain) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(pgtest.Main(m))
}

// syncBuffer collects what a subcommand writes while the test reads it: safe
// for the subcommand's goroutines and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
