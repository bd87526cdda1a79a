package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// checks that its report adds up — not how fast it was —, with the workers
// on a connection each (the default) and on net/http's Client.
func TestBenchLifecycleReportsSaneNumbers(t *testing.T) {
	for _, c := range []struct {
		flags  []string
		client string
	}{{nil, "conn"}, {[]string{"--net-http"}, "net/http"}} {
		t.Run(c.client, func(t *testing.T) {
			var out, errb bytes.Buffer
			profiles := t.TempDir()
			args := append([]string{"bench", "--duration", "1s", "--agents", "4", "--requesters", "2", "--projects", "2", "--json",
				"--cpuprofile", filepath.Join(profiles, "cpu.prof"), "--memprofile", filepath.Join(profiles, "mem.prof"), "--mutexprofile", filepath.Join(profiles, "mu.prof")}, c.flags...)
			code := Main(t.Context(), args, &out, &errb)
			if code != 0 {
				t.Fatalf("bench exited %d: %s", code, errb.String())
			}
			for _, name := range []string{"cpu.prof", "mem.prof", "mu.prof"} {
				// A pprof profile is a gzipped protocol buffer.
				if b, err := os.ReadFile(filepath.Join(profiles, name)); err != nil || len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
					t.Errorf("bench wrote %s of %d bytes (%v), want a gzipped pprof profile", name, len(b), err)
				}
			}
			var r benchResult
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("bench --json printed %q: %v", out.String(), err)
			}
			if r.Turns < 1 || r.Errors != 0 || r.AppendsPerSec <= 0 || r.Agents != 4 || r.Projects != 2 || r.Client != c.client {
				t.Fatalf("bench = %+v; want Turns ≥ 1, no errors, an append rate, 4 agents over 2 projects, client %s", r, c.client)
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
		})
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

// TestBenchOverloadReportsSaneNumbers runs the overload scenario briefly
// and checks that its report adds up and shows each protection at work —
// counts and bounds, never how fast anything was.
func TestBenchOverloadReportsSaneNumbers(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(t.Context(), []string{"bench", "--scenario", "overload", "--duration", "1600ms", "--events", "30", "--agents", "8", "--json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("bench --scenario overload exited %d: %s", code, errb.String())
	}
	var res benchResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Overload == nil {
		t.Fatalf("bench --json printed %q: %v", out.String(), err)
	}
	r := res.Overload
	if r.CapacityPerSec <= 0 || r.IdleP50 <= 0 || r.Factor != 3 || r.Dispatchers != 8 {
		t.Errorf("capacity %v/s, idle p50 %v ms, factor %v, %d dispatchers; want both measured, 3, 8", r.CapacityPerSec, r.IdleP50, r.Factor, r.Dispatchers)
	}
	for name, s := range map[string]openLoopStats{"off": r.OpenLoop.Off, "on": r.OpenLoop.On} {
		if s.Sent == 0 || s.OK+s.Shed+s.Failed != s.Sent || s.OK == 0 || s.OKP50 <= 0 || s.OKP50 > s.OKP99 || s.RatePerSec <= 0 {
			t.Errorf("open loop %s = %+v; want dispatches sent, each counted once, some accepted, 0 < p50 ≤ p99", name, s)
		}
		if s.RecoveryOK != s.RecoveryN || s.RecoveryN == 0 {
			t.Errorf("open loop %s: %d of %d dispatches after the load answered 200, want all (recovery is immediate)", name, s.RecoveryOK, s.RecoveryN)
		}
	}
	if r.OpenLoop.Off.Shed != 0 {
		t.Errorf("open loop with the protections off shed %d dispatches, want none", r.OpenLoop.Off.Shed)
	}
	for name, s := range map[string]floodStats{"alone": r.Flood.Alone, "off": r.Flood.Off, "on": r.Flood.On} {
		if s.N == 0 || s.Refused != 0 || s.P50 <= 0 || s.P50 > s.P99 {
			t.Errorf("flood %s: real agent %+v; want requests, none refused, 0 < p50 ≤ p99", name, s)
		}
	}
	if r.Flood.Off.FloodPerSec <= 0 || r.Flood.Off.Throttled != 0 || r.Flood.On.FloodPerSec <= 0 || r.Flood.On.Throttled < 0.5 {
		t.Errorf("flood off %+v, on %+v; want no 429 without the throttle and most of the flood 429 with it", r.Flood.Off, r.Flood.On)
	}
	sb := r.SlowBodies
	if sb.Off.Open != sb.Clients || sb.On.Cut != sb.Clients || sb.On.CutP50MS < sb.ReadTimeoutMS {
		t.Errorf("slow bodies of %d clients: off %+v, on %+v; want all open without a read timeout, all cut at the read timeout of %v ms with it", sb.Clients, sb.Off, sb.On, sb.ReadTimeoutMS)
	}
	c := r.Conns
	if c.Off.Served != c.Opened || c.On.Served != c.Cap || c.On.Waiting != c.Opened-c.Cap || c.On.Released == 0 || c.On.ServedAfterRelease != c.On.Released {
		t.Errorf("%d connections: off %+v, on (cap %d) %+v; want all served without a cap, the cap served with it and as many more as were closed", c.Opened, c.Off, c.Cap, c.On)
	}
	f := r.Feed
	for name, s := range map[string]feedStats{"off": f.Off, "on": f.On} {
		if s.Pages < f.Readers || s.RSSPeakMB <= 0 || s.HeapPeakMB <= 0 || s.RSSBeforeMB <= 0 {
			t.Errorf("feed %s = %+v; want a page per reader at least, RSS and heap measured", name, s)
		}
	}
	if f.On.MaxPageBytes > 4<<20+64<<10 || f.Off.MaxPageBytes <= f.On.MaxPageBytes {
		t.Errorf("largest feed page: on %d bytes, off %d; want at most about 4 MiB on, larger off (%d events of %d bytes)", f.On.MaxPageBytes, f.Off.MaxPageBytes, f.Events, f.EventBytes)
	}
}

func TestBenchRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "nope"}, {"--agents", "0"}, {"--projects", "9", "--agents", "4"}, {"--url", "http://127.0.0.1:1", "--scenario", "feed"}, {"extra"},
		{"--scenario", "overload", "--duration", "100ms"}, {"--factor", "0"}, {"--url", "http://127.0.0.1:1", "--scenario", "overload"},
	} {
		var errb bytes.Buffer
		if code := Main(t.Context(), append([]string{"bench"}, args...), &bytes.Buffer{}, &errb); code != 2 {
			t.Errorf("bench %v exited %d, want 2 (usage): %s", args, code, errb.String())
		}
	}
}

// A bench against a running serve (--url) can be run again: the first run
// ends in the middle of lifecycles, leaving claims held by its workers, and
// the second still reports no error.
func TestBenchAgainstARunningServeTwice(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	token, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		var out, errb bytes.Buffer
		code := Main(t.Context(), []string{"bench", "--url", base, "--admin-token", string(bytes.TrimSpace(token)), "--duration", "1s", "--agents", "4", "--requesters", "1", "--json"}, &out, &errb)
		if code != 0 {
			t.Fatalf("bench run %d exited %d: %s", run, code, errb.String())
		}
		var r benchResult
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("bench run %d printed %q: %v", run, out.String(), err)
		}
		if r.Turns < 1 || r.Errors != 0 {
			t.Errorf("bench run %d against a running serve: %d Turns, %d errors (%s); want Turns and no error", run, r.Turns, r.Errors, strings.TrimSpace(errb.String()))
		}
	}
}
