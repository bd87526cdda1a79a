package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/turnledger/turnledger/internal/testclock"
	"github.com/turnledger/turnledger/projection"
	"github.com/turnledger/turnledger/serve"
)

// startRetentionService runs serve's service in the test's process on dir
// with the clock now, the reaper off and retention on (1h) with its timer
// off: the test runs it with Retention().Once.
func startRetentionService(t *testing.T, dir string, now func() time.Time) *serve.Service {
	t.Helper()
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", dir
	cfg.ReapInterval = 0
	cfg.Now = now
	cfg.Retention.RetainFinished = time.Hour
	cfg.Retention.Interval = 1000 * time.Hour
	cfg.Retention.SegmentEvents = 4
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := serve.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("serve.Start = %v", err)
	}
	return s
}

// TestRetentionRetiresArchivesAndPurges drives serve with retention on and
// an injected clock: an old finished Turn is retired (404 saying so, its
// dispatch_key still finds it), an old live Turn is still claimed and
// finished, feeds below the horizon answer 410 (pages) or say so and end
// (event streams), the stream is purged below the horizon, the archive
// verifies, /readyz and /metrics show the horizon, and a replay from the
// archive and the stream rebuilds the projections the service had.
func TestRetentionRetiresArchivesAndPurges(t *testing.T) {
	dir := t.TempDir()
	clock := &testclock.Offset{}
	s := startRetentionService(t, dir, clock.Now)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Close()
		}
	})
	base := s.URL()
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	w := agentClient(t, admin, "p1", "worker", 2)
	dispatch := func(key string) string {
		var tv struct {
			TurnID string `json:"turn_id"`
		}
		json.Unmarshal(req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
			"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", "worker"), "input": map[string]any{"k": key},
			"turn_kind": "summarize", "dispatch_key": key, "authority": map[string]any{"mode": "root_request", "request_id": key},
		}, 200), &tv)
		return tv.TurnID
	}
	claim := func(want string) map[string]any {
		var c map[string]any
		json.Unmarshal(w.call("POST", "/v3r1/projects/p1/agents/worker/claims:claim", map[string]any{"agent": agentRef("p1", "worker")}, 200), &c)
		cl := c["claim"].(map[string]any)
		if cl["turn_id"] != want {
			t.Fatalf("claimed %v, want %s", cl["turn_id"], want)
		}
		return cl
	}
	finish := func(id string, cl map[string]any) {
		w.call("POST", "/v3r1/projects/p1/turns/"+id+":finish", map[string]any{"claim": cl, "outcome": "succeeded", "final_payload": map[string]any{"r": id}, "final_record_role": "final"}, 200)
	}
	old := dispatch("k-old")
	finish(old, claim(old))
	live := dispatch("k-live") // dispatched long ago, still queued

	clock.Advance(48 * time.Hour)
	recent := dispatch("k-recent")
	// The worker's claim takes the oldest queued Turn first.
	cLive := claim(live)
	if err := s.Retention().Once(t.Context()); err != nil {
		t.Fatalf("retention run = %v", err)
	}
	st := s.Retention().Status()
	if st.HorizonLedgerSeq <= 1 || st.ArchiveBytes == 0 || st.TurnsRetiredTotal != 1 || st.LastError != "" {
		t.Fatalf("retention status = %+v, want a horizon, an archive and one Turn retired", st)
	}
	horizon := st.HorizonLedgerSeq
	if first, err := s.Ledger().FirstSeq(t.Context()); err != nil || first != horizon {
		t.Errorf("stream's first ledger_seq = %d, %v; want the horizon %d", first, err, horizon)
	}

	// The retired Turn: 404 saying so; its dispatch_key still finds it.
	var e struct {
		Error, Message string
	}
	json.Unmarshal(req.call("GET", "/v3r1/projects/p1/turns/"+old, nil, 404), &e)
	if e.Error != "NotFoundError" || !strings.Contains(e.Message, "retired") {
		t.Errorf("GET the retired Turn = %+v, want a NotFoundError saying it was retired", e)
	}
	if again := dispatch("k-old"); again != old {
		t.Errorf("dispatch k-old again = %s, want the retired Turn %s", again, old)
	}
	// The old live Turn works: its claim, taken after the horizon, finishes it.
	finish(live, cLive)
	finish(recent, claim(recent))

	// Feeds below the horizon: 410 with the horizon.
	var gone struct {
		Error            string `json:"error"`
		Message          string `json:"message"`
		HorizonLedgerSeq uint64 `json:"horizon_ledger_seq"`
	}
	json.Unmarshal(req.call("GET", "/v3r1/projects/p1/projection/feed", nil, 410), &gone)
	if gone.Error != "GoneError" || gone.HorizonLedgerSeq != horizon || gone.Message == "" {
		t.Errorf("feed below the horizon = %+v, want a GoneError at %d", gone, horizon)
	}
	json.Unmarshal(req.call("GET", "/v3r1/projects/p1/turns/"+live+"/feed?after_ledger_seq=1", nil, 410), &gone)
	if gone.HorizonLedgerSeq != horizon {
		t.Errorf("Turn feed below the horizon = %+v, want a GoneError at %d", gone, horizon)
	}
	var page struct {
		Items []struct {
			LedgerSeq uint64 `json:"ledger_seq"`
		} `json:"items"`
	}
	json.Unmarshal(req.call("GET", "/v3r1/projects/p1/projection/feed?limit=500&after_ledger_seq="+strconv.FormatUint(horizon-1, 10), nil, 200), &page)
	if len(page.Items) == 0 || page.Items[0].LedgerSeq != horizon {
		t.Errorf("feed from the horizon = %+v, want it to begin at %d", page.Items, horizon)
	}
	// An event stream below the horizon says so and ends.
	sreq, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/v3r1/projects/p1/projection/feed", nil)
	sreq.Header.Set("Accept", "text/event-stream")
	for k, v := range req.headers {
		sreq.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body) // ends: the stream closes
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("\n: gone: ")) || !bytes.Contains(body, []byte("event: error\ndata: {\"error\":\"GoneError\"")) {
		t.Errorf("event stream below the horizon = %d %q, want a gone comment and a GoneError event", resp.StatusCode, body)
	}

	var ready struct {
		Retention struct {
			HorizonLedgerSeq uint64 `json:"horizon_ledger_seq"`
			ArchiveBytes     int64  `json:"archive_bytes"`
			LastRunAt        string `json:"last_run_at"`
		} `json:"retention"`
	}
	json.Unmarshal(client{t: t, base: base}.call("GET", "/readyz", nil, 200), &ready)
	if ready.Retention.HorizonLedgerSeq != horizon || ready.Retention.ArchiveBytes == 0 || ready.Retention.LastRunAt == "" {
		t.Errorf("readyz retention = %+v, want horizon %d, the archive's size and the last run", ready.Retention, horizon)
	}
	metrics := string(client{t: t, base: base}.call("GET", "/metrics", nil, 200))
	if want := "turnledger_retention_horizon_ledger_seq " + strconv.FormatUint(horizon, 10) + "\n"; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %q", want)
	}

	// The archive verifies, from the command line.
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"archive", "verify", "--data", dir}, &out, &out); code != 0 || !strings.Contains(out.String(), ": ok") {
		t.Errorf("turnledger archive verify = %d:\n%s", code, out.String())
	}

	// Replay rebuilds, from the archive and the stream, what serve had.
	live1 := dumpAfterClose(t, s, dir)
	stopped = true
	out.Reset()
	if code := Main(t.Context(), []string{"replay", "--data", dir}, &out, &out); code != 0 {
		t.Fatalf("turnledger replay = %d:\n%s", code, out.String())
	}
	rebuilt := dumpFile(t, filepath.Join(dir, "projections.db"))
	if diff := cmp.Diff(live1, rebuilt); diff != "" {
		t.Errorf("replayed projections differ from the live ones (-live +replayed):\n%s", diff)
	}
}

// dumpAfterClose closes s and dumps its projection file.
func dumpAfterClose(t *testing.T, s *serve.Service, dir string) map[string]map[string]string {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dumpFile(t, filepath.Join(dir, "projections.db"))
}

func dumpFile(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	st, err := projection.Open(path, projection.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := st.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
