package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// natsAuth is how serve and replay authenticate to an external NATS server
// or cluster (--nats-url), and the TLS they use to reach it. Secrets come
// from the environment, never from flags, so they stay out of process
// listings.
type natsAuth struct {
	User     string // --nats-user
	Password string // TURNLEDGER_NATS_PASSWORD
	Token    string // TURNLEDGER_NATS_TOKEN
	Creds    string // --nats-creds: a .creds file (JWT and NKey seed)
	CA       string // --nats-tls-ca: PEM roots that sign the servers' certificates
	Cert     string // --nats-tls-cert: PEM client certificate
	Key      string // --nats-tls-key: its PEM private key
}

// addNATSFlags registers the flags of natsAuth on fs.
func addNATSFlags(fs *flag.FlagSet, a *natsAuth) {
	fs.StringVar(&a.User, "nats-user", "", "NATS user name (the password is TURNLEDGER_NATS_PASSWORD)")
	fs.StringVar(&a.Creds, "nats-creds", "", "NATS credentials file (.creds: user JWT and NKey seed)")
	fs.StringVar(&a.CA, "nats-tls-ca", "", "PEM file of the CA that signs the NATS servers' certificates")
	fs.StringVar(&a.Cert, "nats-tls-cert", "", "PEM client certificate for NATS (with --nats-tls-key)")
	fs.StringVar(&a.Key, "nats-tls-key", "", "PEM private key of --nats-tls-cert")
}

// natsEnvHelp is the usage text on the environment of natsAuth.
const natsEnvHelp = "TURNLEDGER_NATS_PASSWORD (with --nats-user) and TURNLEDGER_NATS_TOKEN authenticate to --nats-url."

// fromEnv reads the secrets of a from getenv.
func (a *natsAuth) fromEnv(getenv func(string) string) {
	a.Password = getenv("TURNLEDGER_NATS_PASSWORD")
	a.Token = getenv("TURNLEDGER_NATS_TOKEN")
}

func (a natsAuth) empty() bool { return a == natsAuth{} }

// validate reports every problem of a, joined; url is --nats-url.
func (a natsAuth) validate(url string) error {
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

// validateBackend reports the serve flags that cannot work with the NATS
// server chosen, joined: natsURL is --nats-url (empty: the embedded
// server), replicas --replicas, and syncSet whether --sync was given.
//
// The embedded server is a single node, so a stream of more than one
// replica cannot be made on it (nats-server would refuse it only once the
// stream is created, with "replicas > 1 not supported in non-clustered
// mode"). --sync sets the embedded server's fsync policy; an external
// server keeps its own (sync_interval in its jetstream block), so --sync
// with --nats-url would promise what serve cannot give: it is refused
// rather than silently ignored.
func validateBackend(natsURL string, replicas int, syncSet bool) error {
	var errs []error
	if natsURL == "" && replicas > 1 {
		errs = append(errs, fmt.Errorf("--replicas %d needs --nats-url: the embedded NATS server is a single node, so its stream has 1 replica; run a 3-node NATS cluster for 3 (see docs/cluster.md)", replicas))
	}
	if natsURL != "" && syncSet {
		errs = append(errs, errors.New("--sync applies to the embedded NATS server only; with --nats-url, how often the NATS server fsyncs is its own setting (sync_interval in its jetstream block; sync_interval: always fsyncs every message)"))
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

// options are the nats.Connect options of a: reconnect forever (a cluster
// loses servers and gets them back), notice a server that stopped answering
// within seconds, and authenticate and encrypt as asked.
func (a natsAuth) options() []nats.Option {
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

// redactURLs hides the passwords of a comma-separated list of NATS URLs.
func redactURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}
