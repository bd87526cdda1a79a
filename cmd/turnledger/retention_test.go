package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/turnledger/turnledger/engine"
	"github.com/turnledger/turnledger/internal/testclock"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

// startRetentionService runs serve's service in the test's process on dir
// with the clock now, the reaper off and retention on (1h) with its timer
// off: the test runs it with Retention().Once.
func startRetentionService(t *testing.T, dir string, now func() time.Time) *serve.Service {
	return startRetentionServiceWith(t, dir, now, func(*serve.Config) {})
}

// startRetentionServiceWith is startRetentionService with the configuration
// edited by edit.
func startRetentionServiceWith(t *testing.T, dir string, now func() time.Time, edit func(*serve.Config)) *serve.Service {
	t.Helper()
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", dir
	cfg.ReapInterval = 0
	cfg.Now = now
	cfg.Retention.RetainFinished = time.Hour
	cfg.Retention.Interval = 1000 * time.Hour
	cfg.Retention.SegmentEvents = 4
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	edit(&cfg)
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
	dispatch := func(key string) string { return dispatchIn(req, "worker", key) }
	claim := func(want string) map[string]any {
		cl := claimIn(w, "worker")
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
	// Finished two hours before the run: older than the retention (1h), but
	// its idempotency memory (24h) has not lapsed.
	clock.Advance(46 * time.Hour)
	w2 := agentClient(t, admin, "p1", "w2", 1)
	mid := dispatchIn(req, "w2", "k-mid")
	w2.call("POST", "/v3r1/projects/p1/turns/"+mid+":finish", map[string]any{"claim": claimIn(w2, "w2"), "outcome": "succeeded", "final_payload": nil, "final_record_role": ""}, 200)
	clock.Advance(2 * time.Hour)
	recent := dispatch("k-recent")
	// The worker's claim takes the oldest queued Turn first.
	cLive := claim(live)
	runRetention(t, s)
	st := s.Retention().Status()
	if st.HorizonLedgerSeq <= 1 || st.ArchiveBytes == 0 || st.TurnsRetiredTotal != 1 || st.LastError != "" {
		t.Fatalf("retention status = %+v, want a horizon, an archive and one Turn retired", st)
	}
	horizon := st.HorizonLedgerSeq
	if below := keptBelow(t, s, horizon); below < 0 || below > 4 {
		t.Errorf("the stream holds %d events below the horizon %d, want at most one per subject of p1 (4)", below, horizon)
	}

	// The retired Turn: 404 saying so; its dispatch_key still finds it.
	var e struct {
		Error, Message string
	}
	json.Unmarshal(req.call("GET", "/v3r1/projects/p1/turns/"+old, nil, 404), &e)
	if e.Error != "NotFoundError" || !strings.Contains(e.Message, "retired") {
		t.Errorf("GET the retired Turn = %+v, want a NotFoundError saying it was retired", e)
	}
	req.call("GET", "/v3r1/projects/p1/turns/"+mid, nil, 200) // within the idempotency memory: kept
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
	out.Reset()
	if code := Main(t.Context(), []string{"archive", "ls", "--data", dir}, &out, &out); code != 0 || !strings.Contains(out.String(), "00000000000000000001-00000000000000000004.jsonl.zst\t1\t4\t") {
		t.Errorf("turnledger archive ls = %d:\n%s", code, out.String())
	}
	// cat: the events after 2 up to 5, one JSON line each, as the stream had them.
	out.Reset()
	if code := Main(t.Context(), []string{"archive", "cat", "--data", dir, "--after", "2", "--until", "5"}, &out, &out); code != 0 {
		t.Fatalf("turnledger archive cat = %d:\n%s", code, out.String())
	}
	var catSeqs []uint64
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var l struct {
			LedgerSeq uint64 `json:"ledger_seq"`
			Event     struct {
				Type string `json:"type"`
			} `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Event.Type == "" {
			t.Errorf("archive cat line %q: %v", line, err)
		}
		catSeqs = append(catSeqs, l.LedgerSeq)
	}
	if diff := cmp.Diff([]uint64{3, 4, 5}, catSeqs); diff != "" {
		t.Errorf("archive cat --after 2 --until 5 (-want +got):\n%s", diff)
	}

	// Replay rebuilds, from the archive and the stream, what serve had.
	live1 := dumpAfterClose(t, s, dir)
	stopped = true
	out.Reset()
	if code := Main(t.Context(), []string{"replay", "--data", dir}, &out, &out); code != 0 {
		t.Fatalf("turnledger replay = %d:\n%s", code, out.String())
	}
	rebuilt := dumpProjections(t, filepath.Join(dir, "projections.db"))
	if diff := cmp.Diff(live1, rebuilt); diff != "" {
		t.Errorf("replayed projections differ from the live ones (-live +replayed):\n%s", diff)
	}
}

// TestRetentionArchivesIntoABucket: with --archive-dir nats://<bucket>, a
// retention run archives into an object store bucket on the ledger's
// server before it purges; the retired Turn's dispatch_key still finds it;
// after a restart the feed below the horizon still answers 410, and a
// replay reads the bucket and the stream into what serve had.
func TestRetentionArchivesIntoABucket(t *testing.T) {
	dir := t.TempDir()
	clock := &testclock.Offset{}
	bucket := func(c *serve.Config) { c.Retention.ArchiveDir = "nats://tl-archive" }
	s := startRetentionServiceWith(t, dir, clock.Now, bucket)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Close()
		}
	})
	admin := adminClient(t, s.URL(), dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	w := agentClient(t, admin, "p1", "worker", 2)
	old := dispatchIn(req, "worker", "k-old")
	w.call("POST", "/v3r1/projects/p1/turns/"+old+":finish", map[string]any{"claim": claimIn(w, "worker"), "outcome": "succeeded", "final_payload": nil, "final_record_role": ""}, 200)
	clock.Advance(48 * time.Hour)
	recent := dispatchIn(req, "worker", "k-recent")
	runRetention(t, s)
	st := s.Retention().Status()
	if st.HorizonLedgerSeq <= 1 || st.ArchiveBytes == 0 || st.TurnsRetiredTotal != 1 || st.LastError != "" {
		t.Fatalf("retention status = %+v, want a horizon, an archive and one Turn retired", st)
	}
	js, err := jetstream.New(s.NATS())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ledger.ReadObjectArchive(t.Context(), js, "tl-archive")
	if err != nil {
		t.Fatal(err)
	}
	segs, err := a.Segments()
	if err != nil || len(segs) == 0 || segs[len(segs)-1].Last != st.HorizonLedgerSeq-1 {
		t.Fatalf("the bucket's segments = %+v, %v; want them to end below the horizon %d", segs, err, st.HorizonLedgerSeq)
	}
	for _, seg := range segs {
		if _, err := a.Verify(seg); err != nil {
			t.Errorf("Verify(%s) = %v", seg.Name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "archive")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an archive directory beside a bucket archive: %v", err)
	}
	if again := dispatchIn(req, "worker", "k-old"); again != old {
		t.Errorf("dispatch k-old again = %s, want the retired Turn %s", again, old)
	}
	live := dumpAfterClose(t, s, dir)
	stopped = true

	s = startRetentionServiceWith(t, dir, clock.Now, bucket)
	req.base = s.URL()
	req.call("GET", "/v3r1/projects/p1/projection/feed", nil, 410)
	req.call("GET", "/v3r1/projects/p1/turns/"+recent, nil, 200)
	s.Close()
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"replay", "--data", dir, "--archive-dir", "nats://tl-archive"}, &out, &out); code != 0 {
		t.Fatalf("turnledger replay = %d:\n%s", code, out.String())
	}
	if diff := cmp.Diff(live, dumpProjections(t, filepath.Join(dir, "projections.db"))); diff != "" {
		t.Errorf("replayed projections differ from the live ones (-live +replayed):\n%s", diff)
	}
}

// dispatchIn dispatches, as the agent "req" of project p1 with the client
// req, a root Turn of dispatch_key key to target, and returns its id.
func dispatchIn(req client, target, key string) string {
	var tv struct {
		TurnID string `json:"turn_id"`
	}
	json.Unmarshal(req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
		"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", target), "input": map[string]any{"k": key},
		"turn_kind": "summarize", "dispatch_key": key, "authority": map[string]any{"mode": "root_request", "request_id": key},
	}, 200), &tv)
	return tv.TurnID
}

// claimIn claims, as agent of p1 with the client c, its next Turn and
// returns the claim.
func claimIn(c client, agent string) map[string]any {
	var won struct {
		Claim map[string]any `json:"claim"`
	}
	json.Unmarshal(c.call("POST", "/v3r1/projects/p1/agents/"+agent+"/claims:claim", map[string]any{"agent": agentRef("p1", agent)}, 200), &won)
	return won.Claim
}

// keptBelow is how many events the stream of s holds below horizon: after a
// purge, the last of each subject whose last is below it.
// runRetention runs one retention run of s once its projections have
// committed every event of the ledger (a run archives and retires up to
// the projections' checkpoint, which follows a command's answer by a few
// milliseconds).
func runRetention(t *testing.T, s *serve.Service) {
	t.Helper()
	head, err := s.Ledger().Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store().WaitFor(t.Context(), head); err != nil {
		t.Fatal(err)
	}
	if err := s.Retention().Once(t.Context()); err != nil {
		t.Fatalf("retention run = %v", err)
	}
}

func keptBelow(t *testing.T, s *serve.Service, horizon uint64) int {
	t.Helper()
	n, err := s.Ledger().Messages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	head, err := s.Ledger().Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return int(n) - int(head-horizon+1)
}

// dumpAfterClose closes s and dumps its projection file.
func dumpAfterClose(t *testing.T, s *serve.Service, dir string) map[string]map[string]string {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dumpProjections(t, filepath.Join(dir, "projections.db"))
}

// errCrash stands for a process that died between two steps of a run.
var errCrash = errors.New("crash")

type crashingLedger struct {
	engine.RetentionLedger
	crash *atomic.Bool
}

func (c crashingLedger) PurgeBelow(ctx context.Context, horizon uint64) error {
	if c.crash.Load() {
		return errCrash
	}
	return c.RetentionLedger.PurgeBelow(ctx, horizon)
}

type crashingProjections struct {
	engine.RetentionProjections
	crash *atomic.Bool
}

func (c crashingProjections) Retire(ctx context.Context, horizon uint64, before, now time.Time) (engine.Retired, error) {
	if c.crash.Load() {
		return engine.Retired{}, errCrash
	}
	return c.RetentionProjections.Retire(ctx, horizon, before, now)
}

// archivedSeqs reads every ledger_seq of the archive in dir, in order.
func archivedSeqs(t *testing.T, dir string) ([]uint64, []ledger.Segment) {
	t.Helper()
	a, err := ledger.ReadArchive(filepath.Join(dir, "archive"))
	if err != nil {
		t.Fatal(err)
	}
	segs, err := a.Segments()
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	if err := a.Lines(0, func(l ledger.ArchiveLine) error { seqs = append(seqs, l.LedgerSeq); return nil }); err != nil {
		t.Fatal(err)
	}
	return seqs, segs
}

func seqsFrom(first, last uint64) []uint64 {
	var out []uint64
	for s := first; s <= last; s++ {
		out = append(out, s)
	}
	return out
}

// TestRetentionCrashLosesAndRepeatsNothing interrupts a retention run
// between the archive and the purge, and between the purge and the
// projections: nothing is lost meanwhile (the feeds and the Turn still read
// whole), the next run finishes the work without archiving any event twice,
// and a restart and a replay find everything in its place.
func TestRetentionCrashLosesAndRepeatsNothing(t *testing.T) {
	for _, tc := range []struct {
		name          string
		purge, retire bool // where the first run stops
	}{
		{"between archive and purge", true, false},
		{"between purge and projections", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := &testclock.Offset{}
			var crashPurge, crashRetire atomic.Bool
			crashPurge.Store(tc.purge)
			crashRetire.Store(tc.retire)
			cfg := serve.DefaultConfig()
			cfg.Addr, cfg.DataDir, cfg.ReapInterval, cfg.Now = "127.0.0.1:0", dir, 0, clock.Now
			cfg.Retention = serve.RetentionConfig{RetainFinished: time.Hour, Interval: 1000 * time.Hour, SegmentEvents: 3,
				Wrap: func(l engine.RetentionLedger, p engine.RetentionProjections) (engine.RetentionLedger, engine.RetentionProjections) {
					return crashingLedger{l, &crashPurge}, crashingProjections{p, &crashRetire}
				}}
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			s, err := serve.Start(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			base := s.URL()
			admin := adminClient(t, base, dir)
			req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
			w := agentClient(t, admin, "p1", "worker", 2)
			dispatch := func(key string) string { return dispatchIn(req, "worker", key) }
			claimFinish := func(id string) {
				w.call("POST", "/v3r1/projects/p1/turns/"+id+":finish", map[string]any{"claim": claimIn(w, "worker"), "outcome": "succeeded", "final_payload": nil, "final_record_role": ""}, 200)
			}
			feedSeqs := func(after uint64) []uint64 {
				var page struct {
					Items []struct {
						LedgerSeq uint64 `json:"ledger_seq"`
					} `json:"items"`
				}
				json.Unmarshal(req.call("GET", "/v3r1/projects/p1/projection/feed?limit=500&after_ledger_seq="+strconv.FormatUint(after, 10), nil, 200), &page)
				var out []uint64
				for _, it := range page.Items {
					out = append(out, it.LedgerSeq)
				}
				return out
			}
			old := dispatch("k-old")
			claimFinish(old)
			live := dispatch("k-live")
			clock.Advance(48 * time.Hour)
			dispatch("k-recent")
			head, err := s.Ledger().Head(t.Context())
			if err != nil {
				t.Fatal(err)
			}

			if err := s.Retention().Once(t.Context()); !errors.Is(err, errCrash) {
				t.Fatalf("interrupted run = %v, want the crash", err)
			}
			seqs, segs := archivedSeqs(t, dir)
			archived := uint64(len(seqs))
			if archived == 0 || !slices.Equal(seqs, seqsFrom(1, archived)) {
				t.Fatalf("archive after the interrupted run = %v, want 1..n", seqs)
			}
			// Purged or not, as far as the run got.
			if below := keptBelow(t, s, archived+1); (tc.purge && below != int(archived)) || (!tc.purge && below > 4) {
				t.Errorf("the stream holds %d events below %d after the interrupted run, want %s", below, archived+1, map[bool]string{true: "all of them", false: "at most the last of each subject"}[tc.purge])
			}
			// Nothing is lost meanwhile: the projections still hold it all.
			if got := feedSeqs(0); !slices.Equal(got, seqsFrom(1, head)) {
				t.Errorf("feed after the interrupted run = %v, want 1..%d", got, head)
			}
			req.call("GET", "/v3r1/projects/p1/turns/"+old, nil, 200)

			crashPurge.Store(false)
			crashRetire.Store(false)
			if err := s.Retention().Once(t.Context()); err != nil {
				t.Fatalf("the next run = %v", err)
			}
			seqs2, segs2 := archivedSeqs(t, dir)
			if !slices.Equal(seqs2, seqsFrom(1, uint64(len(seqs2)))) || len(seqs2) < len(seqs) {
				t.Errorf("archive after the next run = %v, want 1..n, each once", seqs2)
			}
			if diff := cmp.Diff(segs, segs2[:len(segs)]); diff != "" {
				t.Errorf("the next run rewrote segments (-before +after):\n%s", diff)
			}
			horizon := s.Retention().Status().HorizonLedgerSeq
			if below := keptBelow(t, s, horizon); horizon != uint64(len(seqs2))+1 || below > 4 {
				t.Errorf("horizon %d with %d events of the stream below it; want the archive's last + 1 = %d, and at most one per subject", horizon, below, len(seqs2)+1)
			}
			req.call("GET", "/v3r1/projects/p1/turns/"+old, nil, 404)
			req.call("GET", "/v3r1/projects/p1/projection/feed", nil, 410)

			// A restart: the old live Turn is claimed and finished; a replay
			// rebuilds what the service had.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := serve.Start(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			req.base, w.base = s2.URL(), s2.URL()
			claimFinish(live)
			if got := feedSeqs(horizon - 1); len(got) == 0 || got[0] != horizon {
				t.Errorf("feed from the horizon after the restart = %v", got)
			}
			live1 := dumpAfterClose(t, s2, dir)
			var out bytes.Buffer
			if code := Main(t.Context(), []string{"replay", "--data", dir}, &out, &out); code != 0 {
				t.Fatalf("turnledger replay = %d:\n%s", code, out.String())
			}
			if diff := cmp.Diff(live1, dumpProjections(t, filepath.Join(dir, "projections.db"))); diff != "" {
				t.Errorf("replayed projections differ from the live ones (-live +replayed):\n%s", diff)
			}
		})
	}
}
