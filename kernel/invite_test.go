package kernel

// inviteSamples has one sample of every event of the invite aggregate, pinned by
// the golden files under testdata/events (golden_test.go).
func inviteSamples() []Event {
	return []Event{
		sample(EvInviteCreated, AggInvite, "inv_1", &InviteCreated{InviteID: "inv_1", AgentID: "newbie", ProfileKind: "default", RuntimeKind: "byoa", ExpiresAt: t0, SingleUse: true, CodeHash: sampleHash, Spec: sampleSpec()}),
		sample(EvInviteRedeemed, AggInvite, "inv_1", &InviteRedeemed{InviteID: "inv_1", AgentID: "newbie", CredentialID: "cred_2", TokenHash: sampleHash, ExpiresAt: t0}),
	}
}
