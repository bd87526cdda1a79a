package kernel

import (
	"crypto/subtle"
	"time"
)

// Outcomes a claim holder may finish a Turn with.
var Outcomes = []string{"succeeded", "failed", OutcomeStopped}

// Decide is the one place where the rules of the domain live: given the
// project's state, a command and the time, it returns the events the command
// causes (at most one; none when the command changes nothing, such as a
// repeated idempotent dispatch or a claim with nothing to claim) or an *Error.
// It never reads the clock, draws ids, logs or does I/O, and never changes p
// (a zero Project is read as an empty one).
func Decide(p *Project, cmd Command, now time.Time) ([]Event, error) {
	if p.Agents == nil {
		p = NewProject(p.ID)
	}
	c := cmd.common()
	if err := validateCommon(c); err != nil {
		return nil, err
	}
	d := decider{p: p, now: now.UTC(), c: c}
	var ev *Event
	var err error
	switch cmd := cmd.(type) {
	case RegisterAgent:
		ev, err = d.register(cmd)
	case IssueCredential:
		ev, err = d.issueCredential(cmd)
	case Bootstrap:
		ev, err = d.bootstrap(cmd)
	case RevokeCredential:
		ev, err = d.revokeCredential(cmd)
	case SetAgentAdmission:
		ev, err = d.setAdmission(cmd)
	case Heartbeat:
		ev, err = d.heartbeat(cmd)
	case ReplaceMetadata:
		ev, err = d.replaceMetadata(cmd)
	case ReportWorkMemory:
		ev, err = d.reportWorkMemory(cmd)
	case CreateInvite:
		ev, err = d.createInvite(cmd)
	case RedeemInvite:
		ev, err = d.redeemInvite(cmd)
	case Dispatch:
		ev, err = d.dispatch(cmd)
	case ClaimNext:
		ev, err = d.claimNext(cmd)
	case Renew:
		ev, err = d.renew(cmd)
	case AppendRecord:
		ev, err = d.appendRecord(cmd)
	case Suspend:
		ev, err = d.suspend(cmd)
	case Finish:
		ev, err = d.finish(cmd)
	case Stop:
		ev, err = d.stop(cmd)
	case Resume:
		ev, err = d.resume(cmd)
	case ExpireClaim:
		ev, err = d.expireClaim(cmd)
	default:
		return nil, Errorf(Internal, "unknown command %T", cmd)
	}
	if err != nil || ev == nil {
		return nil, err
	}
	return []Event{*ev}, nil
}

type decider struct {
	p   *Project
	now time.Time
	c   Common
}

// event builds an event of the project with the command's actor, meta and trace.
func (d decider) event(typ, aggregate, id string, data any) *Event {
	return &Event{
		Type: typ, V: 1, ProjectID: d.p.ID, Aggregate: aggregate, ID: id,
		At: d.now, Actor: d.c.Caller.Actor(), Data: data, Meta: d.c.Meta, Trace: d.c.Trace,
	}
}

func (d decider) agent(id string) (*Agent, error) {
	if !ValidID(id) {
		return nil, invalid("agent id %q must be 1 to 128 letters, digits, '_' or '-'", id)
	}
	a := d.p.Agents[id]
	if a == nil {
		return nil, Errorf(NotFound, "agent %s not found in project %s", id, d.p.ID)
	}
	return a, nil
}

func (d decider) turn(id string) (*Turn, error) {
	if !ValidID(id) {
		return nil, invalid("turn id %q must be 1 to 128 letters, digits, '_' or '-'", id)
	}
	t := d.p.Turn(id)
	if t == nil {
		return nil, Errorf(NotFound, "turn %s not found in project %s", id, d.p.ID)
	}
	return t, nil
}

// sameProject enforces that every project_id a body names is the path's.
func (d decider) sameProject(field, project string) error {
	if project == "" {
		return invalid("%s.project_id is required", field)
	}
	if project != d.p.ID {
		return Errorf(Forbidden, "%s.project_id %q does not match project %s of the path", field, project, d.p.ID)
	}
	return nil
}

