package kernel

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestGoldenDispatchWithContext pins a turn.dispatched carrying its tags
// and context_id (optional fields of v1: the files without them still
// decode).
func TestGoldenDispatchWithContext(t *testing.T) {
	want := sample(EvTurnDispatched, AggTurn, "turn_3", &TurnDispatched{TargetAgent: AgentRef{"p1", "worker"}, RequestedBy: AgentRef{"p1", "req"},
		Input: json.RawMessage(`{"q":1}`), TurnKind: "summarize", DispatchKey: "msg-1", BodyHash: sampleHash,
		Authority: Authority{Mode: AuthorityRoot, RequestID: "r1"}, RootTurnID: "turn_3",
		Tags: []string{"customer:42"}, ContextID: "ctx-019a"})
	checkGolden(t, filepath.Join("testdata", "events", "turn.dispatched.v1.with-context.json"), want)
}

// TestDispatchKeepsItsContext: the context_id is on the Turn, kept by a
// retry, checked, and part of what a repeated dispatch_key compares.
func TestDispatchKeepsItsContext(t *testing.T) {
	h := newHarness(t)
	req := h.agent("req", 1, GrantDispatch)
	h.agent("worker", 1)
	d := rootDispatch(req, "t1", "req", "worker", "k1")
	d.ContextID = "ctx-1"
	d.BodyHash = DispatchHash(d)
	h.do(d)
	if got := h.p.Turn("t1").Dispatch.ContextID; got != "ctx-1" {
		t.Errorf("Turn t1 has context_id %q, want ctx-1", got)
	}
	other := d
	other.TurnID, other.ContextID = "t2", "ctx-2"
	other.BodyHash = DispatchHash(other)
	h.refuse(other, Conflict)
	bad := rootDispatch(req, "t3", "req", "worker", "k3")
	bad.ContextID = "has space"
	bad.BodyHash = DispatchHash(bad)
	h.refuse(bad, Validation)
	if h.p.Turn("t3") != nil {
		t.Error("a refused dispatch made Turn t3")
	}
}

// TestAuthenticateToken: a token alone names its agent; an unknown, a
// revoked or an expired one does not authenticate.
func TestAuthenticateToken(t *testing.T) {
	h := newHarness(t)
	h.agent("req", 1)
	h.agent("worker", 1)
	c, err := AuthenticateToken(h.p, HashSecret("tok-worker"), h.now)
	if err != nil || c.AgentID != "worker" || c.CredentialID != "cred_worker" {
		t.Errorf("AuthenticateToken(tok-worker) = %+v, %v; want agent worker, cred_worker", c, err)
	}
	if _, err := AuthenticateToken(h.p, HashSecret("tok-nobody"), h.now); ErrorKind(err) != Unauthorized {
		t.Errorf("AuthenticateToken(unknown) = %v, want %s", err, Unauthorized)
	}
	h.do(RevokeCredential{Common: admin, AgentID: "req", CredentialID: "cred_req"})
	if _, err := AuthenticateToken(h.p, HashSecret("tok-req"), h.now); ErrorKind(err) != Unauthorized {
		t.Errorf("AuthenticateToken(revoked) = %v, want %s", err, Unauthorized)
	}
	if _, err := AuthenticateToken(h.p, HashSecret("tok-worker"), h.now.Add(2*h.credTTL)); ErrorKind(err) != Unauthorized {
		t.Errorf("AuthenticateToken(expired) = %v, want %s", err, Unauthorized)
	}
}
