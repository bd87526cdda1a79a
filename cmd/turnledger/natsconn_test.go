package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/serve"
)

// TestServeAuthenticatesToNATS starts serve against real NATS servers that
// want a user and password, a token, or TLS with a client certificate, each
// given the way docs/cluster.md says, and drives a command through each. Wrong
// or half-given credentials keep serve from starting.
func TestServeAuthenticatesToNATS(t *testing.T) {
	userSrv := natstest.Start(t, natstest.Options(func(o *server.Options) { o.Username, o.Password = "tl", "s3cret" }))
	tokenSrv := natstest.Start(t, natstest.Options(func(o *server.Options) { o.Authorization = "tok-123" }))
	pki := newTestPKI(t)
	tlsSrv := natstest.Start(t, natstest.Options(func(o *server.Options) {
		o.TLS, o.TLSVerify, o.TLSConfig = true, true, pki.serverTLS
	}))

	t.Run("user and password", func(t *testing.T) {
		t.Setenv("TURNLEDGER_NATS_PASSWORD", "s3cret")
		serveOneCommand(t, "--nats-url", userSrv.ClientURL(), "--nats-user", "tl")
	})
	t.Run("token", func(t *testing.T) {
		t.Setenv("TURNLEDGER_NATS_TOKEN", "tok-123")
		serveOneCommand(t, "--nats-url", tokenSrv.ClientURL())
	})
	t.Run("TLS with a client certificate", func(t *testing.T) {
		serveOneCommand(t, "--nats-url", strings.Replace(tlsSrv.ClientURL(), "nats://", "tls://", 1),
			"--nats-tls-ca", pki.ca, "--nats-tls-cert", pki.cert, "--nats-tls-key", pki.key)
	})

	for name, c := range map[string]struct {
		env  map[string]string
		args []string
		code int
	}{
		"wrong password":        {map[string]string{"TURNLEDGER_NATS_PASSWORD": "nope"}, []string{"--nats-url", userSrv.ClientURL(), "--nats-user", "tl"}, 1},
		"user without password": {nil, []string{"--nats-url", userSrv.ClientURL(), "--nats-user", "tl"}, 2},
		"user and token":        {map[string]string{"TURNLEDGER_NATS_PASSWORD": "s3cret", "TURNLEDGER_NATS_TOKEN": "tok-123"}, []string{"--nats-url", userSrv.ClientURL(), "--nats-user", "tl"}, 2},
		"cert without key":      {nil, []string{"--nats-url", tlsSrv.ClientURL(), "--nats-tls-cert", pki.cert}, 2},
		"missing CA file":       {nil, []string{"--nats-url", tlsSrv.ClientURL(), "--nats-tls-ca", filepath.Join(t.TempDir(), "none.pem")}, 2},
		"TLS without a cert":    {nil, []string{"--nats-url", strings.Replace(tlsSrv.ClientURL(), "nats://", "tls://", 1), "--nats-tls-ca", pki.ca}, 1},
		"credentials, embedded": {nil, []string{"--nats-user", "tl"}, 2},
		"replicas out of range": {nil, []string{"--nats-url", tokenSrv.ClientURL(), "--replicas", "7"}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("TURNLEDGER_NATS_PASSWORD", c.env["TURNLEDGER_NATS_PASSWORD"])
			t.Setenv("TURNLEDGER_NATS_TOKEN", c.env["TURNLEDGER_NATS_TOKEN"])
			t.Setenv("TURNLEDGER_ADMIN_TOKEN", "")
			var out syncBuffer
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, c.args...)
			if code := Main(t.Context(), args, &out, &out); code != c.code {
				t.Errorf("serve %v = exit %d, want %d; output:\n%s", c.args, code, c.code, out.String())
			}
			for _, secret := range []string{"s3cret", "tok-123", "nope"} {
				if strings.Contains(out.String(), secret) {
					t.Errorf("serve's output shows the secret %q:\n%s", secret, out.String())
				}
			}
		})
	}
}

// serveOneCommand starts serve with args and registers an agent through it.
func serveOneCommand(t *testing.T, args ...string) {
	t.Helper()
	dir := t.TempDir()
	base, _ := startEngine(t, dir, "127.0.0.1:0", args...)
	admin := adminClient(t, base, dir)
	agentClient(t, admin, "p1", "worker", 1)
}

// testPKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate, as PEM files.
type testPKI struct {
	ca, cert, key string
	serverTLS     *tls.Config
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "turnledger test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, ip bool) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "turnledger test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		if ip {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	srvDER, srvKey := issue(2, x509.ExtKeyUsageServerAuth, true)
	cliDER, cliKey := issue(3, x509.ExtKeyUsageClientAuth, false)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return testPKI{
		ca:   write("ca.pem", "CERTIFICATE", caDER),
		cert: write("client.pem", "CERTIFICATE", cliDER),
		key:  write("client-key.pem", "EC PRIVATE KEY", keyDER(cliKey)),
		serverTLS: &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		},
	}
}

func TestRedactURLsHidesEveryPassword(t *testing.T) {
	got := serve.RedactURLs("nats://tl:s3cret@n1:4222, nats://n2:4222,tls://u:pw2@n3:4222")
	if want := "nats://tl:xxxxx@n1:4222,nats://n2:4222,tls://u:xxxxx@n3:4222"; got != want {
		t.Errorf("serve.RedactURLs(...) = %q, want %q", got, want)
	}
}
