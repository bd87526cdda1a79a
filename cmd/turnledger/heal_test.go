package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/internal/natstest"
)

// truncateHalf cuts the file at path to half its length: a crash of the disk
// in the middle of its used pages.
func truncateHalf(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedProjectionsAreHealed: a truncated projection file is moved aside
// and rebuilt by `replay` (which never opens it as a database, and refuses
// while serve holds it) and by `serve` on start.
func TestDamagedProjectionsAreHealed(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir)
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	for i := range 40 {
		req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
			"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", "req"), "input": map[string]any{"i": i, "pad": strings.Repeat("x", 2000)},
			"turn_kind": "summarize", "dispatch_key": "k" + string(rune('a'+i%26)) + string(rune('a'+i/26)), "authority": map[string]any{"mode": "root_request", "request_id": "r"},
		}, 200)
	}
	waitReady(t, base)
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"replay", "--data", dir}, &out, &out); code == 0 || !strings.Contains(out.String(), "in use") {
		t.Errorf("replay while serve runs = %d %q, want a refusal naming the lock", code, out.String())
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve exited with %d", code)
	}
	live := filepath.Join(dir, "projections.db")
	want := dumpProjections(t, live)

	truncateHalf(t, live)
	out.Reset()
	if code := Main(t.Context(), []string{"replay", "--data", dir}, &out, &out); code != 0 {
		t.Fatalf("replay of a truncated file exited with %d:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "damaged") {
		t.Errorf("replay output does not say the old file was damaged:\n%s", out.String())
	}
	if diff := cmp.Diff(want, dumpProjections(t, live)); diff != "" {
		t.Errorf("replayed projections differ (-before +after):\n%s", diff)
	}

	truncateHalf(t, live)
	base, stop = startServe(t, dir)
	// /readyz is 503 (rebuilding) until the rebuild reaches the head.
	checkfor.Until(t, 10*time.Second, "serve to rebuild the damaged projections", func() bool {
		return client{t: t, base: base}.rawStatus("GET", "/readyz", nil) == 200
	})
	req.base = base
	req.call("GET", "/v3r1/projects/p1/projection/turns?limit=100", nil, 200)
	if code := stop(); code != 0 {
		t.Fatalf("serve exited with %d", code)
	}
	if diff := cmp.Diff(want, dumpProjections(t, live)); diff != "" {
		t.Errorf("projections healed by serve differ (-before +after):\n%s", diff)
	}
	aside := movedAside(live)
	if len(aside) == 0 {
		t.Errorf("no %s.damaged-* file kept", live)
	}

	// A stray write inside pages, their headers intact (what bbolt's own
	// check does not see): the sum of the pages taken when serve closed the
	// file finds it, and serve heals it on start.
	strayWrites(t, live)
	base, stop = startServe(t, dir)
	checkfor.Until(t, 10*time.Second, "serve to rebuild the projections after a stray write", func() bool {
		return client{t: t, base: base}.rawStatus("GET", "/readyz", nil) == 200
	})
	if code := stop(); code != 0 {
		t.Fatalf("serve exited with %d", code)
	}
	if diff := cmp.Diff(want, dumpProjections(t, live)); diff != "" {
		t.Errorf("projections healed after a stray write differ (-before +after):\n%s", diff)
	}
	if again := movedAside(live); len(again) != len(aside)+1 {
		t.Errorf("after a stray write inside pages, %d files moved aside, want %d: the damage went unseen", len(again), len(aside)+1)
	}
}

// movedAside lists the projection files moved aside from path (not their
// page sums).
func movedAside(path string) []string {
	all, _ := filepath.Glob(path + ".damaged-*")
	var files []string
	for _, f := range all {
		if !strings.HasSuffix(f, ".sum") {
			files = append(files, f)
		}
	}
	return files
}

// strayWrites overwrites 32 bytes in the middle of every page of the file
// at path that looks like a bbolt leaf page (its header names its own id and
// the leaf kind), leaving every header alone.
func strayWrites(t *testing.T, path string) {
	t.Helper()
	const ps = 4096
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	h := make([]byte, 16)
	n := 0
	for id := int64(2); id < fi.Size()/ps; id++ {
		if _, err := f.ReadAt(h, id*ps); err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint64(h) != uint64(id) || binary.LittleEndian.Uint16(h[8:]) != 0x02 {
			continue
		}
		if _, err := f.WriteAt(bytes.Repeat([]byte{0x5a}, 32), id*ps+ps/2); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no leaf page in the file")
	}
}

