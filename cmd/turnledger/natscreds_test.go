package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/turnledger/turnledger/internal/natstest"
)

// operatorSetup is decentralised NATS authentication as nsc makes it: an
// operator, a system account, an account with JetStream, and users of it
// in .creds files (user JWT and NKey seed).
type operatorSetup struct {
	operator *jwt.OperatorClaims
	system   string // public key of the system account
	resolver *server.MemAccResolver
	account  nkeys.KeyPair // signs the users of the JetStream account
}

func newOperatorSetup(t *testing.T) *operatorSetup {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "turnledger-test"
	ojwt, err := oc.Encode(okp)
	must(err)
	operator, err := jwt.DecodeOperatorClaims(ojwt)
	must(err)
	o := &operatorSetup{operator: operator, resolver: &server.MemAccResolver{}}
	account := func(name string, js bool) (nkeys.KeyPair, string) {
		kp, err := nkeys.CreateAccount()
		must(err)
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		ajwt, err := ac.Encode(okp)
		must(err)
		must(o.resolver.Store(pub, ajwt))
		return kp, pub
	}
	_, o.system = account("SYS", false)
	o.account, _ = account("TURNLEDGER", true)
	return o
}

// options configures a server to trust the operator and resolve its
// accounts from memory.
func (o *operatorSetup) options(opts *server.Options) {
	opts.TrustedOperators = []*jwt.OperatorClaims{o.operator}
	opts.SystemAccount = o.system
	opts.AccountResolver = o.resolver
}

// creds writes a .creds file of a new user signed by signer.
func (o *operatorSetup) creds(t *testing.T, signer nkeys.KeyPair) string {
	t.Helper()
	ukp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, _ := ukp.PublicKey()
	ujwt, err := jwt.NewUserClaims(upub).Encode(signer)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := ukp.Seed()
	b, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "turnledger.creds")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeAuthenticatesWithCreds runs a real nats-server in operator mode
// (decentralised JWT authentication: a trusted operator, accounts resolved
// from memory, the application account with JetStream) and starts serve
// with --nats-creds: it makes its stream in that account and takes
// commands. A .creds file of a user whose account the operator never
// signed keeps serve from starting, and no secret of either file is shown.
func TestServeAuthenticatesWithCreds(t *testing.T) {
	o := newOperatorSetup(t)
	srv := natstest.Start(t, natstest.Options(o.options))
	good := o.creds(t, o.account)
	serveOneCommand(t, "--nats-url", srv.ClientURL(), "--nats-creds", good)

	stranger, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	bad := o.creds(t, stranger)
	var out syncBuffer
	t.Setenv("TURNLEDGER_ADMIN_TOKEN", "")
	code := Main(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--nats-url", srv.ClientURL(), "--nats-creds", bad}, &out, &out)
	if code != 1 || !strings.Contains(out.String(), "connect to NATS") {
		t.Errorf("serve --nats-creds (an account the operator never signed) = exit %d, want 1 and a failed connection:\n%s", code, out.String())
	}
	for _, f := range []string{good, bad} {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "SU") && strings.Contains(out.String(), line) {
				t.Errorf("serve's output shows the NKey seed of %s", f)
			}
		}
	}
}
