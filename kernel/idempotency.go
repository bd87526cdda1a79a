package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// IdempotencyRetention is how long the write model remembers an idempotency
// key: a retry within it answers the original result; after it the key is
// forgotten and the request is decided afresh.
const IdempotencyRetention = 24 * time.Hour

// Idempotency is an idempotency key as it travels with a command and, once
// the command is applied, inside its event (the envelope's `idem`). Neither
// field is the client's key: Ref is the hex SHA-256 of the caller, the route
// and the key (scoped by the HTTP layer), and Request is the hex SHA-256 of
// the request body. The engine scopes Ref once more by the command, so that
// a key is never answered by another command's event.
type Idempotency struct {
	Ref     string `json:"ref"`
	Request string `json:"request"`
}

// Answer is what an applied command with an idempotency key answered, kept in
// the write model and rebuilt from the ledger by the same fold: a retry with
// the same key and body gets it back instead of deciding again.
type Answer struct {
	Ref     digest    // of Idempotency.Ref
	Request digest    // of Idempotency.Request
	Seq     uint64    // ledger_seq of the (last) event the command appended
	At      time.Time // when it was appended
	Type    string    // the event's type
	ID      string    // the event's aggregate id

	TurnSeq       uint64    // the Turn's turn_seq right after the event
	StopRequested bool      // the Turn's stop_requested right after the event
	Claim         *Claim    // the Turn's claim right after a claim or renew event
	ResultID      string    // credential, invite or report id the command created; a suspend's claim id
	ExpiresAt     time.Time // of the credential or invite it created
	Released      []string  // every Turn a command of several events changed (claims:reconcile-expired, a cascading or bulk stop), first event's first
}

// idemMemory is the write model's memory of recent idempotency keys, oldest
// first so that expiry is a walk from the front.
type idemMemory struct {
	byRef map[digest]*Answer
	order []*Answer
}

// digest is a key's hash as kept in memory: 32 bytes, not 64 hex digits.
type digest [32]byte

// MarshalText writes a digest in hex (in snapshots).
func (d digest) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(d[:])), nil }

// UnmarshalText reads a digest written by MarshalText.
func (d *digest) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(d) {
		return errors.New("kernel: a digest is 64 hex digits")
	}
	_, err := hex.Decode(d[:], b)
	return err
}

// digestOf turns a hex SHA-256 into a digest; any other string (only a
// corrupt ledger holds one) is hashed again, so it still compares equal to
// itself.
func digestOf(s string) digest {
	var d digest
	if len(s) == 64 {
		if _, err := hex.Decode(d[:], []byte(s)); err == nil {
			return d
		}
	}
	return sha256.Sum256([]byte(s))
}

// ScopedKey returns the key of cmd scoped by the command, or nil: the key
// that Decide puts into the event cmd causes.
func ScopedKey(cmd Command) *Idempotency {
	k := cmd.common().Idem
	if k == nil {
		return nil
	}
	if _, ok := cmd.(ExpireClaim); ok {
		// Already scoped by ReconcileExpired, for all its releases.
		return k
	}
	return &Idempotency{Ref: HashSecret(k.Ref + "\x00" + cmd.Name()), Request: k.Request}
}

func (p *Project) remember(r Recorded) {
	m := &p.idem
	// Forget what is older than the retention, measured in ledger time so
	// that a replay forgets the same keys.
	for len(m.order) > 0 && r.Event.At.Sub(m.order[0].At) > IdempotencyRetention {
		if m.byRef[m.order[0].Ref] == m.order[0] {
			delete(m.byRef, m.order[0].Ref)
		}
		m.order[0] = nil
		m.order = m.order[1:]
	}
	k := r.Event.Idem
	if k == nil {
		return
	}
	if m.byRef == nil {
		m.byRef = map[digest]*Answer{}
	}
	e := r.Event
	ref, req := digestOf(k.Ref), digestOf(k.Request)
	if prev := m.byRef[ref]; prev != nil && prev.Request == req {
		// Events with one key are one command's: claims:reconcile-expired
		// releases one Turn per event, a cascading or bulk stop stops one
		// per event. The answer is the first event's, with every id.
		if prev.Released == nil {
			prev.Released = []string{prev.ID}
		}
		prev.Seq, prev.Released = r.Seq, append(prev.Released, e.ID)
		return
	}
	a := &Answer{Ref: ref, Request: req, Seq: r.Seq, At: e.At, Type: e.Type, ID: e.ID}
	if t := p.Turn(e.ID); t != nil && e.Aggregate == AggTurn {
		a.TurnSeq, a.StopRequested = t.TurnSeq, t.StopRequested
		if t.Claim != nil && (e.Type == EvTurnClaimed || e.Type == EvTurnClaimRenewed) {
			c := *t.Claim
			a.Claim = &c
		}
	}
	switch d := e.Data.(type) {
	case *CredentialIssued:
		a.ResultID, a.ExpiresAt = d.CredentialID, d.ExpiresAt
	case *InviteRedeemed:
		a.ResultID, a.ExpiresAt = d.CredentialID, d.ExpiresAt
	case *InviteCreated:
		a.ResultID, a.ExpiresAt = d.InviteID, d.ExpiresAt
	case *AgentWorkMemoryReported:
		a.ResultID = d.ReportID
	case *TurnSuspended:
		a.ResultID = d.ClaimID // the claim an input token is derived from
	case *TurnClaimExpired:
		a.Released = []string{e.ID}
	}
	m.byRef[ref] = a
	m.order = append(m.order, a)
}

// Recall returns the answer remembered for cmd's key, nil when there is none
// (or it is older than the retention), or a ValidationError when the key was
// used with another body. ExpireClaim never recalls: the events of one
// claims:reconcile-expired share its key, and the reconcile recalls once for
// all of them (as ReconcileExpired).
func Recall(p *Project, cmd Command, now time.Time) (*Answer, error) {
	if _, ok := cmd.(ExpireClaim); ok {
		return nil, nil
	}
	k := ScopedKey(cmd)
	if k == nil {
		return nil, nil
	}
	a := p.idem.byRef[digestOf(k.Ref)]
	if a == nil || now.Sub(a.At) > IdempotencyRetention {
		return nil, nil
	}
	if a.Request != digestOf(k.Request) {
		return nil, Errorf(Validation, "this Idempotency-Key was used with a different request body; use a new key for a new request")
	}
	return a, nil
}

// Answers returns the remembered answers, oldest first (for a snapshot).
func (p *Project) Answers() []*Answer { return p.idem.order }

// RestoreAnswers puts back the answers a snapshot kept, oldest first.
func (p *Project) RestoreAnswers(answers []*Answer) error {
	for _, a := range answers {
		if a == nil {
			return errors.New("kernel: an empty idempotency answer")
		}
		if p.idem.byRef == nil {
			p.idem.byRef = map[digest]*Answer{}
		}
		p.idem.byRef[a.Ref] = a // a later answer under the same key wins, as in the fold
		p.idem.order = append(p.idem.order, a)
	}
	return nil
}
