package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchReadScaleReadsFromEveryInstance runs the readscale scenario on a
// small ledger with the real binary (two `turnledger serve --nats-url` child
// processes on the bench's NATS server) and checks what it reports: both
// instances answered pages, every instance answered the same pages at the
// same cursors, and the figures are there — never how fast anything was.
func TestBenchReadScaleReadsFromEveryInstance(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "turnledger")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/turnledger/turnledger/cmd/turnledger").CombinedOutput(); err != nil {
		t.Fatalf("build turnledger: %v\n%s", err, out)
	}
	var out, errb bytes.Buffer
	cfg := DefaultConfig()
	cfg.Scenario, cfg.Binary, cfg.Data, cfg.JSON = "readscale", bin, t.TempDir(), true
	cfg.Events, cfg.Agents, cfg.Duration, cfg.Rounds, cfg.Readers, cfg.GOMAXPROCS = 300, 4, 300*time.Millisecond, 1, 4, 1
	if err := Run(t.Context(), cfg, &out, &errb); err != nil {
		t.Fatalf("bench --scenario readscale = %v: %s", err, errb.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.ReadScale == nil {
		t.Fatalf("bench --json printed %q: %v", out.String(), err)
	}
	r := res.ReadScale
	if r.Instances != 2 || r.Readers != 4 || r.GOMAXPROCS != 1 || len(r.Phases) != 2 || len(r.ByInstances) != 2 {
		t.Fatalf("readscale = %+v; want 2 instances, 4 readers, GOMAXPROCS 1, one phase of each instance count", r)
	}
	// A ledger of 300 events and more has at least 21 distinct cursors to
	// compare (20 random ones and the end).
	if r.IdenticalPages != 21 {
		t.Errorf("readscale compared %d pages on both instances, want 21 (the run fails when one differs)", r.IdenticalPages)
	}
	for k, ph := range r.ByInstances {
		if ph.Instances != k+1 || len(ph.PagesByInstance) != k+1 || ph.Errors != 0 || ph.PagesPerSec <= 0 || ph.P50 <= 0 || ph.P50 > ph.P99 {
			t.Errorf("readscale with %d instance(s) = %+v; want pages, no errors, 0 < p50 ≤ p99", k+1, ph)
		}
		for i, n := range ph.PagesByInstance {
			if n == 0 {
				t.Errorf("readscale with %d instance(s): instance %d answered no page (%v)", k+1, i, ph.PagesByInstance)
			}
		}
		if len(ph.ServeCPU) != 2 || ph.ServeCPU[0] <= 0 || ph.BenchCPU <= 0 || ph.MachineCPU <= 0 || ph.PagesPerServeCore <= 0 {
			t.Errorf("readscale with %d instance(s): serve CPU %v, bench CPU %v, machine %v, pages per serve core-second %v; want all measured", k+1, ph.ServeCPU, ph.BenchCPU, ph.MachineCPU, ph.PagesPerServeCore)
		}
	}
	if two := r.ByInstances[1]; two.ServeCPU[1] <= 0 {
		t.Errorf("readscale with 2 instances: the second serve used CPU %v, want some (it answered %d pages)", two.ServeCPU[1], two.PagesByInstance[1])
	}
	if r.Ratio <= 0 || r.PerCoreRatio <= 0 {
		t.Errorf("readscale ratios %v, %v; want both measured", r.Ratio, r.PerCoreRatio)
	}
	if _, err := os.Stat(filepath.Join(cfg.Data, "readscale")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after the run, --data still holds the second instance's copy of the projections (%v), want it removed", err)
	}
	var text bytes.Buffer
	res.print(&text)
	for _, want := range []string{"1 instance(s):", "2 instance(s):", "pages/s", "p99", "pages per serve core-second", "machine busy", "2 instances ÷ 1:", "21 pages identical on every instance", "GOMAXPROCS=1"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("readscale's report lacks %q:\n%s", want, text.String())
		}
	}
}

// --pin without taskset on the PATH is refused before any ledger is made.
func TestBenchReadScalePinNeedsTaskset(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cfg := DefaultConfig()
	cfg.Scenario, cfg.Pin, cfg.Data = "readscale", true, t.TempDir()
	err := Run(t.Context(), cfg, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "taskset") {
		t.Errorf("bench --scenario readscale --pin without taskset = %v, want an error naming taskset", err)
	}
	if m, _ := filepath.Glob(filepath.Join(cfg.Data, "*")); len(m) != 0 {
		t.Errorf("bench --pin without taskset left %v in --data, want nothing", m)
	}
}
