package kernel

import "encoding/json"

// agentSamples has one sample of every event of the agent aggregate, pinned by
// the golden files under testdata/events (golden_test.go).
func agentSamples() []Event {
	return []Event{
		sample(EvAgentRegistered, AggAgent, "worker", &AgentRegistered{Spec: sampleSpec(), Provenance: Provenance{Kind: "manual", ExternalRef: "x", PayloadHash: ptr(sampleHash)}}),
		sample(EvAgentDrained, AggAgent, "worker", &AgentDrained{RequestedBy: AgentRef{"p1", "ops"}}),
		sample(EvAgentResumed, AggAgent, "worker", &AgentResumed{RequestedBy: AgentRef{"p1", "ops"}}),
		sample(EvAgentHeartbeat, AggAgent, "worker", &AgentHeartbeat{}),
		sample(EvAgentMetadataSet, AggAgent, "worker", &AgentMetadataReplaced{PublicMetadata: json.RawMessage(`{"team":"b"}`)}),
		sample(EvAgentWorkMemory, AggAgent, "worker", &AgentWorkMemoryReported{ReportID: "rep_1", Manifest: WorkMemoryReport{
			Kind: WorkMemoryKind, RequestID: "r1", Summary: "s", Records: []WorkMemoryRecord{{Role: "note", Payload: json.RawMessage(`{"x":1}`), SourceRefs: []any{"a"}}},
			FinalPayload: json.RawMessage(`null`), DeclaredProjectID: "p1", DeclaredAgentID: "worker"}}),
	}
}
