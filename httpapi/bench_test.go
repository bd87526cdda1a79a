package httpapi_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/turnledger/turnledger/kernel"
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
// HTTP at the end of a ledger of 100k events, of which 25k are the project's:
// keyed by big-endian ledger_seq, a page costs O(limit) whatever the ledger's
// length.
func BenchmarkProjectFeedPageHTTP(b *testing.B) {
	e := newEnv(b)
	reader := e.register("p1", "reader", 1, "projections:read")
	// Fill the ledger through the engine: 4 projects at once, 100k events.
	const events, projects = 100_000, 4
	admin := kernel.Common{Caller: kernel.Caller{Admin: true}}
	var wg sync.WaitGroup
	for p := 0; p < projects; p++ {
		project := fmt.Sprintf("p%d", p+1)
		e.register(project, "w", 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < events/projects; i++ {
				if _, err := e.engine.Execute(b.Context(), project, kernel.Heartbeat{Common: admin, AgentID: "w"}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	head, err := e.ledger.Head(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	if err := e.store.WaitFor(b.Context(), head); err != nil {
		b.Fatal(err)
	}
	path := fmt.Sprintf("/v3r1/projects/p1/projection/feed?limit=100&after_ledger_seq=%d", head-1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.must(reader, "GET", path, nil, 200)
	}
}
