package projection

import (
	"slices"

	"github.com/turnledger/turnledger/kernel"
)

// foldAgent applies an agent event.
func (f *folder) foldAgent(r kernel.Recorded) error {
	e := r.Event
	p, id := e.ProjectID, e.ID
	ak := key(p, id)
	var rec agentRecord
	found, err := getJSON(f.tx.Bucket(bktAgents), ak, &rec)
	if err != nil {
		return err
	}
	if e.Type == kernel.EvAgentRegistered {
		d, err := dataAs[kernel.AgentRegistered](e)
		if err != nil {
			return err
		}
		return f.register(r, d)
	} else {
		if !found {
			return nil // an event of an unregistered agent: feeds only
		}
		switch e.Type {
		case kernel.EvAgentDrained:
			rec.Drained = true
		case kernel.EvAgentResumed:
			rec.Drained = false
		case kernel.EvAgentMetadataSet:
			d, err := dataAs[kernel.AgentMetadataReplaced](e)
			if err != nil {
				return err
			}
			rec.PublicMetadata = d.PublicMetadata
		case kernel.EvAgentHeartbeat:
			if err := f.see(p, id, e.At); err != nil {
				return err
			}
			rec.LedgerSeq = r.Seq
			return putJSON(f.tx.Bucket(bktAgents), ak, rec)
		default:
			// Work-memory reports and other agent events: they change
			// nothing but the agent's ledger_seq.
			rec.LedgerSeq = r.Seq
			return putJSON(f.tx.Bucket(bktAgents), ak, rec)
		}
	}
	rec.UpdatedAt = e.At
	rec.LedgerSeq = r.Seq
	return putJSON(f.tx.Bucket(bktAgents), ak, rec)
}

// register applies a registration, whether an agent.registered event or one
// carried by a bootstrap's credential.issued or an invite.redeemed.
func (f *folder) register(r kernel.Recorded, d kernel.AgentRegistered) error {
	e := r.Event
	p, id := e.ProjectID, d.Spec.AgentID
	ak := key(p, id)
	var rec agentRecord
	found, err := getJSON(f.tx.Bucket(bktAgents), ak, &rec)
	if err != nil {
		return err
	}
	oldCaps := rec.Capabilities
	s := d.Spec
	if !found {
		rec = agentRecord{ProjectID: p, AgentID: id, RegisteredAt: e.At}
	}
	rec.Role, rec.Description = s.Role, s.Description
	rec.Enabled, rec.AcceptsWork, rec.Capacity = s.Enabled, s.AcceptsWork, s.Capacity
	rec.Capabilities = dedupe(s.Capabilities)
	rec.Grants = dedupe(s.Grants)
	rec.PublicMetadata = s.PublicMetadata
	rec.Provenance = ProvenanceView{Kind: d.Provenance.Kind, ExternalRef: d.Provenance.ExternalRef, PayloadHash: d.Provenance.PayloadHash}
	for _, c := range oldCaps {
		if !slices.Contains(rec.Capabilities, c) {
			if err := f.tx.Bucket(bktOffers).Delete(key(p, c, id)); err != nil {
				return err
			}
		}
	}
	for _, c := range rec.Capabilities {
		if err := f.tx.Bucket(bktOffers).Put(key(p, c, id), nil); err != nil {
			return err
		}
	}
	rec.UpdatedAt = e.At
	rec.LedgerSeq = r.Seq
	return putJSON(f.tx.Bucket(bktAgents), ak, rec)
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

// foldCredential applies a credential or invite event. Both are in the feed
// of the agent they name; a redeemed invite issues a credential.
func (f *folder) foldCredential(r kernel.Recorded) error {
	e := r.Event
	p := e.ProjectID
	var agent string
	var issue *credRecord
	var revoke string
	switch e.Type {
	case kernel.EvCredentialIssued:
		d, err := dataAs[kernel.CredentialIssued](e)
		if err != nil {
			return err
		}
		agent = d.AgentID
		via := d.Via
		if via == "" {
			via = kernel.ViaIssue
		}
		issue = &credRecord{CredentialID: d.CredentialID, AgentID: d.AgentID, ExpiresAt: d.ExpiresAt, Via: via}
		if d.Registration != nil {
			if err := f.register(r, *d.Registration); err != nil {
				return err
			}
		}
	case kernel.EvCredentialRevoked:
		d, err := dataAs[kernel.CredentialRevoked](e)
		if err != nil {
			return err
		}
		agent, revoke = d.AgentID, d.CredentialID
	case kernel.EvInviteCreated:
		d, err := dataAs[kernel.InviteCreated](e)
		if err != nil {
			return err
		}
		agent = d.AgentID
	case kernel.EvInviteRedeemed:
		d, err := dataAs[kernel.InviteRedeemed](e)
		if err != nil {
			return err
		}
		agent = d.AgentID
		issue = &credRecord{CredentialID: d.CredentialID, AgentID: d.AgentID, ExpiresAt: d.ExpiresAt, Via: kernel.ViaJoin}
		if d.Registration != nil {
			if err := f.register(r, *d.Registration); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	if agent == "" {
		return nil
	}
	if err := f.tx.Bucket(bktAgentFeed).Put(seqKey(r.Seq, p, agent), nil); err != nil {
		return err
	}
	switch {
	case issue != nil && issue.CredentialID != "":
		issue.ProjectID, issue.IssuedAt, issue.IssuedSeq = p, e.At, r.Seq
		return putJSON(f.tx.Bucket(bktCreds), key(p, agent, issue.CredentialID), issue)
	case revoke != "":
		ck := key(p, agent, revoke)
		var c credRecord
		found, err := getJSON(f.tx.Bucket(bktCreds), ck, &c)
		if err != nil || !found || c.RevokedAt != nil {
			return err
		}
		c.RevokedAt = ptr(e.At)
		return putJSON(f.tx.Bucket(bktCreds), ck, c)
	}
	return nil
}
