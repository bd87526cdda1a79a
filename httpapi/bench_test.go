package httpapi_test

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkLifecycleHTTP measures one Turn's whole life over HTTP — dispatch,
// claim, one semantic record, finish: four commands, each appended to
// JetStream and answered after the projections reached it — with several
// agents working in parallel in one project. One op is one whole lifecycle.
func BenchmarkLifecycleHTTP(b *testing.B) {
	e := newEnv(b)
	const agents = 8
	req := e.register("p1", "req", 1, "turns:dispatch")
	workers := make([]as, agents)
	for i := range workers {
		workers[i] = e.register("p1", fmt.Sprintf("w%d", i), 1)
	}
	var next atomic.Int64
	b.SetParallelism(agents / 2) // GOMAXPROCS × 4 goroutines, one agent each
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := workers[int(next.Add(1)-1)%agents]
		for n := 0; pb.Next(); n++ {
			key := fmt.Sprintf("%s-%d", w.agent, n)
			e.dispatch(req, w.agent, key)
			c := e.claim(w)
			if c == nil {
				b.Error("nothing to claim")
				return
			}
			e.must(w, "POST", "/v3r1/projects/p1/turns/"+c.Turn.TurnID+"/semantic-records",
				map[string]any{"claim": c.Claim, "role": "note", "payload": map[string]any{"n": n}}, 200)
			e.must(w, "POST", "/v3r1/projects/p1/turns/"+c.Turn.TurnID+":finish",
				map[string]any{"claim": c.Claim, "outcome": "succeeded", "final_payload": nil, "final_record_role": ""}, 200)
		}
	})
}

// BenchmarkProjectFeedPageHTTP measures a feed page of 100 items read over
// HTTP from the end of a ledger of 100k events.
func BenchmarkProjectFeedPageHTTP(b *testing.B) {
	e := newEnv(b)
	req := e.register("p1", "req", 1, "turns:dispatch", "projections:read")
	e.register("p1", "w", 1)
	// Fill the ledger through the engine directly: 100k heartbeats.
	const events = 100_000
	for i := 0; i < events; i++ {
		e.must(req, "POST", "/v3r1/projects/p1/management/agents/req:heartbeat-presence", nil, 200)
	}
	head, _ := e.ledger.Head(b.Context())
	path := fmt.Sprintf("/v3r1/projects/p1/projection/feed?limit=100&after_ledger_seq=%d", head-100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.must(req, "GET", path, nil, 200)
	}
}
