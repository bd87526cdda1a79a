package projection

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/turnledger/turnledger/kernel"
)

const proj = "p1"

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// events builds a ledger by hand: each event gets the next ledger_seq and a
// time one second after the previous one.
type events struct {
	seq  uint64
	at   time.Time
	recs []kernel.Recorded
}

func newEvents() *events { return &events{at: t0} }

// now returns the time of the last event.
func (l *events) now() time.Time { return l.at }

// add appends an event and returns it.
func (l *events) add(typ, project, agg, id string, actor kernel.Actor, data any) kernel.Recorded {
	l.seq++
	l.at = l.at.Add(time.Second)
	r := kernel.Recorded{Seq: l.seq, Event: kernel.Event{
		Type: typ, V: 1, ProjectID: project, Aggregate: agg, ID: id, At: l.at, Actor: actor, Data: data,
	}}
	l.recs = append(l.recs, r)
	return r
}

// since returns the events after ledger_seq after.
func (l *events) since(after uint64) []kernel.Recorded {
	if after >= uint64(len(l.recs)) {
		return nil
	}
	return l.recs[after:]
}

func admin() kernel.Actor            { return kernel.Actor{Kind: "admin"} }
func agent(id string) kernel.Actor   { return kernel.Actor{Kind: "agent", AgentID: id} }
func ref(id string) kernel.AgentRef  { return kernel.AgentRef{ProjectID: proj, AgentID: id} }
func raw(s string) json.RawMessage   { return json.RawMessage(s) }
func tref(id string) *kernel.TurnRef { return &kernel.TurnRef{ProjectID: proj, TurnID: id} }

func (l *events) register(id, role string, capacity int, caps ...string) kernel.Recorded {
	return l.add(kernel.EvAgentRegistered, proj, kernel.AggAgent, id, admin(), &kernel.AgentRegistered{
		Spec: kernel.AgentSpec{
			AgentID: id, Role: role, Description: id + " agent", Enabled: true, AcceptsWork: true,
			Capacity: capacity, Capabilities: caps, Grants: []string{"dispatch"},
			PublicMetadata: raw(`{"team":"x"}`),
		},
		Provenance: kernel.Provenance{Kind: "manual", ExternalRef: "ref-" + id},
	})
}

func (l *events) dispatch(turn, target, requester, kind string) kernel.Recorded {
	return l.add(kernel.EvTurnDispatched, proj, kernel.AggTurn, turn, agent(requester), &kernel.TurnDispatched{
		TargetAgent: ref(target), RequestedBy: ref(requester), Input: raw(`{"q":"` + turn + `"}`),
		TurnKind: kind, DispatchKey: "k-" + turn, BodyHash: "bh",
		Authority:  kernel.Authority{Mode: kernel.AuthorityRoot, RequestID: "r-" + turn},
		RootTurnID: turn,
	})
}

func (l *events) child(turn, parent, root string, depth int, target, requester, kind string) kernel.Recorded {
	return l.add(kernel.EvTurnDispatched, proj, kernel.AggTurn, turn, agent(requester), &kernel.TurnDispatched{
		TargetAgent: ref(target), RequestedBy: ref(requester), Input: raw(`{}`),
		TurnKind: kind, DispatchKey: "k-" + turn, BodyHash: "bh",
		Authority:  kernel.Authority{Mode: kernel.AuthorityChild, ParentTurnID: parent, ParentClaim: "c-" + parent},
		RootTurnID: root, Depth: depth,
	})
}

func (l *events) claim(turn, agentID, claimID string) kernel.Recorded {
	return l.add(kernel.EvTurnClaimed, proj, kernel.AggTurn, turn, agent(agentID), &kernel.TurnClaimed{
		ClaimID: claimID, AgentID: agentID, TokenHash: "SECRET-claim-hash-" + claimID, ExpiresAt: l.at.Add(time.Minute),
	})
}

func (l *events) record(turn, agentID, claimID string, seq uint64, role, payload string) kernel.Recorded {
	return l.add(kernel.EvTurnRecordAppended, proj, kernel.AggTurn, turn, agent(agentID), &kernel.TurnRecordAppended{
		ClaimID: claimID, TurnSeq: seq, Role: role, Payload: raw(payload),
	})
}

func (l *events) finish(turn, agentID, claimID, outcome, final string, seq uint64) kernel.Recorded {
	d := &kernel.TurnFinished{ClaimID: claimID, Outcome: outcome, FinalRecordRole: "final", TurnSeq: seq}
	if final != "" {
		d.FinalPayload = raw(final)
	}
	return l.add(kernel.EvTurnFinished, proj, kernel.AggTurn, turn, agent(agentID), d)
}

func (l *events) turnEvent(typ, turn string, actor kernel.Actor, data any) kernel.Recorded {
	return l.add(typ, proj, kernel.AggTurn, turn, actor, data)
}

func (l *events) issue(agentID, credID string, ttl time.Duration) kernel.Recorded {
	return l.add(kernel.EvCredentialIssued, proj, kernel.AggCredential, credID, admin(), &kernel.CredentialIssued{
		CredentialID: credID, AgentID: agentID, TokenHash: "SECRET-cred-hash-" + credID, ExpiresAt: l.at.Add(time.Second + ttl),
	})
}

// testConfig is the default Config without fsync (tests run many applies).
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.NoSync = true
	return cfg
}

// openStore opens a store in a temp dir and closes it at the end of the test.
func openStore(t testing.TB) (*Store, string) {
	t.Helper()
	return openWith(t, testConfig())
}

// openWith is openStore with cfg.
func openWith(t testing.TB, cfg Config) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "projection.db")
	s, err := Open(path, cfg)
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// applied opens a store and applies every event of l.
func applied(t testing.TB, l *events) *Store {
	t.Helper()
	s, _ := openStore(t)
	mustApply(t, s, l.recs)
	return s
}

func mustApply(t testing.TB, s *Store, batch []kernel.Recorded) {
	t.Helper()
	if err := s.Apply(batch); err != nil {
		t.Fatalf("Apply(%d events) = %v", len(batch), err)
	}
}

func mustDump(t testing.TB, s *Store) map[string]map[string]string {
	t.Helper()
	d, err := s.Dump()
	if err != nil {
		t.Fatalf("Dump() = %v", err)
	}
	return d
}
