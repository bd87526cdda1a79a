package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/turnledger/turnledger/bench"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// turnledgerBinary builds the turnledger binary once per test run, for tests
// that run it as a child process as users do.
func turnledgerBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "turnledger-bin-")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "turnledger")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			binaryErr = &buildError{err, out}
		}
	})
	if binaryErr != nil {
		t.Fatalf("build turnledger: %v", binaryErr)
	}
	return binaryPath
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// TestBenchAtScaleScenarios runs the feed, replay and start scenarios on a
// small ledger with the real binary (they run serve and replay as child
// processes), reusing one data directory.
func TestBenchAtScaleScenarios(t *testing.T) {
	bin := turnledgerBinary(t)
	dir := t.TempDir()
	for _, sc := range []string{"start", "feed", "replay"} {
		out, err := exec.CommandContext(t.Context(), bin, "bench", "--scenario", sc, "--events", "300", "--agents", "4", "--data", dir, "--json").Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("bench --scenario %s: %v\n%s", sc, err, stderr)
		}
		var r bench.Result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("bench --scenario %s printed %q: %v", sc, out, err)
		}
		if r.Events != 300 || r.PeakRSSMB <= 0 || r.LedgerMB <= 0 || r.ProjectionsMB <= 0 {
			t.Errorf("bench --scenario %s = %+v; want 300 events, RSS and file sizes measured", sc, r)
		}
		switch sc {
		case "start":
			if r.ReadySeconds <= 0 {
				t.Errorf("start: ready_seconds = %v, want > 0", r.ReadySeconds)
			}
		case "feed":
			if r.FeedP50 <= 0 || r.FeedP50 > r.FeedP99 || r.FeedRawP50 <= 0 || r.FeedRawP50 > r.FeedRawP99 {
				t.Errorf("feed: p50 %v p99 %v, read as bytes p50 %v p99 %v; want 0 < p50 ≤ p99 both ways", r.FeedP50, r.FeedP99, r.FeedRawP50, r.FeedRawP99)
			}
		case "replay":
			if r.ReplayPerSec <= 0 {
				t.Errorf("replay: events/s = %v, want > 0", r.ReplayPerSec)
			}
		}
	}
}

func TestBenchRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "nope"}, {"--agents", "0"}, {"--projects", "9", "--agents", "4"}, {"--url", "http://127.0.0.1:1", "--scenario", "feed"}, {"extra"},
		{"--scenario", "overload", "--duration", "100ms"}, {"--factor", "0"}, {"--url", "http://127.0.0.1:1", "--scenario", "overload"},
		{"--scenario", "readscale", "--instances", "0"}, {"--scenario", "readscale", "--instances", "3", "--readers", "2"},
		{"--scenario", "readscale", "--rounds", "0"}, {"--scenario", "readscale", "--gomaxprocs", "-1"}, {"--url", "http://127.0.0.1:1", "--scenario", "readscale"},
	} {
		var errb bytes.Buffer
		if code := Main(t.Context(), append([]string{"bench"}, args...), &bytes.Buffer{}, &errb); code != 2 {
			t.Errorf("bench %v exited %d, want 2 (usage): %s", args, code, errb.String())
		}
	}
}
