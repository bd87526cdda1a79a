package kernel

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden event files")

// goldenEvents has one sample of every event type and version. The files
// under testdata/events pin their wire format: a change that breaks it shows
// here and needs a new version.
func goldenEvents() []Event {
	actor := Actor{Kind: ActorAgent, AgentID: "worker"}
	depth := 1
	parent := "trace-0"
	meta := &Meta{Note: "n", Reason: "r", Annotations: json.RawMessage(`{"k":"v"}`)}
	trace := &Trace{TraceID: "trace-1", ParentTraceID: &parent, RecursionDepth: &depth}
	hash := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	sp := AgentSpec{AgentID: "worker", Role: "worker", Description: "d", Enabled: true, AcceptsWork: true, Capacity: 2,
		Capabilities: []string{"summarize"}, Grants: []string{GrantRead}, PublicMetadata: json.RawMessage(`{"team":"a"}`)}
	ev := func(typ, agg, id string, data any) Event {
		return Event{Type: typ, V: 1, ProjectID: "p1", Aggregate: agg, ID: id, At: t0, Actor: actor, Data: data, Meta: meta, Trace: trace}
	}
	return []Event{
		ev(EvAgentRegistered, AggAgent, "worker", &AgentRegistered{Spec: sp, Provenance: Provenance{Kind: "manual", ExternalRef: "x", PayloadHash: &hash}}),
		ev(EvAgentDrained, AggAgent, "worker", &AgentDrained{RequestedBy: AgentRef{"p1", "ops"}}),
		ev(EvAgentResumed, AggAgent, "worker", &AgentResumed{RequestedBy: AgentRef{"p1", "ops"}}),
		ev(EvAgentHeartbeat, AggAgent, "worker", &AgentHeartbeat{}),
		ev(EvAgentMetadataSet, AggAgent, "worker", &AgentMetadataReplaced{PublicMetadata: json.RawMessage(`{"team":"b"}`)}),
		ev(EvAgentWorkMemory, AggAgent, "worker", &AgentWorkMemoryReported{ReportID: "rep_1", Manifest: WorkMemoryReport{
			Kind: WorkMemoryKind, RequestID: "r1", Summary: "s", Records: []WorkMemoryRecord{{Role: "note", Payload: json.RawMessage(`{"x":1}`), SourceRefs: []any{"a"}}},
			FinalPayload: json.RawMessage(`null`), DeclaredProjectID: "p1", DeclaredAgentID: "worker"}}),
		ev(EvCredentialIssued, AggCredential, "cred_1", &CredentialIssued{CredentialID: "cred_1", AgentID: "worker", TokenHash: hash, ExpiresAt: t0, Via: "issue"}),
		ev(EvCredentialRevoked, AggCredential, "cred_1", &CredentialRevoked{CredentialID: "cred_1", AgentID: "worker"}),
		ev(EvInviteCreated, AggInvite, "inv_1", &InviteCreated{InviteID: "inv_1", AgentID: "newbie", ProfileKind: "default", RuntimeKind: "byoa", ExpiresAt: t0, SingleUse: true, CodeHash: hash, Spec: sp}),
		ev(EvInviteRedeemed, AggInvite, "inv_1", &InviteRedeemed{InviteID: "inv_1", AgentID: "newbie", CredentialID: "cred_2", TokenHash: hash, ExpiresAt: t0}),
		ev(EvTurnDispatched, AggTurn, "turn_1", &TurnDispatched{TargetAgent: AgentRef{"p1", "worker"}, RequestedBy: AgentRef{"p1", "req"}, Input: json.RawMessage(`{"q":1}`),
			TurnKind: "summarize", DispatchKey: "k1", BodyHash: hash, Authority: Authority{Mode: AuthorityChild, ParentTurnID: "turn_0", ParentClaim: "clm_0"}, RootTurnID: "turn_0", Depth: 1}),
		ev(EvTurnClaimed, AggTurn, "turn_1", &TurnClaimed{ClaimID: "clm_1", AgentID: "worker", TokenHash: hash, ExpiresAt: t0}),
		ev(EvTurnClaimRenewed, AggTurn, "turn_1", &TurnClaimRenewed{ClaimID: "clm_1", ExpiresAt: t0}),
		ev(EvTurnRecordAppended, AggTurn, "turn_1", &TurnRecordAppended{ClaimID: "clm_1", TurnSeq: 1, Role: "note", Payload: json.RawMessage(`{"x":1}`)}),
		ev(EvTurnSuspended, AggTurn, "turn_1", &TurnSuspended{ClaimID: "clm_1"}),
		ev(EvTurnResumed, AggTurn, "turn_1", &TurnResumed{RequestedBy: AgentRef{"p1", "req"}}),
		ev(EvTurnFinished, AggTurn, "turn_1", &TurnFinished{ClaimID: "clm_1", Outcome: "succeeded", FinalPayload: json.RawMessage(`{"ok":true}`), FinalRecordRole: "final", TurnSeq: 2}),
		ev(EvTurnStopRequested, AggTurn, "turn_1", &TurnStopRequested{RequestedBy: AgentRef{"p1", "req"}}),
		ev(EvTurnStopped, AggTurn, "turn_1", &TurnStopped{RequestedBy: AgentRef{"p1", "req"}}),
		ev(EvTurnClaimExpired, AggTurn, "turn_1", &TurnClaimExpired{ClaimID: "clm_1", Stopped: true}),
	}
}