// bodyAgent checks the agent a body names against the agent of the path. A
// missing reference (nil) is allowed where the body may omit it.
func (d decider) bodyAgent(ref *AgentRef, agentID string) error {
	if ref == nil {
		return nil
	}
	if err := d.sameProject("agent", ref.ProjectID); err != nil {
		return err
	}
	if ref.AgentID != agentID {
		return invalid("agent.agent_id %q does not match agent %s of the path", ref.AgentID, agentID)
	}
	return nil
}

// actingAs checks a requested_by reference: in this project, an existing
// agent, and the caller itself unless the caller is the admin.
func (d decider) actingAs(ref AgentRef) error {
	if err := d.sameProject("requested_by", ref.ProjectID); err != nil {
		return err
	}
	if _, err := d.agent(ref.AgentID); err != nil {
		return err
	}
	if !d.c.Caller.Admin && ref.AgentID != d.c.Caller.AgentID {
		return Errorf(Forbidden, "requested_by names agent %s but the caller is %s", ref.AgentID, d.c.Caller.AgentID)
	}
	return nil
}

// fence checks a claim token against the Turn's live claim. A stale, expired,
// foreign or forged token is a FencingError.
func (d decider) fence(turnID string, tok ClaimToken, hash string) (*Turn, error) {
	if _, err := d.p.check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	if err := d.sameProject("claim", tok.ProjectID); err != nil {
		return nil, err
	}
	if tok.TurnID != turnID {
		return nil, Errorf(Fencing, "the claim token is for turn %s, not %s", tok.TurnID, turnID)
	}
	t, err := d.turn(turnID)
	if err != nil {
		return nil, err
	}
	cl := t.Claim
	if cl == nil || t.State != StateClaimed {
		return nil, Errorf(Fencing, "turn %s has no live claim (state %s)", turnID, t.State)
	}
	if cl.AgentID != tok.AgentID || subtle.ConstantTimeCompare([]byte(cl.TokenHash), []byte(hash)) != 1 {
		return nil, Errorf(Fencing, "the claim token does not hold the current claim of turn %s", turnID)
	}
	if !d.now.Before(cl.ExpiresAt) {
		return nil, Errorf(Fencing, "the claim of turn %s expired at %s", turnID, cl.ExpiresAt.Format(time.RFC3339))
	}
	if !d.c.Caller.Admin && d.c.Caller.AgentID != cl.AgentID {
		return nil, Errorf(Fencing, "the claim of turn %s is held by agent %s, not %s", turnID, cl.AgentID, d.c.Caller.AgentID)
	}
	return t, nil
}

func (d decider) register(cmd RegisterAgent) (*Event, error) {
	if err := d.p.require(d.c.Caller, d.now, GrantRegister); err != nil {
		return nil, err
	}
	if err := validateSpec(cmd.Spec); err != nil {
		return nil, err
	}
	if err := textField("provenance.kind", cmd.Provenance.Kind, 128, true); err != nil {
		return nil, err
	}
	if err := textField("provenance.external_ref", cmd.Provenance.ExternalRef, MaxTextLen, false); err != nil {
		return nil, err
	}
	return d.event(EvAgentRegistered, AggAgent, cmd.Spec.AgentID, &AgentRegistered{Spec: cmd.Spec, Provenance: cmd.Provenance}), nil
}

func (d decider) issueCredential(cmd IssueCredential) (*Event, error) {
	if err := d.p.require(d.c.Caller, d.now, GrantCredentialIssue); err != nil {
		return nil, err
	}
	if _, err := d.agent(cmd.AgentID); err != nil {
		return nil, err
	}
	if !cmd.ExpiresAt.After(d.now) {
		return nil, invalid("a credential must expire after it is issued")
	}
	return d.event(EvCredentialIssued, AggCredential, cmd.CredentialID, &CredentialIssued{
		CredentialID: cmd.CredentialID, AgentID: cmd.AgentID, TokenHash: cmd.TokenHash, ExpiresAt: cmd.ExpiresAt.UTC(), Via: ViaIssue,
	}), nil
}

