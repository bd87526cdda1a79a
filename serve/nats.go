package serve

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// NATSAuth is how a service authenticates to an external NATS server or
// cluster (Config.NATSURL), and the TLS it uses to reach it. cmd/turnledger
// takes the secrets from the environment, never from flags, so that they
// stay out of process listings.
type NATSAuth struct {
	User     string // --nats-user
	Password string // TURNLEDGER_NATS_PASSWORD
	Token    string // TURNLEDGER_NATS_TOKEN
	Creds    string // --nats-creds: a .creds file (JWT and NKey seed)
	CA       string // --nats-tls-ca: PEM roots that sign the servers' certificates
	Cert     string // --nats-tls-cert: PEM client certificate
	Key      string // --nats-tls-key: its PEM private key
}

func (a NATSAuth) empty() bool { return a == NATSAuth{} }

// Validate reports every problem of a, joined; url is the NATS URL it is
// for (empty: the embedded server).
func (a NATSAuth) Validate(url string) error {
	var errs []error
	if url == "" && !a.empty() {
		errs = append(errs, errors.New("NATS credentials and TLS options apply to --nats-url only; the embedded server needs none"))
	}
	if (a.User == "") != (a.Password == "") {
		errs = append(errs, errors.New("--nats-user and TURNLEDGER_NATS_PASSWORD go together"))
	}
	n := 0
	for _, set := range []bool{a.User != "", a.Token != "", a.Creds != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		errs = append(errs, errors.New("use one of --nats-user, TURNLEDGER_NATS_TOKEN and --nats-creds"))
	}
	if (a.Cert == "") != (a.Key == "") {
		errs = append(errs, errors.New("--nats-tls-cert and --nats-tls-key go together"))
	}
	for flag, path := range map[string]string{"--nats-creds": a.Creds, "--nats-tls-ca": a.CA, "--nats-tls-cert": a.Cert, "--nats-tls-key": a.Key} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", flag, err))
		}
	}
	return errors.Join(errs...)
}

// How the connection to an external NATS server notices that server is
// gone when nothing closes the TCP connection (a crashed host, a network
// partition, a frozen process): a ping every natsPingInterval, and the
// connection is stale, and replaced by one to another server of the
// cluster, once natsMaxPingsOut pings are unanswered — within about
// natsPingInterval × (natsMaxPingsOut+1), 4 s, where the client's defaults
// (2 minutes, 2) took up to 6 minutes while every command failed with 503.
// A server that has gone away for good is asked again after
// natsReconnectWait (the client's default is 2 s).
const (
	natsPingInterval  = time.Second
	natsMaxPingsOut   = 3
	natsReconnectWait = 250 * time.Millisecond
)

// Options are the nats.Connect options of a: reconnect forever (a cluster
// loses servers and gets them back), notice a server that stopped answering
// within seconds, and authenticate and encrypt as asked.
func (a NATSAuth) Options() []nats.Option {
	opts := []nats.Option{nats.Name("turnledger"), nats.MaxReconnects(-1),
		nats.PingInterval(natsPingInterval), nats.MaxPingsOutstanding(natsMaxPingsOut), nats.ReconnectWait(natsReconnectWait)}
	if a.User != "" {
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if a.Token != "" {
		opts = append(opts, nats.Token(a.Token))
	}
	if a.Creds != "" {
		opts = append(opts, nats.UserCredentials(a.Creds))
	}
	if a.CA != "" {
		opts = append(opts, nats.RootCAs(a.CA))
	}
	if a.Cert != "" {
		opts = append(opts, nats.ClientCert(a.Cert, a.Key))
	}
	return opts
}

// RedactURLs hides the passwords of a comma-separated list of NATS URLs.
func RedactURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}