func TestGoldenEvents(t *testing.T) {
	events := goldenEvents()
	if len(events) != len(codec) {
		t.Fatalf("%d golden events for %d codec entries: add the missing samples", len(events), len(codec))
	}
	for _, want := range events {
		checkGolden(t, filepath.Join("testdata", "events", want.Type+".v1.json"), want)
	}
}

// TestGoldenEventsWithRegistration pins the registration that a bootstrap's
// credential.issued and a join's invite.redeemed carry (an optional field of
// v1: the files without it above still decode).
func TestGoldenEventsWithRegistration(t *testing.T) {
	reg := &AgentRegistered{Spec: AgentSpec{AgentID: "newbie", Role: DefaultRole, Enabled: true, AcceptsWork: true, Capacity: 1,
		Capabilities: []string{}, Grants: []string{}, PublicMetadata: json.RawMessage(`{}`)}, Provenance: Provenance{Kind: ProvenanceJoinInvite, ExternalRef: "inv_1"}}
	hash := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for _, want := range []Event{
		{Type: EvCredentialIssued, V: 1, ProjectID: "p1", Aggregate: AggCredential, ID: "cred_1", At: t0, Actor: Actor{Kind: ActorAdmin},
			Data: &CredentialIssued{CredentialID: "cred_1", AgentID: "newbie", TokenHash: hash, ExpiresAt: t0, Via: ViaBootstrap, Registration: reg}},
		{Type: EvInviteRedeemed, V: 1, ProjectID: "p1", Aggregate: AggInvite, ID: "inv_1", At: t0, Actor: Actor{Kind: ActorAgent, AgentID: "newbie"},
			Data: &InviteRedeemed{InviteID: "inv_1", AgentID: "newbie", CredentialID: "cred_2", TokenHash: hash, ExpiresAt: t0, Registration: reg}},
	} {
		checkGolden(t, filepath.Join("testdata", "events", want.Type+".v1.with-registration.json"), want)
	}
}

func checkGolden(t *testing.T, path string, want Event) {
	t.Helper()
	if *update {
		b, err := MarshalEvent(want)
		if err != nil {
			t.Fatal(err)
		}
		var pretty any
		json.Unmarshal(b, &pretty)
		out, _ := json.MarshalIndent(pretty, "", "  ")
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file: %v (run go test ./kernel -run TestGoldenEvents -update)", err)
	}
	got, err := UnmarshalEvent(b)
	if err != nil {
		t.Fatalf("UnmarshalEvent(%s) = %v", path, err)
	}
	if diff := cmp.Diff(want, got, cmp.Transformer("raw", func(r json.RawMessage) string {
		var v any
		json.Unmarshal(r, &v)
		b, _ := json.Marshal(v)
		return string(b)
	})); diff != "" {
		t.Errorf("%s decodes differently (-want +got):\n%s", path, diff)
	}
}
