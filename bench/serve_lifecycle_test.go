package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

// BenchmarkServeLifecycle measures one Turn's whole life — dispatch, claim,
// one record, finish — over HTTP against `serve` as a user runs it: the
// embedded NATS server with JetStream file storage and the bbolt projections
// with an fsync per fold, eight agents working in parallel in one project.
func BenchmarkServeLifecycle(b *testing.B) {
	dir := b.TempDir()
	cfg := serve.DefaultConfig()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", dir
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if v := os.Getenv("TURNLEDGER_BENCH_SYNC"); v != "" { // always (the default) or interval
		cfg.Sync = ledger.Sync(v)
	}
	s, err := serve.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tok, _ := os.ReadFile(filepath.Join(dir, "admin-token"))
	admin := map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(tok))}
	call := func(h map[string]string, path string, body any) []byte {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", s.URL()+path, bytes.NewReader(data))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			b.Fatalf("POST %s = %d %s", path, resp.StatusCode, out)
		}
		return out
	}
	agent := func(id string, capacity int, grants ...string) map[string]string {
		call(admin, "/v3r1/projects/p1/agents:register", map[string]any{
			"spec": map[string]any{"agent_id": id, "role": "w", "description": "", "enabled": true, "accepts_work": true,
				"capacity": capacity, "capabilities": []string{}, "grants": append([]string{}, grants...), "public_metadata": map[string]any{}},
			"provenance": map[string]any{"kind": "bench", "external_ref": "", "payload_hash": nil}})
		var issued struct {
			Token string `json:"token"`
		}
		json.Unmarshal(call(admin, "/v3r1/projects/p1/agents/"+id+"/credentials:issue", nil), &issued)
		return map[string]string{"X-Svc-Project-Id": "p1", "X-Svc-Agent-Id": id, "Authorization": "Bearer " + issued.Token}
	}
	req := agent("req", 1, "turns:dispatch")
	const agents = 8
	workers := make([]map[string]string, agents)
	for i := range workers {
		workers[i] = agent(fmt.Sprintf("w%d", i), 1)
	}
	ref := func(a string) map[string]string { return map[string]string{"project_id": "p1", "agent_id": a} }
	var next atomic.Int64
	b.SetParallelism(agents / 2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)-1) % agents
		w, id := workers[i], fmt.Sprintf("w%d", i)
		for n := 0; pb.Next(); n++ {
			call(req, "/v3r1/projects/p1/turns:dispatch", map[string]any{"requested_by": ref("req"), "target_agent": ref(id),
				"input": map[string]any{}, "turn_kind": "k", "dispatch_key": fmt.Sprintf("%s-%d", id, n),
				"authority": map[string]any{"mode": "root_request", "request_id": "r"}})
			var c struct {
				Claim json.RawMessage `json:"claim"`
				Turn  struct {
					TurnID string `json:"turn_id"`
				} `json:"turn"`
			}
			json.Unmarshal(call(w, "/v3r1/projects/p1/agents/"+id+"/claims:claim", map[string]any{"agent": ref(id)}), &c)
			call(w, "/v3r1/projects/p1/turns/"+c.Turn.TurnID+"/semantic-records", map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{}})
			call(w, "/v3r1/projects/p1/turns/"+c.Turn.TurnID+":finish", map[string]any{"claim": c.Claim, "outcome": "succeeded", "final_payload": nil, "final_record_role": ""})
		}
	})
}