func (d decider) revokeCredential(cmd RevokeCredential) (*Event, error) {
	if err := d.p.requireSelfOr(d.c.Caller, d.now, cmd.AgentID, GrantCredentialAdmin); err != nil {
		return nil, err
	}
	if _, err := d.agent(cmd.AgentID); err != nil {
		return nil, err
	}
	cred := d.p.Credentials[cmd.CredentialID]
	if cred == nil || cred.AgentID != cmd.AgentID {
		return nil, Errorf(NotFound, "credential %s of agent %s not found", cmd.CredentialID, cmd.AgentID)
	}
	if cred.Revoked {
		return nil, nil
	}
	return d.event(EvCredentialRevoked, AggCredential, cred.ID, &CredentialRevoked{CredentialID: cred.ID, AgentID: cred.AgentID}), nil
}

func (d decider) setAdmission(cmd SetAgentAdmission) (*Event, error) {
	if err := d.p.require(d.c.Caller, d.now, GrantManage); err != nil {
		return nil, err
	}
	a, err := d.agent(cmd.AgentID)
	if err != nil {
		return nil, err
	}
	if err := d.bodyAgent(cmd.Agent, cmd.AgentID); err != nil {
		return nil, err
	}
	if err := d.actingAs(cmd.RequestedBy); err != nil {
		return nil, err
	}
	if a.Drained == cmd.Drain {
		return nil, nil
	}
	if cmd.Drain {
		return d.event(EvAgentDrained, AggAgent, cmd.AgentID, &AgentDrained{RequestedBy: cmd.RequestedBy}), nil
	}
	return d.event(EvAgentResumed, AggAgent, cmd.AgentID, &AgentResumed{RequestedBy: cmd.RequestedBy}), nil
}

func (d decider) heartbeat(cmd Heartbeat) (*Event, error) {
	if err := d.p.requireSelfOr(d.c.Caller, d.now, cmd.AgentID, GrantManage); err != nil {
		return nil, err
	}
	if _, err := d.agent(cmd.AgentID); err != nil {
		return nil, err
	}
	if err := d.bodyAgent(cmd.Agent, cmd.AgentID); err != nil {
		return nil, err
	}
	return d.event(EvAgentHeartbeat, AggAgent, cmd.AgentID, &AgentHeartbeat{}), nil
}

func (d decider) replaceMetadata(cmd ReplaceMetadata) (*Event, error) {
	if err := d.p.requireSelfOr(d.c.Caller, d.now, cmd.AgentID, GrantManage); err != nil {
		return nil, err
	}
	if _, err := d.agent(cmd.AgentID); err != nil {
		return nil, err
	}
	if err := objectField("public_metadata", cmd.Metadata, MaxMetadataBytes); err != nil {
		return nil, err
	}
	return d.event(EvAgentMetadataSet, AggAgent, cmd.AgentID, &AgentMetadataReplaced{PublicMetadata: cmd.Metadata}), nil
}

func (d decider) reportWorkMemory(cmd ReportWorkMemory) (*Event, error) {
	if _, err := d.p.check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	if d.c.Caller.Admin || d.c.Caller.AgentID != cmd.AgentID {
		return nil, Errorf(Forbidden, "a work-memory report is submitted by the agent itself")
	}
	if _, err := d.agent(cmd.AgentID); err != nil {
		return nil, err
	}
	if err := checkReport(cmd.Report, d.p.ID, cmd.AgentID); err != nil {
		return nil, err
	}
	return d.event(EvAgentWorkMemory, AggAgent, cmd.AgentID, &AgentWorkMemoryReported{ReportID: cmd.ReportID, Manifest: cmd.Report}), nil
}

func (d decider) createInvite(cmd CreateInvite) (*Event, error) {
	if !d.c.Caller.Admin {
		return nil, Errorf(Forbidden, "join invites are created by the admin")
	}
	inv := cmd.Invite
	if !ValidID(inv.AgentID) {
		return nil, invalid("agent_id must be 1 to 128 letters, digits, '_' or '-'")
	}
	if !ValidName(inv.ProfileKind) || !ValidName(inv.RuntimeKind) {
		return nil, invalid("profile_kind and runtime_kind must be names of 1 to 128 characters without spaces")
	}
	if !inv.ExpiresAt.After(d.now) {
		return nil, invalid("an invite must expire after it is created")
	}
	if _, ok := d.p.Agents[inv.AgentID]; !ok {
		inv.Spec.AgentID = inv.AgentID
		if err := validateSpec(inv.Spec); err != nil {
			return nil, err
		}
	}
	return d.event(EvInviteCreated, AggInvite, inv.InviteID, &inv), nil
}

