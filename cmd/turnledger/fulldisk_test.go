//go:build fulldisk

package main

// The full-disk test needs root (it mounts a small tmpfs), so it is built
// only with -tags fulldisk; .ci/run (which runs as root) runs it:
//
//	go test -tags fulldisk -run TestFullDisk ./cmd/turnledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFullDisk(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a 32 MiB tmpfs (the test needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	dir := filepath.Join(mnt, "data")
	c := startServeChild(t, dir)
	admin := adminClient(t, c.base, dir)
	req := agentClient(t, admin, "p1", "req", 1, "turns:dispatch", "projections:read")

	// Leave a little room, then fill it with dispatches until one is refused.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, max(free-6<<20, 0)), 0o600); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 64<<10)
	var acked []string
	status, body := 0, []byte(nil)
	for i := 0; i < 2000; i++ {
		status, body = req.post("/v3r1/projects/p1/turns:dispatch", map[string]any{
			"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", "req"), "input": map[string]any{"i": i, "pad": pad},
			"turn_kind": "summarize", "dispatch_key": fmt.Sprint(i), "authority": map[string]any{"mode": "root_request", "request_id": "r"},
		})
		if status != 200 {
			break
		}
		var tv struct {
			TurnID string `json:"turn_id"`
		}
		json.Unmarshal(body, &tv)
		acked = append(acked, tv.TurnID)
	}
	t.Logf("%d dispatches acknowledged before the disk was full; then %d %s", len(acked), status, body)
	var e struct {
		Error, Message string
	}
	if status != 503 {
		t.Logf("serve's log:\n%s", c.out.String())
	}
	if status != 503 || json.Unmarshal(body, &e) != nil || e.Error != "ServiceUnavailableError" || e.Message == "" {
		t.Fatalf("a command on a full disk = %d %s, want 503 ServiceUnavailableError", status, body)
	}
	if len(acked) == 0 {
		t.Fatalf("no dispatch fit before the disk was full")
	}

	// Free the space, restart: everything acknowledged is there.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if code := c.kill(t, syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Logf("serve exited with %d on SIGTERM after the full disk:\n%s", code, c.out.String())
	}
	c = startServeChild(t, dir)
	waitReadyz(t, c.base, 30*time.Second)
	req.base = c.base
	for _, id := range acked {
		req.call("GET", "/v3r1/projects/p1/turns/"+id, nil, 200)
	}
	req.call("POST", "/v3r1/projects/p1/turns:dispatch", map[string]any{
		"requested_by": agentRef("p1", "req"), "target_agent": agentRef("p1", "req"), "input": map[string]any{"after": true},
		"turn_kind": "summarize", "dispatch_key": "after", "authority": map[string]any{"mode": "root_request", "request_id": "r"},
	}, 200)

	// Nothing is corrupted: the projections equal a fresh replay.
	waitReady(t, c.base)
	if code := c.kill(t, syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("serve exited with %d on SIGTERM", code)
	}
	live := dumpProjections(t, filepath.Join(dir, "projections.db"))
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"replay", "--data", dir}, &out, &out); code != 0 {
		t.Fatalf("replay exited with %d:\n%s", code, out.String())
	}
	if diff := cmp.Diff(live, dumpProjections(t, filepath.Join(dir, "projections.db"))); diff != "" {
		t.Errorf("projections after the full disk differ from a fresh replay (-live +replayed):\n%s", diff)
	}
}

// post sends one request and returns its status and body (0 on a transport
// error).
func (c client) post(path string, body any) (int, []byte) {
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", c.base+path, bytes.NewReader(data))
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
