package engine_test

import (
	"sync"
	"testing"

	"github.com/turnledger/turnledger/kernel"
)

// Authentications on one instance run while another instance revokes the
// credential and this one dispatches: every authentication that starts after
// the revocation returned is refused, and the shared reads race with nothing
// (run with -race).
func TestAuthenticateWhileWritingOnTwoInstances(t *testing.T) {
	engines, _ := newEngines(t, 2)
	a, b := engines[0], engines[1]
	register(t, a, "req", 1)
	register(t, a, "worker", 64)
	cred, err := a.IssueCredential(t.Context(), "p1", admin, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate(t.Context(), "p1", "worker", cred.Token); err != nil {
		t.Fatalf("Authenticate before the revocation = %v", err)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				b.Authenticate(t.Context(), "p1", "worker", cred.Token)
				b.Folded("p1")
			}
		}()
	}
	for i := 0; i < 20; i++ {
		if _, err := dispatch(b, "k"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Execute(t.Context(), "p1", kernel.RevokeCredential{Common: admin, AgentID: "worker", CredentialID: cred.CredentialID}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := b.Authenticate(t.Context(), "p1", "worker", cred.Token); kernel.ErrorKind(err) != kernel.Unauthorized {
			t.Fatalf("Authenticate %d after the revocation through the other instance = %v, want %s", i, err, kernel.Unauthorized)
		}
	}
	close(stop)
	wg.Wait()
}
