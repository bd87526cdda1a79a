package main

import (
	"errors"
	"flag"

	"github.com/turnledger/turnledger/serve"
)

// limitFlags registers serve's flags of l on fs.
func limitFlags(fs *flag.FlagSet, l *serve.Limits) {
	fs.IntVar(&l.MaxInFlight, "max-in-flight", l.MaxInFlight, "requests served at once; beyond it 503 with Retry-After (0: no bound)")
	fs.IntVar(&l.MaxProjectInFlight, "max-project-in-flight", l.MaxProjectInFlight, "requests of one project served at once; beyond it 503 with Retry-After (0: no bound)")
	authFlags(fs, l, "per address and per agent")
	connFlags(fs, l, "long polls and streams extend their own")
	fs.Var(&l.MaxPageBytes, "max-page-bytes", "stored bytes of the items of one feed, context or Turn list page, e.g. 4MiB; a page stops before the item that would pass it, with has_more (it always holds one item)")
	fs.Var(&l.MemoryLimit, "memory-limit", "soft memory limit of the process, e.g. 512MiB or 2GiB (GOMEMLIMIT in the environment wins; 0: none)")
}

// authFlags are the flags of the failed-authentication throttle (serve's
// and runtime's); per says what a bucket is kept for.
func authFlags(fs *flag.FlagSet, l *serve.Limits, per string) {
	fs.IntVar(&l.AuthFailureBurst, "auth-failure-burst", l.AuthFailureBurst, "failed authentications allowed "+per+" before 429 with Retry-After (0: no throttle)")
	fs.DurationVar(&l.AuthFailureEvery, "auth-failure-every", l.AuthFailureEvery, "one more failed authentication allowed per this long")
}

// connFlags are the flags of the connection cap and the deadlines (serve's
// and runtime's); streams says what the write deadline does not cut.
func connFlags(fs *flag.FlagSet, l *serve.Limits, streams string) {
	fs.IntVar(&l.MaxConns, "max-conns", l.MaxConns, "open client connections at most; more wait to be accepted (0: no bound)")
	fs.DurationVar(&l.ReadTimeout, "read-timeout", l.ReadTimeout, "time to read a whole request, body included")
	fs.DurationVar(&l.WriteTimeout, "write-timeout", l.WriteTimeout, "time to write a response ("+streams+")")
}

// validateLimits reports every problem of limits given as flags, joined:
// serve.Limits.Validate's, and deadlines that must be set.
func validateLimits(l serve.Limits) error {
	var errs []error
	if l.ReadTimeout <= 0 || l.WriteTimeout <= 0 {
		errs = append(errs, errors.New("--read-timeout and --write-timeout must be positive"))
	}
	return errors.Join(l.Validate(), errors.Join(errs...))
}
