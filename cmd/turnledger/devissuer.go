package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/turnledger/turnledger/authn/devissuer"
)

// defaultDevIssuerAddr is where `turnledger runtime dev-issuer` listens; the
// browser client's default build-time HOSTED_AUTH_URL points at it.
const defaultDevIssuerAddr = "127.0.0.1:8091"

// runtimeDevIssuer is `turnledger runtime dev-issuer`.
func runtimeDevIssuer(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("runtime dev-issuer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", defaultDevIssuerAddr, "listen address; loopback only")
	redirects := fs.String("redirect-origin", "http://"+defaultRuntimeAddr, "comma-separated origins that may receive tokens (the runtime serving /app/)")
	ttl := fs.Duration("token-ttl", time.Hour, "lifetime of the tokens it signs")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: APP_ENV=local turnledger runtime dev-issuer [flags]

Serve a local stand-in for the hosted auth provider (AUTH_MODE=hosted) on
loopback: sign-in and sign-up pages, EdDSA tokens with iss and aud = its
origin, its key set at /.well-known/jwks.json, and a redirect back with the
token in the URL fragment. No passwords: it refuses to start unless APP_ENV
is local. Point the runtime's HOSTED_AUTH_URL at the URL it prints.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil
		}
		return &exitCodeError{code: 2}
	}
	if fs.NArg() > 0 {
		return &exitCodeError{code: 2, msg: fmt.Sprintf("turnledger runtime dev-issuer: unexpected argument %q", fs.Arg(0))}
	}
	if env := getenv("APP_ENV"); env != "local" {
		return &exitCodeError{code: 1, msg: fmt.Sprintf("turnledger runtime dev-issuer: refusing to start: APP_ENV is %q, and the dev issuer signs in anyone without a password; it runs only with APP_ENV=local", env)}
	}
	host, _, err := net.SplitHostPort(*addr)
	if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		return &exitCodeError{code: 2, msg: fmt.Sprintf("turnledger runtime dev-issuer: --addr %q must be a loopback host:port", *addr)}
	}
	var origins []string
	for _, o := range strings.Split(*redirects, ",") {
		if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
			origins = append(origins, o)
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	origin := "http://" + ln.Addr().String()
	iss, err := devissuer.New(devissuer.Config{Origin: origin, RedirectOrigins: origins, TokenTTL: *ttl})
	if err != nil {
		ln.Close()
		return &exitCodeError{code: 2, msg: "turnledger runtime dev-issuer: " + err.Error()}
	}
	fmt.Fprintf(stdout, "turnledger dev-issuer: listening on %s (HOSTED_AUTH_URL=%s; tokens go to %s)\n", origin, origin, strings.Join(origins, ", "))
	return iss.Serve(ctx, ln)
}
