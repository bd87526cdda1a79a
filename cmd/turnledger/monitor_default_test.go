package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/checkfor"
)

// TestMonitorBuiltInConfig: `turnledger monitor` without --config watches
// the local engine, reading its admin token from the engine's data
// directory.
func TestMonitorBuiltInConfig(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	t.Setenv("TURNLEDGER_ADMIN_TOKEN", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"monitor", "--addr", "127.0.0.1:0", "--data", t.TempDir() + "/m.db", "--no-scheduler",
			"--engine-url", base, "--engine-data", dir, "--projects", "demo"}, out, out)
	}()
	listening := regexp.MustCompile(`monitor listening on (http://\S+)`)
	var api string
	checkfor.Until(t, 10*time.Second, "the monitor to listen", func() bool {
		select {
		case code := <-done:
			t.Fatalf("monitor exited with %d: %s", code, out.String())
		default:
		}
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			api = m[1]
			return true
		}
		return false
	})
	if !strings.Contains(out.String(), "built-in configuration") {
		t.Errorf("output %q does not say the built-in configuration is used", out.String())
	}
	resp, err := http.Post(api+"/api/connections/engine/test", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || !res.OK {
		t.Errorf("test of the built-in engine connection = %+v, %v; want ok", res, err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("monitor exited with %d", code)
	}
}
