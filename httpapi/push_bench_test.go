package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turnledger/turnledger/internal/checkfor"
	"github.com/turnledger/turnledger/kernel"
)

// BenchmarkLongPollWake measures a claim waiting in a long poll being
// answered: one op is a dispatch to the waiting agent and the wait for its
// long-poll claim to come back with the Turn (the dispatch's own round trip
// included).
func BenchmarkLongPollWake(b *testing.B) {
	e := newEnv(b)
	boss := e.register("p", "boss", 1, kernel.GrantDispatch)
	w := e.register("p", "w", 1)
	n := 0
	for b.Loop() {
		done := make(chan claimOutcome, 1)
		go func() { done <- claimWith(context.Background(), e.url, w, "?wait=30s") }()
		b.StopTimer()
		checkfor.Until(b, 10*time.Second, "the claim to wait", func() bool { k, _ := e.api.Waiting(); return k == 1 })
		b.StartTimer()
		e.dispatch(boss, "w", fmt.Sprintf("k%d", n))
		got := <-done
		b.StopTimer()
		var c claimed
		if got.status != 200 || jsonUnmarshal(got.body, &c) != nil {
			b.Fatalf("claim = %d %s", got.status, got.body)
		}
		e.must(w, "POST", "/v3r1/projects/p/turns/"+c.Turn.TurnID+":finish",
			map[string]any{"claim": c.Claim, "outcome": "succeeded", "final_payload": nil, "final_record_role": ""}, 200)
		b.StartTimer()
		n++
	}
}

// BenchmarkIdleLongPolls holds 0 and 1000 long-poll claims (of 1000 agents of
// one project) waiting and reports the process CPU time they cost per second of
// idleness (cpu-ms/s), then what waking them all costs: each op is one
// event of one agent of the project, which wakes nobody else.
func BenchmarkIdleLongPolls(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { idleLongPolls(b, n) })
	}
}

func idleLongPolls(b *testing.B, waiters int) {
	e := newEnv(b)
	agents := make([]as, max(waiters, 1))
	for i := range agents {
		agents[i] = e.register("p", fmt.Sprintf("a%d", i), 1)
	}
	http.DefaultTransport.(*http.Transport).MaxIdleConnsPerHost = waiters
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, a := range agents[:waiters] {
		go claimWith(ctx, e.url, a, "?wait=60s")
	}
	checkfor.Until(b, 60*time.Second, "every claim to wait", func() bool { k, _ := e.api.Waiting(); return k == int64(waiters) })
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	runtime.GC() // the setup's garbage is not the waiters' cost
	before, start := cpu(), time.Now()
	time.Sleep(2 * time.Second) // measuring idleness: nothing to wait for
	idle := float64((cpu() - before).Microseconds()) / 1000 / time.Since(start).Seconds()
	b.ResetTimer()
	for b.Loop() {
		e.must(agents[0], "POST", "/v3r1/projects/p/management/agents/a0:heartbeat-presence", nil, 200)
	}
	b.StopTimer()
	b.ReportMetric(idle, "idle-cpu-ms/s")
	if k, _ := e.api.Waiting(); k != int64(waiters) {
		b.Errorf("%d claims waiting after the heartbeats of a0, want %d (a0's own is woken and waits again)", k, waiters)
	}
}

// BenchmarkStreamCatchUp measures an event stream catching up: one op opens
// the project feed's stream from ledger_seq 0 over 20k events and reads it
// (page size 500) until the last one; it reports events/s.
func BenchmarkStreamCatchUp(b *testing.B) {
	e := newEnv(b)
	e.register("p", "w", 1)
	admin := kernel.Common{Caller: kernel.Caller{Admin: true}}
	for range 20_000 {
		if _, err := e.engine.Execute(b.Context(), "p", kernel.Heartbeat{Common: admin, AgentID: "w"}); err != nil {
			b.Fatal(err)
		}
	}
	head, _ := e.ledger.Head(b.Context())
	if err := e.store.WaitFor(b.Context(), head); err != nil {
		b.Fatal(err)
	}
	events := 0
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest("GET", e.url+"/v3r1/projects/p/projection/feed?limit=500", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReaderSize(resp.Body, 1<<16)
		last := fmt.Sprintf("id: %d\n", head)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.HasPrefix(line, "id: ") {
				events++
			}
			if line == last {
				break
			}
		}
		resp.Body.Close()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
