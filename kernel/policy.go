package kernel

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"slices"
	"time"
)

// Actor kinds.
const (
	ActorAgent  = "agent"
	ActorAdmin  = "admin"
	ActorSystem = "system" // the claim reaper
)

// Grants an agent's spec may carry. The table with what each allows is in the
// package doc and docs/concepts.md; every check of them is in this package.
const (
	GrantCredentialIssue = "credentials:issue" // issue credentials for any agent of the project
	GrantCredentialAdmin = "credentials:admin" // list and revoke any agent's credentials
	GrantRegister        = "agents:register"   // register agents: the trusted registration service actor
	GrantDispatch        = "turns:dispatch"    // dispatch root Turns
	GrantManage          = "management"        // drain, resume, stop, resume Turns, metadata and presence of any agent
	GrantRead            = "projections:read"  // read every Turn, feed and projection of the project
)

// Grants lists every grant, in the order of the table.
var Grants = []string{GrantCredentialIssue, GrantCredentialAdmin, GrantRegister, GrantDispatch, GrantManage, GrantRead}

func knownGrant(g string) bool {
	for _, k := range Grants {
		if k == g {
			return true
		}
	}
	return false
}

// Caller is who asks: the admin, or an agent authenticated with one of its
// credentials. The zero Caller is nobody.
type Caller struct {
	Admin        bool // the admin bearer; also the system (see System)
	System       bool // the service itself (the claim reaper); implies Admin
	AgentID      string
	CredentialID string
}

// Actor is the event actor for the caller.
func (c Caller) Actor() Actor {
	if c.System {
		return Actor{Kind: ActorSystem}
	}
	if c.Admin {
		return Actor{Kind: ActorAdmin}
	}
	return Actor{Kind: ActorAgent, AgentID: c.AgentID}
}

// Authenticate resolves the three-header identity (agent id and the hash of
// the presented token) to a Caller. Hashes are compared in constant time.
func Authenticate(p *Project, agentID, tokenHash string, now time.Time) (Caller, error) {
	var found *Credential
	for _, c := range p.Credentials {
		if c.AgentID == agentID && subtle.ConstantTimeCompare([]byte(c.TokenHash), []byte(tokenHash)) == 1 {
			found = c
		}
	}
	switch {
	case found == nil:
		return Caller{}, Errorf(Unauthorized, "invalid agent credentials")
	case found.Revoked:
		return Caller{}, Errorf(Unauthorized, "credential %s has been revoked", found.ID)
	case !now.Before(found.ExpiresAt):
		return Caller{}, Errorf(Unauthorized, "credential %s has expired", found.ID)
	case p.Agents[agentID] == nil:
		return Caller{}, Errorf(Unauthorized, "agent %s is not registered", agentID)
	}
	return Caller{AgentID: agentID, CredentialID: found.ID}, nil
}

// AuthenticateToken resolves a bearer token alone (the A2A face, where the
// token says who calls) to a Caller: the agent whose credential it is.
// Every credential of the project is compared, in constant time.
func AuthenticateToken(p *Project, tokenHash string, now time.Time) (Caller, error) {
	agentID := ""
	for _, c := range p.Credentials {
		if subtle.ConstantTimeCompare([]byte(c.TokenHash), []byte(tokenHash)) == 1 {
			agentID = c.AgentID
		}
	}
	if agentID == "" {
		return Caller{}, Errorf(Unauthorized, "invalid agent credentials")
	}
	return Authenticate(p, agentID, tokenHash, now)
}

// check verifies that the caller is still who it was when it authenticated:
// the admin, or an agent whose credential is still active. Commands call it so
// that a credential revoked on another instance is refused even when this
// instance authenticated on stale state (the append then loses its race, the
// engine catches up, and check fails).
func (p *Project) Check(c Caller, now time.Time) (*Agent, error) {
	if c.Admin {
		return nil, nil
	}
	cred := p.Credentials[c.CredentialID]
	if c.AgentID == "" || cred == nil || cred.AgentID != c.AgentID {
		return nil, Errorf(Unauthorized, "invalid agent credentials")
	}
	if cred.Revoked {
		return nil, Errorf(Unauthorized, "credential %s has been revoked", cred.ID)
	}
	if !now.Before(cred.ExpiresAt) {
		return nil, Errorf(Unauthorized, "credential %s has expired", cred.ID)
	}
	a := p.Agents[c.AgentID]
	if a == nil {
		return nil, Errorf(Unauthorized, "agent %s is not registered", c.AgentID)
	}
	return a, nil
}

// require checks the caller and that it is the admin or holds the grant.
func (p *Project) require(c Caller, now time.Time, grant string) error {
	a, err := p.Check(c, now)
	if err != nil {
		return err
	}
	if a != nil && !a.Has(grant) {
		return Errorf(Forbidden, "agent %s lacks the %s grant", c.AgentID, grant)
	}
	return nil
}

