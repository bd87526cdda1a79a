package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/turnledger/turnledger/serve"
)

// addNATSFlags registers the flags of serve.NATSAuth on fs.
func addNATSFlags(fs *flag.FlagSet, a *serve.NATSAuth) {
	fs.StringVar(&a.User, "nats-user", "", "NATS user name (the password is TURNLEDGER_NATS_PASSWORD)")
	fs.StringVar(&a.Creds, "nats-creds", "", "NATS credentials file (.creds: user JWT and NKey seed)")
	fs.StringVar(&a.CA, "nats-tls-ca", "", "PEM file of the CA that signs the NATS servers' certificates")
	fs.StringVar(&a.Cert, "nats-tls-cert", "", "PEM client certificate for NATS (with --nats-tls-key)")
	fs.StringVar(&a.Key, "nats-tls-key", "", "PEM private key of --nats-tls-cert")
}

// natsEnvHelp is the usage text on the environment of serve.NATSAuth.
const natsEnvHelp = "TURNLEDGER_NATS_PASSWORD (with --nats-user) and TURNLEDGER_NATS_TOKEN authenticate to --nats-url."

// natsAuthFromEnv reads the secrets of a from getenv.
func natsAuthFromEnv(a *serve.NATSAuth, getenv func(string) string) {
	a.Password = getenv("TURNLEDGER_NATS_PASSWORD")
	a.Token = getenv("TURNLEDGER_NATS_TOKEN")
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