// TestDamageUnderARunningServeFailsReadiness: pages zeroed under a running
// serve make the reads that meet them answer 503 (never 500) and /readyz
// report the projections failing.
func TestDamageUnderARunningServeFailsReadiness(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir)
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	for i := range 40 {
		req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
			"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", "req"), "input": map[string]any{"i": i, "pad": strings.Repeat("x", 2000)},
			"turn_kind": "summarize", "dispatch_key": fmt.Sprint(i), "authority": map[string]any{"mode": "root_request", "request_id": "r"},
		}, 200)
	}
	waitReady(t, base)
	live := filepath.Join(dir, "projections.db")
	fi, err := os.Stat(live)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(live, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, fi.Size()-8192), 8192); err != nil {
		t.Fatal(err)
	}
	f.Close()
	status := req.rawStatus("GET", "/v3r1/projects/p1/projection/turns?limit=500", nil)
	if status != 503 {
		t.Errorf("a read over zeroed pages = %d, want 503", status)
	}
	var ready struct {
		Status      string `json:"status"`
		Projections struct {
			Failing   bool   `json:"failing"`
			LastError string `json:"last_error"`
		} `json:"projections"`
	}
	json.Unmarshal(client{t: t, base: base}.call("GET", "/readyz", nil, 503), &ready)
	if ready.Status != "not_ready" || !ready.Projections.Failing || ready.Projections.LastError == "" {
		t.Errorf("/readyz after a damaged read = %+v, want not_ready with the projections failing", ready)
	}
	stop()
}

// TestASecondServeLeavesARunningOnesFileAlone starts serve on a data
// directory with --nats-url, then a second serve on the same directory (and
// NATS server), and one with the embedded server: each refuses to start,
// naming the data directory, and the running instance's projection file is
// neither checked as damaged nor moved aside — it keeps serving from it.
func TestASecondServeLeavesARunningOnesFileAlone(t *testing.T) {
	srv := natstest.Start(t)
	dir := t.TempDir()
	base, stop := startEngine(t, dir, "127.0.0.1:0", "--nats-url", srv.ClientURL())
	admin := adminClient(t, base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")
	dispatch := func(key string) {
		req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
			"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", "req"), "input": map[string]any{},
			"turn_kind": "summarize", "dispatch_key": key, "authority": map[string]any{"mode": "root_request", "request_id": "r"},
		}, 200)
	}
	dispatch("before")
	waitReady(t, base)
	live := filepath.Join(dir, "projections.db")
	before, err := os.Stat(live)
	if err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"same NATS server": {"--nats-url", srv.ClientURL()},
		"embedded":         nil,
	} {
		var out syncBuffer
		code := Main(t.Context(), append([]string{"serve", "--addr", "127.0.0.1:0", "--data", dir}, args...), &out, &out)
		if want := live + " is in use"; code != 1 || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "running on "+dir) {
			t.Errorf("a second serve (%s) on %s = exit %d:\n%s\nwant exit 1 saying %q and naming the data directory", name, dir, code, out.String(), want)
		}
		if strings.Contains(out.String(), "damaged") {
			t.Errorf("a second serve (%s) took the running one's file for damaged:\n%s", name, out.String())
		}
		after, err := os.Stat(live)
		if err != nil || !os.SameFile(before, after) {
			t.Fatalf("after a second serve (%s), %s was moved or replaced (Stat = %v)", name, live, err)
		}
		if aside, _ := filepath.Glob(live + ".damaged-*"); len(aside) != 0 {
			t.Fatalf("after a second serve (%s), files were moved aside: %v", name, aside)
		}
	}
	// The running instance never noticed.
	dispatch("after")
	waitReady(t, base)
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	json.Unmarshal(req.call("GET", "/v3r1/projects/p1/projection/turns?limit=10", nil, 200), &page)
	if len(page.Items) != 2 {
		t.Errorf("the running serve lists %d Turns, want 2", len(page.Items))
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited with %d", code)
	}
}
