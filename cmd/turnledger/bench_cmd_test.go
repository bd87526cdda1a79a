package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
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

// TestBenchLifecycleReportsSaneNumbers runs a short closed-loop bench and
// checks that its report adds up — not how fast it was.
func TestBenchLifecycleReportsSaneNumbers(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(t.Context(), []string{"bench", "--duration", "1s", "--agents", "4", "--requesters", "2", "--projects", "2", "--json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("bench exited %d: %s", code, errb.String())
	}
	var r benchResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("bench --json printed %q: %v", out.String(), err)
	}
	if r.Turns < 1 || r.Errors != 0 || r.AppendsPerSec <= 0 || r.Agents != 4 || r.Projects != 2 {
		t.Fatalf("bench = %+v; want Turns ≥ 1, no errors, an append rate, 4 agents over 2 projects", r)
	}
	for _, k := range []string{"dispatch", "claim", "record", "finish"} {
		s, ok := r.Commands[k]
		if !ok || int64(s.N) < r.Turns || s.P50 <= 0 || s.P50 > s.P95 || s.P95 > s.P99 {
			t.Errorf("bench command %s = %+v; want n ≥ %d Turns and 0 < p50 ≤ p95 ≤ p99", k, s, r.Turns)
		}
	}
	if got, want := r.CmdRatio, r.CmdsPerSec/r.AppendsPerSec; got < want*0.999 || got > want*1.001 {
		t.Errorf("commands_to_appends_ratio = %v, want commands/s ÷ appends/s = %v", got, want)
	}
	if perTurn := r.CmdsPerSec / r.TurnsPerSec; perTurn < 4 || perTurn > 4.5 {
		t.Errorf("commands per Turn = %.2f, want 4 (dispatch, claim, record, finish) plus at most a few unfinished", perTurn)
	}
	if r.ProcessRSSMB <= 0 || r.CPUCores <= 0 {
		t.Errorf("bench RSS %v MiB, CPU %v cores; want both measured", r.ProcessRSSMB, r.CPUCores)
	}
}

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
		var r benchResult
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
			if r.FeedP50 <= 0 || r.FeedP50 > r.FeedP99 {
				t.Errorf("feed: p50 %v p99 %v; want 0 < p50 ≤ p99", r.FeedP50, r.FeedP99)
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
	} {
		var errb bytes.Buffer
		if code := Main(t.Context(), append([]string{"bench"}, args...), &bytes.Buffer{}, &errb); code != 2 {
			t.Errorf("bench %v exited %d, want 2 (usage): %s", args, code, errb.String())
		}
	}
}
