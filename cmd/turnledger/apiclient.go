package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	tl "github.com/turnledger/turnledger/client"
	"github.com/turnledger/turnledger/serve"
)

// apiFlags are the flags of the subcommands that read the engine through
// its HTTP API with the admin token (feed, turns, agents).
type apiFlags struct {
	url, token, data, project string
}

func (a *apiFlags) register(fs *flag.FlagSet) {
	def := os.Getenv("TURNLEDGER_URL")
	if def == "" {
		def = "http://127.0.0.1:8000"
	}
	fs.StringVar(&a.url, "url", def, "base URL of turnledger serve (or TURNLEDGER_URL)")
	fs.StringVar(&a.token, "token", "", "admin bearer token (default: TURNLEDGER_ADMIN_TOKEN, else <data>/admin-token)")
	fs.StringVar(&a.data, "data", "./data", "data directory of the local serve, where its admin-token is kept")
	fs.StringVar(&a.project, "project", "", "project id (required)")
}

// client returns an admin client of the engine, with opts.
func (a *apiFlags) client(opts ...tl.Option) (*tl.Client, error) {
	if a.project == "" {
		return nil, fmt.Errorf("%w: --project is required", errUsage)
	}
	token, err := adminTokenFor(a.token, a.data)
	if err != nil {
		return nil, err
	}
	return tl.New(a.url, append([]tl.Option{tl.WithAdminToken(token), tl.WithUserAgent("turnledger-cli")}, opts...)...)
}

// adminTokenFor is the admin token to use: the one given, else
// TURNLEDGER_ADMIN_TOKEN, else the one serve keeps in <data>/admin-token.
func adminTokenFor(given, dataDir string) (string, error) {
	if given != "" {
		return given, nil
	}
	if t := os.Getenv("TURNLEDGER_ADMIN_TOKEN"); t != "" {
		return t, nil
	}
	t, err := serve.ReadAdminToken(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no admin token: pass --token, set TURNLEDGER_ADMIN_TOKEN, or run from the directory whose %s serve made", filepath.Join(dataDir, "admin-token"))
	}
	return t, err
}

// usage sets fs's usage text: the command line, what it does, the flags.
// It writes to fs.Output(), as parseFlags expects.
func (a *apiFlags) usage(fs *flag.FlagSet, line, what string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: turnledger %s\n\n%s\n\nFlags:\n", line, what)
		fs.PrintDefaults()
	}
}