func (d decider) redeemInvite(cmd RedeemInvite) (*Event, error) {
	id, ok := d.p.InviteCodes[cmd.CodeHash]
	if !ok {
		return nil, Errorf(Unauthorized, "invalid join code")
	}
	inv := d.p.Invites[id]
	if !d.now.Before(inv.Data.ExpiresAt) {
		return nil, Errorf(Unauthorized, "the join code expired at %s", inv.Data.ExpiresAt.Format(time.RFC3339))
	}
	if inv.Data.SingleUse && inv.Redeemed > 0 {
		return nil, Errorf(Conflict, "the join invite %s has already been redeemed", id)
	}
	// Whoever holds the code acts as the invited agent: the event's actor.
	d.c.Caller = Caller{AgentID: inv.Data.AgentID}
	data := &InviteRedeemed{
		InviteID: id, AgentID: inv.Data.AgentID, CredentialID: cmd.CredentialID, TokenHash: cmd.TokenHash, ExpiresAt: cmd.ExpiresAt.UTC(),
	}
	if d.p.Agents[inv.Data.AgentID] == nil {
		// A new agent is registered by the same event, so the redemption
		// is all or nothing.
		spec := inv.Data.Spec
		spec.AgentID = inv.Data.AgentID
		if err := validateSpec(spec); err != nil {
			return nil, err
		}
		data.Registration = &AgentRegistered{Spec: spec, Provenance: Provenance{Kind: ProvenanceJoinInvite, ExternalRef: id}}
	}
	return d.event(EvInviteRedeemed, AggInvite, id, data), nil
}

func (d decider) dispatch(cmd Dispatch) (*Event, error) {
	if err := d.sameProject("requested_by", cmd.RequestedBy.ProjectID); err != nil {
		return nil, err
	}
	if err := d.sameProject("target_agent", cmd.TargetAgent.ProjectID); err != nil {
		return nil, err
	}
	if !ValidName(cmd.TurnKind) {
		return nil, invalid("turn_kind must be a name of 1 to 128 characters without spaces")
	}
	if !keyPattern.MatchString(cmd.DispatchKey) {
		return nil, invalid("dispatch_key must be 1 to 200 printable characters without spaces")
	}
	if err := objectField("input", cmd.Input, MaxPayloadBytes); err != nil {
		return nil, err
	}
	if _, err := d.p.check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	// Who may dispatch is checked before the idempotency look-up, so that a
	// repeated key never shows a Turn to a caller who could not have made it.
	if err := d.actingAs(cmd.RequestedBy); err != nil {
		return nil, err
	}
	if cmd.Mode == AuthorityRoot {
		if err := d.p.require(d.c.Caller, d.now, GrantDispatch); err != nil {
			return nil, err
		}
	}
	if id, ok := d.p.DispatchKeys[DispatchKeyOf(cmd.RequestedBy.AgentID, cmd.DispatchKey)]; ok {
		if d.p.Turn(id).Dispatch.BodyHash == cmd.BodyHash {
			return nil, nil // the same dispatch again: the same Turn
		}
		return nil, Errorf(Conflict, "dispatch_key %q was used for turn %s with a different body", cmd.DispatchKey, id)
	}
	data := &TurnDispatched{
		TargetAgent: cmd.TargetAgent, RequestedBy: cmd.RequestedBy, Input: cmd.Input,
		TurnKind: cmd.TurnKind, DispatchKey: cmd.DispatchKey, BodyHash: cmd.BodyHash,
		RootTurnID: cmd.TurnID,
	}
	switch cmd.Mode {
	case AuthorityRoot:
		if !keyPattern.MatchString(cmd.RequestID) {
			return nil, invalid("authority.request_id must be 1 to 200 printable characters without spaces")
		}
		data.Authority = Authority{Mode: AuthorityRoot, RequestID: cmd.RequestID}
	case AuthorityChild:
		if cmd.ParentClaim == nil {
			return nil, invalid("authority.parent_claim is required for child_derivation")
		}
		parent, err := d.fence(cmd.ParentClaim.TurnID, *cmd.ParentClaim, cmd.ParentHash)
		if err != nil {
			return nil, err
		}
		if cmd.ParentClaim.AgentID != cmd.RequestedBy.AgentID {
			return nil, Errorf(Forbidden, "a child Turn is requested by the holder of its parent claim (%s)", cmd.ParentClaim.AgentID)
		}
		data.Depth = parent.Dispatch.Depth + 1
		if data.Depth > cmd.MaxDepth {
			return nil, Errorf(Invariant, "a child of turn %s would be at depth %d; the bound is %d", parent.ID, data.Depth, cmd.MaxDepth)
		}
		data.RootTurnID = parent.Dispatch.RootTurnID
		data.Authority = Authority{Mode: AuthorityChild, ParentTurnID: parent.ID, ParentClaim: parent.Claim.ID}
	default:
		return nil, invalid("authority.mode must be %q or %q", AuthorityRoot, AuthorityChild)
	}
	target, err := d.agent(cmd.TargetAgent.AgentID)
	if err != nil {
		return nil, err
	}
	switch {
	case !target.Spec.Enabled:
		return nil, Errorf(Invariant, "agent %s is disabled", cmd.TargetAgent.AgentID)
	case !target.Spec.AcceptsWork:
		return nil, Errorf(Invariant, "agent %s does not accept work", cmd.TargetAgent.AgentID)
	case target.Drained:
		return nil, Errorf(Invariant, "agent %s is drained and admits no new Turns", cmd.TargetAgent.AgentID)
	}
	return d.event(EvTurnDispatched, AggTurn, cmd.TurnID, data), nil
}

