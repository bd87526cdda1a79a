package kernel

// credentialSamples has one sample of every event of the credential aggregate, pinned by
// the golden files under testdata/events (golden_test.go).
func credentialSamples() []Event {
	return []Event{
		sample(EvCredentialIssued, AggCredential, "cred_1", &CredentialIssued{CredentialID: "cred_1", AgentID: "worker", TokenHash: sampleHash, ExpiresAt: t0, Via: "issue"}),
		sample(EvCredentialRevoked, AggCredential, "cred_1", &CredentialRevoked{CredentialID: "cred_1", AgentID: "worker"}),
	}
}
