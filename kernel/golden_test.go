package kernel

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden event files")

// goldenEvents has one sample of every event type and version. The files
// under testdata/events pin their wire format: a change that breaks it shows
// here and needs a new version.
func goldenEvents() []Event {
	return slices.Concat(agentSamples(), credentialSamples(), inviteSamples(), turnSamples())
}

// sample makes the sample event of a golden file: every envelope field set.
func sample(typ, agg, id string, data any) Event {
	depth := 1
	parent := "trace-0"
	meta := &Meta{Note: "n", Reason: "r", Annotations: json.RawMessage(`{"k":"v"}`)}
	trace := &Trace{TraceID: "trace-1", ParentTraceID: &parent, RecursionDepth: &depth}
	return Event{Type: typ, V: 1, ProjectID: "p1", Aggregate: agg, ID: id, At: t0, Actor: Actor{Kind: ActorAgent, AgentID: "worker"}, Data: data, Meta: meta, Trace: trace}
}

// sampleHash and sampleSpec are the hash and agent spec the samples share.
const sampleHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func sampleSpec() AgentSpec {
	return AgentSpec{AgentID: "worker", Role: "worker", Description: "d", Enabled: true, AcceptsWork: true, Capacity: 2,
		Capabilities: []string{"summarize"}, Grants: []string{GrantRead}, PublicMetadata: json.RawMessage(`{"team":"a"}`)}
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
