package engine

import (
	"github.com/turnledger/turnledger/kernel"

	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// Secrets that a retry must be able to answer again (claim tokens,
// credential tokens, join codes) are not drawn at random: each is an HMAC of
// a server-held key and the id of what it belongs to, which is on the ledger.
// The ledger keeps only the secret's hash, as before; the key never leaves
// the server, so the ledger alone still reveals no secret.

const (
	secretClaim      = "claim"
	secretCredential = "credential"
	secretInvite     = "invite"
	secretInput      = "input"
)

// InputTokenPrefix starts every input token.
const InputTokenPrefix = "tli_"

// inputTokenOf is the input token of the wait that suspending turnID under
// claimID starts: one per suspension, the same for a retried suspend.
func (e *Engine) inputTokenOf(project, turnID, claimID string) string {
	return InputTokenPrefix + e.derive(secretInput, project, turnID+"/"+claimID)
}

// derive returns the secret of kind for the id in the project.
func (e *Engine) derive(kind, project, id string) string {
	mac := hmac.New(sha256.New, e.cfg.SecretKey)
	mac.Write([]byte(kind + "\x00" + project + "\x00" + id))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// rederive re-derives a secret for a retry and checks it against the hash on
// the ledger: a server started with another key cannot answer it again.
func (e *Engine) rederive(prefix, kind, project, id, hash string) (string, error) {
	s := prefix + e.derive(kind, project, id)
	if hash != "" && kernel.HashSecret(s) != hash {
		return "", kernel.Errorf(kernel.Conflict, "this Idempotency-Key was answered by a server with another secret key; its secret cannot be given again")
	}
	return s, nil
}
