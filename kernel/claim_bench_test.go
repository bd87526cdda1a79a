package kernel

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// claimBench is a project with one agent and n queued Turns, folded as the
// engine folds them, to measure what one claim costs.
type claimBench struct {
	p    *Project
	c    Common
	now  time.Time
	seq  uint64
	fold func(Event)
}

func newClaimBench(b *testing.B) *claimBench {
	cb := &claimBench{p: NewProject("p1"), now: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}
	cb.fold = func(e Event) {
		cb.seq++
		Evolve(cb.p, Recorded{Seq: cb.seq, Event: e})
	}
	adm := Common{Caller: Caller{Admin: true}}
	cb.do(b, RegisterAgent{Common: adm, Spec: AgentSpec{AgentID: "w", Role: "worker", Enabled: true, AcceptsWork: true, Capacity: 1,
		Capabilities: []string{}, Grants: []string{GrantDispatch}, PublicMetadata: json.RawMessage(`{}`)}, Provenance: Provenance{Kind: "bench"}})
	cb.do(b, IssueCredential{Common: adm, AgentID: "w", CredentialID: "cred_w", TokenHash: HashSecret("t"), ExpiresAt: cb.now.Add(24 * time.Hour)})
	caller, err := Authenticate(cb.p, "w", HashSecret("t"), cb.now)
	if err != nil {
		b.Fatal(err)
	}
	cb.c = Common{Caller: caller}
	return cb
}

func (cb *claimBench) do(b *testing.B, cmd Command) []Event {
	events, err := Decide(cb.p, cmd, cb.now)
	if err != nil {
		b.Fatalf("Decide(%T) = %v", cmd, err)
	}
	for _, e := range events {
		cb.fold(e)
	}
	return events
}

func (cb *claimBench) dispatch(b *testing.B, i int, change func(*Dispatch)) {
	d := Dispatch{Common: cb.c, TurnID: fmt.Sprintf("turn_%08d", i), RequestedBy: AgentRef{"p1", "w"}, TargetAgent: AgentRef{"p1", "w"},
		Input: json.RawMessage(`{}`), TurnKind: "k", DispatchKey: fmt.Sprintf("k%d", i), Mode: AuthorityRoot, RequestID: "r"}
	if change != nil {
		change(&d)
	}
	cb.do(b, d)
}

// claims measures a claim of the agent's next Turn, then puts the Turn back
// in its place by its claim's expiry, so the queue keeps its size.
func (cb *claimBench) claims(b *testing.B) {
	b.ResetTimer()
	for i := range b.N {
		ev := cb.do(b, ClaimNext{Common: cb.c, AgentID: "w", ClaimID: fmt.Sprintf("clm_%d", i), TokenHash: "h", ExpiresAt: cb.now.Add(time.Minute)})
		if len(ev) != 1 {
			b.Fatalf("claim %d found nothing", i)
		}
		cb.fold(Event{Type: EvTurnClaimExpired, V: 1, ProjectID: "p1", Aggregate: AggTurn, ID: ev[0].ID, At: cb.now,
			Data: &TurnClaimExpired{ClaimID: fmt.Sprintf("clm_%d", i)}})
	}
}

// BenchmarkClaimFIFO: a claim among 100k queued Turns of one priority, all
// due. The baseline of BenchmarkClaimScheduled.
//
//	go test ./kernel -run '^$' -bench 'Claim(FIFO|Scheduled)' -benchtime 20000x
func BenchmarkClaimFIFO(b *testing.B) {
	cb := newClaimBench(b)
	for i := range 100_000 {
		cb.dispatch(b, i, nil)
	}
	cb.claims(b)
}
