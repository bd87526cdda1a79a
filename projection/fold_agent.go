package projection

import (
	"slices"
	"time"

	"github.com/turnledger/turnledger/kernel"
)

// foldAgent applies an event to the agent it changes (kernel.AgentOf: an
// agent event, or a registration carried by a bootstrap's credential.issued
// or an invite.redeemed). The state is folded by the kernel's own
// kernel.EvolveAgent; this fold adds only the offers index (one key per
// capability) and the presence index.
func (f *folder) foldAgent(r kernel.Recorded) error {
	e := r.Event
	id, ok := kernel.AgentOf(e)
	if !ok {
		return nil
	}
	p := e.ProjectID
	ak := key(p, id)
	var rec kernel.Agent
	found, err := getJSON(f.tx.Bucket(bktAgents), ak, &rec)
	if err != nil {
		return err
	}
	var old *kernel.Agent
	var oldCaps []string
	if found {
		old, oldCaps = &rec, slices.Clone(rec.Spec.Capabilities)
	}
	a := kernel.EvolveAgent(old, r)
	if a == nil {
		return nil // an event of an unregistered agent: feeds only
	}
	if e.Type == kernel.EvAgentHeartbeat {
		if err := f.see(p, id, e.At); err != nil {
			return err
		}
	}
	for _, c := range oldCaps {
		if !slices.Contains(a.Spec.Capabilities, c) {
			if err := f.tx.Bucket(bktOffers).Delete(key(p, c, id)); err != nil {
				return err
			}
		}
	}
	for _, c := range a.Spec.Capabilities {
		if !slices.Contains(oldCaps, c) {
			if err := f.tx.Bucket(bktOffers).Put(key(p, c, id), nil); err != nil {
				return err
			}
		}
	}
	return putJSON(f.tx.Bucket(bktAgents), ak, a)
}

// foldCredential applies a credential or invite event: both are in the feed
// of the agent they name, and the credential's state is folded by
// kernel.EvolveCredential (its token hash removed).
func (f *folder) foldCredential(r kernel.Recorded) error {
	e := r.Event
	p := e.ProjectID
	var agent string
	switch d := e.Data.(type) {
	case *kernel.CredentialIssued:
		agent = d.AgentID
	case *kernel.CredentialRevoked:
		agent = d.AgentID
	case *kernel.InviteCreated:
		agent = d.AgentID
	case *kernel.InviteRedeemed:
		agent = d.AgentID
	}
	if agent == "" {
		return nil
	}
	if err := f.put(wAgentFeed, seqKey(r.Seq, p, agent), nil); err != nil {
		return err
	}
	id, ok := kernel.CredentialOf(e)
	if !ok {
		return nil
	}
	ck := key(p, agent, id)
	var rec kernel.Credential
	found, err := getJSON(f.tx.Bucket(bktCreds), ck, &rec)
	if err != nil {
		return err
	}
	var old *kernel.Credential
	if found {
		old = &rec
	}
	c := kernel.EvolveCredential(old, r)
	if c == nil {
		return nil
	}
	c.TokenHash = "" // readers never need it
	return putJSON(f.tx.Bucket(bktCreds), ck, c)
}

// view is the public view of an agent's kernel state, with its claims
// and presence from the indexes.
func (r agentReader) view(project string, a *kernel.Agent) AgentView {
	s := a.Spec
	v := AgentView{
		ProjectID: project, AgentID: s.AgentID, Role: s.Role, Description: s.Description,
		Enabled: s.Enabled, AcceptsWork: s.AcceptsWork, Drained: a.Drained, Admitting: a.Admitting(),
		Capacity: s.Capacity, Capabilities: dedupe(s.Capabilities), Grants: dedupe(s.Grants),
		PublicMetadata: s.PublicMetadata,
		Provenance:     a.Provenance,
		RegisteredAt:   a.RegisteredAt, UpdatedAt: a.UpdatedAt, LedgerSeq: a.Seq,
		Presence: PresenceNever,
	}
	if kernel.IsNull(v.PublicMetadata) {
		v.PublicMetadata = []byte("{}")
	}
	if s.ClaimTTLS > 0 {
		v.ClaimTTLS = &s.ClaimTTLS
	}
	v.ActiveClaims = int(getU64(r.claims.Get(key(project, s.AgentID))))
	v.FreeCapacity = max(0, v.Capacity-v.ActiveClaims)
	if b := r.seen.Get(key(project, s.AgentID)); b != nil {
		t := time.Unix(0, int64(getU64(b))).UTC()
		v.LastSeenAt = &t
		v.Presence = PresenceOffline
		if r.now.Sub(t) < r.window {
			v.Presence = PresenceOnline
		}
	}
	return v
}

// credentialView is the public view of a credential's kernel state at now.
func credentialView(project string, c *kernel.Credential, now time.Time) CredentialView {
	status := CredentialActive
	switch {
	case c.Revoked:
		status = CredentialRevoked
	case !c.Active(now):
		status = CredentialExpired
	}
	return CredentialView{CredentialID: c.ID, ProjectID: project, AgentID: c.AgentID, Status: status,
		IssuedAt: c.IssuedAt, ExpiresAt: c.ExpiresAt, RevokedAt: c.RevokedAt, Via: c.Via}
}

// dedupe returns s without repeats, in first-seen order, never nil.
func dedupe(s []string) []string {
	out := make([]string, 0, len(s))
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