func (d decider) claimNext(cmd ClaimNext) (*Event, error) {
	if _, err := d.p.check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	a, err := d.agent(cmd.AgentID)
	if err != nil {
		return nil, err
	}
	if err := d.bodyAgent(cmd.Agent, cmd.AgentID); err != nil {
		return nil, err
	}
	if !d.c.Caller.Admin && d.c.Caller.AgentID != cmd.AgentID {
		return nil, Errorf(Forbidden, "agent %s may not claim for agent %s", d.c.Caller.AgentID, cmd.AgentID)
	}
	if !a.Spec.Enabled || a.Drained || a.ActiveClaims >= a.Spec.Capacity {
		return nil, nil
	}
	t := d.p.NextQueued(cmd.AgentID)
	if t == nil {
		return nil, nil
	}
	return d.event(EvTurnClaimed, AggTurn, t.ID, &TurnClaimed{
		ClaimID: cmd.ClaimID, AgentID: cmd.AgentID, TokenHash: cmd.TokenHash, ExpiresAt: cmd.ExpiresAt.UTC(),
	}), nil
}

func (d decider) renew(cmd Renew) (*Event, error) {
	t, err := d.fence(cmd.Claim.TurnID, cmd.Claim, cmd.TokenHash)
	if err != nil {
		return nil, err
	}
	return d.event(EvTurnClaimRenewed, AggTurn, t.ID, &TurnClaimRenewed{ClaimID: t.Claim.ID, ExpiresAt: cmd.ExpiresAt.UTC()}), nil
}

func (d decider) appendRecord(cmd AppendRecord) (*Event, error) {
	t, err := d.fence(cmd.TurnID, cmd.Claim, cmd.TokenHash)
	if err != nil {
		return nil, err
	}
	if !ValidName(cmd.Role) {
		return nil, invalid("role must be a name of 1 to 128 characters without spaces")
	}
	if err := objectField("payload", cmd.Payload, MaxPayloadBytes); err != nil {
		return nil, err
	}
	return d.event(EvTurnRecordAppended, AggTurn, t.ID, &TurnRecordAppended{
		ClaimID: t.Claim.ID, TurnSeq: t.TurnSeq + 1, Role: cmd.Role, Payload: cmd.Payload,
	}), nil
}

func (d decider) suspend(cmd Suspend) (*Event, error) {
	t, err := d.fence(cmd.TurnID, cmd.Claim, cmd.TokenHash)
	if err != nil {
		return nil, err
	}
	if t.StopRequested {
		return nil, Errorf(Conflict, "a stop was requested for turn %s: finish it instead of suspending it", t.ID)
	}
	return d.event(EvTurnSuspended, AggTurn, t.ID, &TurnSuspended{ClaimID: t.Claim.ID}), nil
}

