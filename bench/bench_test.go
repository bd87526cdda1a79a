package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnledger/turnledger/serve"
)

// TestBenchLifecycleReportsSaneNumbers runs a short closed-loop bench and
// checks that its report adds up — not how fast it was —, with the workers
// on a connection each (the default) and on net/http's Client.
func TestBenchLifecycleReportsSaneNumbers(t *testing.T) {
	for _, c := range []struct {
		netHTTP bool
		client  string
	}{{false, "conn"}, {true, "net/http"}} {
		t.Run(c.client, func(t *testing.T) {
			var out, errb bytes.Buffer
			profiles := t.TempDir()
			cfg := DefaultConfig()
			cfg.Duration, cfg.Agents, cfg.Requesters, cfg.Projects, cfg.JSON = time.Second, 4, 2, 2, true
			cfg.CPUProfile, cfg.MemProfile, cfg.MutexProfile = filepath.Join(profiles, "cpu.prof"), filepath.Join(profiles, "mem.prof"), filepath.Join(profiles, "mu.prof")
			cfg.NetHTTP = c.netHTTP
			if err := Run(t.Context(), cfg, &out, &errb); err != nil {
				t.Fatalf("bench = %v: %s", err, errb.String())
			}
			for _, name := range []string{"cpu.prof", "mem.prof", "mu.prof"} {
				// A pprof profile is a gzipped protocol buffer.
				if b, err := os.ReadFile(filepath.Join(profiles, name)); err != nil || len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
					t.Errorf("bench wrote %s of %d bytes (%v), want a gzipped pprof profile", name, len(b), err)
				}
			}
			var r Result
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
			if got, want := r.CmdRatio, r.CmdsPerSec/max(r.AppendsPerSec, r.GroupAppendsPerSec); got < want*0.999 || got > want*1.001 {
				t.Errorf("commands_to_appends_ratio = %v, want commands/s ÷ the faster append rate = %v", got, want)
			}
			if r.GroupWriters != 4 || r.EventsPerFsync < 1 {
				t.Errorf("bench limit from %d writers at %.1f events per fsync; want 4 writers (--agents) and at least one event per fsync (--sync always commits in groups)", r.GroupWriters, r.EventsPerFsync)
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

// TestBenchRecordsPerTurn: --records sets how many records each Turn gets
// before its finish, 0 making the lifecycle dispatch, claim, finish (the
// finish writes the final record), as River's lifecycle in bench/river
// inserts a job and writes its record with the completion.
func TestBenchRecordsPerTurn(t *testing.T) {
	for _, records := range []int{0, 2} {
		t.Run(fmt.Sprint(records), func(t *testing.T) {
			var out, errb bytes.Buffer
			cfg := DefaultConfig()
			cfg.Duration, cfg.Agents, cfg.Requesters, cfg.JSON, cfg.Records = time.Second, 4, 2, true, records
			if err := Run(t.Context(), cfg, &out, &errb); err != nil {
				t.Fatalf("bench = %v: %s", err, errb.String())
			}
			var r Result
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("bench --json printed %q: %v", out.String(), err)
			}
			if r.Turns < 1 || r.Errors != 0 || r.RecordsPerTurn != records {
				t.Fatalf("bench = %+v; want Turns ≥ 1, no errors, %d records per Turn", r, records)
			}
			if got := int64(r.Commands["record"].N); got < int64(records)*r.Turns || got > int64(records)*(r.Turns+int64(cfg.Agents)) {
				t.Errorf("%d records sent for %d Turns, want %d per Turn", got, r.Turns, records)
			}
			if perTurn, want := r.CmdsPerSec/r.TurnsPerSec, float64(records+3); perTurn < want-0.01 || perTurn > want+0.5 {
				t.Errorf("commands per Turn = %.2f, want %v plus at most a few unfinished", perTurn, want)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.Records = -1
	if err := Run(t.Context(), cfg, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--records") {
		t.Errorf("bench --records -1 = %v, want an error naming --records", err)
	}
}

// TestBenchOverloadReportsSaneNumbers runs the overload scenario briefly
// and checks that its report adds up and shows each protection at work —
// counts and bounds, never how fast anything was.
func TestBenchOverloadReportsSaneNumbers(t *testing.T) {
	var out, errb bytes.Buffer
	cfg := DefaultConfig()
	cfg.Scenario, cfg.Duration, cfg.Events, cfg.Agents, cfg.JSON = "overload", 1600*time.Millisecond, 30, 8, true
	if err := Run(t.Context(), cfg, &out, &errb); err != nil {
		t.Fatalf("bench --scenario overload = %v: %s", err, errb.String())
	}
	var res Result
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

// A bench against a running serve (--url) can be run again: the first run
// ends in the middle of lifecycles, leaving claims held by its workers, and
// the second still reports no error.
func TestBenchAgainstARunningServeTwice(t *testing.T) {
	scfg := serve.DefaultConfig()
	scfg.Addr, scfg.DataDir, scfg.AdminToken, scfg.ReapInterval = "127.0.0.1:0", t.TempDir(), "tladm_twice", 50*time.Millisecond
	scfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := serve.Start(t.Context(), scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for run := 1; run <= 2; run++ {
		var out, errb bytes.Buffer
		cfg := DefaultConfig()
		cfg.URL, cfg.AdminToken, cfg.Duration, cfg.Agents, cfg.Requesters, cfg.JSON = s.URL(), scfg.AdminToken, time.Second, 4, 1, true
		if err := Run(t.Context(), cfg, &out, &errb); err != nil {
			t.Fatalf("bench run %d = %v: %s", run, err, errb.String())
		}
		var r Result
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("bench run %d printed %q: %v", run, out.String(), err)
		}
		if r.Turns < 1 || r.Errors != 0 {
			t.Errorf("bench run %d against a running serve: %d Turns, %d errors (%s); want Turns and no error", run, r.Turns, r.Errors, strings.TrimSpace(errb.String()))
		}
	}
}
