package kernel

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkIdempotencyMemory measures what the write model keeps per keyed
// command during the retention: records appended under a claim, each with
// a key, folded as the engine folds them.
//
//	go test ./kernel -run '^$' -bench IdempotencyMemory -benchtime 1x
func BenchmarkIdempotencyMemory(b *testing.B) {
	const n = 100_000
	at := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	for b.Loop() {
		p := NewProject("p1")
		Evolve(p, Recorded{Seq: 1, Event: Event{Type: EvTurnDispatched, V: 1, ProjectID: "p1", Aggregate: AggTurn, ID: "turn_0123456789abcdef0123456789abcdef", At: at,
			Data: &TurnDispatched{TargetAgent: AgentRef{ProjectID: "p1", AgentID: "w"}}}})
		Evolve(p, Recorded{Seq: 2, Event: Event{Type: EvTurnClaimed, V: 1, ProjectID: "p1", Aggregate: AggTurn, ID: "turn_0123456789abcdef0123456789abcdef", At: at,
			Data: &TurnClaimed{ClaimID: "clm_0123456789abcdef0123456789abcdef", AgentID: "w", TokenHash: HashSecret("t"), ExpiresAt: at.Add(time.Minute)}}})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range n {
			Evolve(p, Recorded{Seq: uint64(3 + i), Event: Event{Type: EvTurnRecordAppended, V: 1, ProjectID: "p1", Aggregate: AggTurn, ID: "turn_0123456789abcdef0123456789abcdef", At: at,
				Data: &TurnRecordAppended{TurnSeq: uint64(i + 1)},
				Idem: &Idempotency{Ref: HashSecret(fmt.Sprint("ref", i)), Request: HashSecret(fmt.Sprint("body", i))}}})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/key")
		runtime.KeepAlive(p)
	}
}