func (d decider) finish(cmd Finish) (*Event, error) {
	t, err := d.fence(cmd.TurnID, cmd.Claim, cmd.TokenHash)
	if err != nil {
		return nil, err
	}
	known := false
	for _, o := range Outcomes {
		known = known || o == cmd.Outcome
	}
	if !known {
		return nil, invalid("outcome must be one of %v", Outcomes)
	}
	data := &TurnFinished{ClaimID: t.Claim.ID, Outcome: cmd.Outcome}
	if !IsNull(cmd.FinalPayload) {
		if err := objectField("final_payload", cmd.FinalPayload, MaxPayloadBytes); err != nil {
			return nil, err
		}
		if !ValidName(cmd.FinalRecordRole) {
			return nil, invalid("final_record_role must be a name of 1 to 128 characters without spaces when final_payload is given")
		}
		data.FinalPayload, data.FinalRecordRole, data.TurnSeq = cmd.FinalPayload, cmd.FinalRecordRole, t.TurnSeq+1
	} else if cmd.FinalRecordRole != "" && !ValidName(cmd.FinalRecordRole) {
		return nil, invalid("final_record_role must be a name of 1 to 128 characters without spaces")
	}
	return d.event(EvTurnFinished, AggTurn, t.ID, data), nil
}

// managed finds the Turn a management command (stop, resume) acts on and
// applies its write guard: the admin, a holder of the management grant, and
// the Turn's requester and target agent may manage it, each as itself.
func (d decider) managed(turnID string, by AgentRef) (*Turn, error) {
	t, err := d.turn(turnID)
	if err != nil {
		return nil, err
	}
	a, err := d.p.check(d.c.Caller, d.now)
	if err != nil {
		return nil, err
	}
	if id := d.c.Caller.AgentID; a != nil && !a.Has(GrantManage) && !involved(t, id) {
		return nil, Errorf(Forbidden, "agent %s may not manage turn %s", id, t.ID)
	}
	if err := d.actingAs(by); err != nil {
		return nil, err
	}
	return t, nil
}

func (d decider) stop(cmd Stop) (*Event, error) {
	t, err := d.managed(cmd.TurnID, cmd.RequestedBy)
	if err != nil {
		return nil, err
	}
	switch {
	case t.State == StateFinished:
		return nil, Errorf(Conflict, "turn %s is already finished", t.ID)
	case t.State == StateClaimed && d.now.Before(t.Claim.ExpiresAt):
		if t.StopRequested {
			return nil, nil
		}
		return d.event(EvTurnStopRequested, AggTurn, t.ID, &TurnStopRequested{RequestedBy: cmd.RequestedBy}), nil
	default: // queued, suspended, or held by an expired claim: nobody works on it
		return d.event(EvTurnStopped, AggTurn, t.ID, &TurnStopped{RequestedBy: cmd.RequestedBy}), nil
	}
}

func (d decider) resume(cmd Resume) (*Event, error) {
	t, err := d.managed(cmd.TurnID, cmd.RequestedBy)
	if err != nil {
		return nil, err
	}
	if t.State != StateSuspended {
		return nil, Errorf(Conflict, "turn %s is %s; only a suspended Turn can be resumed", t.ID, t.State)
	}
	return d.event(EvTurnResumed, AggTurn, t.ID, &TurnResumed{RequestedBy: cmd.RequestedBy}), nil
}

func (d decider) expireClaim(cmd ExpireClaim) (*Event, error) {
	if _, err := d.p.check(d.c.Caller, d.now); err != nil {
		return nil, err
	}
	t, err := d.turn(cmd.TurnID)
	if err != nil {
		return nil, err
	}
	if t.State != StateClaimed || t.Claim == nil || d.now.Before(t.Claim.ExpiresAt) {
		return nil, nil
	}
	return d.event(EvTurnClaimExpired, AggTurn, t.ID, &TurnClaimExpired{ClaimID: t.Claim.ID, Stopped: t.StopRequested}), nil
}