// requireSelfOr checks the caller and that it is the admin, the agent self, or
// holds the grant.
func (p *Project) requireSelfOr(c Caller, now time.Time, self, grant string) error {
	a, err := p.Check(c, now)
	if err != nil {
		return err
	}
	if a != nil && c.AgentID != self && !a.Has(grant) {
		return Errorf(Forbidden, "agent %s may act only for itself without the %s grant", c.AgentID, grant)
	}
	return nil
}

// Read actions a caller may ask for.
const (
	ReadDirectory   = "directory"   // agent snapshots, projection/agents, projection/turn-offers
	ReadProjectWide = "project"     // projection/feed and unfiltered projection/turns
	ReadAgentFeed   = "agent-feed"  // one agent's feed
	ReadCredentials = "credentials" // one agent's credential list
)

// AuthorizeRead is the read policy. Every authenticated agent of the project
// reads the directory; an agent reads its own feed and credentials; the
// project feed and every Turn need the read grant (without it, Turn lists are
// narrowed to the caller's own Turns: see CanReadTurn). The admin reads all.
func AuthorizeRead(p *Project, c Caller, now time.Time, action, agentID string) error {
	a, err := p.Check(c, now)
	if err != nil || a == nil {
		return err
	}
	switch action {
	case ReadDirectory:
		return nil
	case ReadAgentFeed:
		if c.AgentID == agentID || a.Has(GrantRead) {
			return nil
		}
		return Errorf(Forbidden, "agent %s may read only its own feed without the %s grant", c.AgentID, GrantRead)
	case ReadCredentials:
		if c.AgentID == agentID || a.Has(GrantCredentialAdmin) {
			return nil
		}
		return Errorf(Forbidden, "agent %s may list only its own credentials without the %s grant", c.AgentID, GrantCredentialAdmin)
	default:
		if a.Has(GrantRead) {
			return nil
		}
		return Errorf(Forbidden, "agent %s lacks the %s grant", c.AgentID, GrantRead)
	}
}

// CanReadAll reports whether the caller reads every Turn of the project.
func CanReadAll(p *Project, c Caller) bool {
	if c.Admin {
		return true
	}
	a := p.Agents[c.AgentID]
	return a != nil && a.Has(GrantRead)
}

// TurnsVisibleTo is the agent a list of the project's Turns is narrowed to
// for the caller: "" when it reads every Turn (CanReadAll), else the caller,
// who is shown the Turns TurnReaders lets it read (the projection indexes
// them by reader).
func TurnsVisibleTo(p *Project, c Caller) string {
	if CanReadAll(p, c) {
		return ""
	}
	return c.AgentID
}

// CanReadTurn is the read policy of one Turn: the admin and a holder of the
// read grant read every Turn; any other agent reads the Turns it may by
// TurnReaders. List filters use TurnReaders too, through the projection's
// index, so a Turn is listed for exactly the callers who may read it.
func CanReadTurn(p *Project, c Caller, now time.Time, turnID string) error {
	if _, err := p.Check(c, now); err != nil {
		return err
	}
	if CanReadAll(p, c) {
		return nil
	}
	t := p.Turn(turnID)
	if t == nil {
		return Errorf(NotFound, "turn %s not found", turnID)
	}
	var root *TurnDispatched
	if r := p.Turn(t.Dispatch.RootTurnID); r != nil && r.ID != t.ID {
		root = &r.Dispatch
	}
	if slices.Contains(TurnReaders(p.ID, &t.Dispatch, root), c.AgentID) {
		return nil
	}
	return Errorf(Forbidden, "agent %s may not read turn %s", c.AgentID, turnID)
}

// Involved returns the agents of the project that a Turn's dispatch names:
// its target and its requester, without repeats. Their feeds carry the
// Turn's events, and they may stop and resume it.
func Involved(project string, d *TurnDispatched) []string {
	var out []string
	for _, a := range []AgentRef{d.TargetAgent, d.RequestedBy} {
		if a.AgentID == "" || (a.ProjectID != "" && project != "" && a.ProjectID != project) || slices.Contains(out, a.AgentID) {
			continue
		}
		out = append(out, a.AgentID)
	}
	return out
}

// TurnReaders returns the agents that may read a Turn without the read
// grant: the agents involved in it and, for a Turn under a root (root is the
// root Turn's dispatch, nil for a root Turn), the agents involved in its
// root, who asked for the whole tree of work. It is fixed at dispatch.
func TurnReaders(project string, d, root *TurnDispatched) []string {
	out := Involved(project, d)
	if root != nil {
		for _, a := range Involved(project, root) {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

func involved(t *Turn, agentID string) bool {
	return slices.Contains(Involved("", &t.Dispatch), agentID)
}

// HashSecret is how every secret (credential token, claim token, join code) is
// kept: the hex SHA-256 of it. Secrets are 256 random bits, so no salt or
// stretching is needed.
func HashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
