package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turnledger/turnledger/catalogue"
	"github.com/turnledger/turnledger/internal/cliflag"
)

// catalogueStdin is where `catalogue hash-key` reads the key; tests replace it.
var catalogueStdin io.Reader = os.Stdin

const catalogueKeysEnv = "CATALOGUE_PARTNER_KEYS"

// runCatalogue serves the partner subcategory listing, or runs one of its
// helpers: hash-key, new-key, sample.
func runCatalogue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "hash-key":
			return catalogueHashKey(args[1:], stdout, stderr)
		case "new-key":
			return catalogueNewKey(args[1:], stdout, stderr)
		case "sample":
			_, err := stdout.Write(catalogue.SampleJSON())
			return err
		}
	}
	fs := flag.NewFlagSet("catalogue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8040", "address to listen on")
	data := fs.String("data", "", "catalogue file (JSON, see docs/catalogue.md); default: the embedded sample")
	keys := fs.String("keys", "", "file of partner key hashes, one sha256:<hex> a line; default: $"+catalogueKeysEnv)
	baseURL := fs.String("base-url", "", "absolute URL that localized paths are joined to for canonicalUrl; default: http://ADDR")
	var logOpts cliflag.LogOptions
	logOpts.Register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage:
  turnledger catalogue [flags]          serve GET /api/public/v2/subcategories
  turnledger catalogue hash-key         read a partner key on stdin, print its hash for the key file
  turnledger catalogue new-key          draw a new partner key; print it and its hash
  turnledger catalogue sample           print the embedded sample catalogue (a template for --data)

Environment:
  `+catalogueKeysEnv+`  partner key hashes, separated by commas (used when --keys is not given)

Flags:`)
		fs.PrintDefaults()
	}
	if help, err := cliflag.Parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return &exitCodeError{code: 2, msg: fmt.Sprintf("turnledger catalogue: unexpected argument %q", fs.Arg(0))}
	}
	logger, err := logOpts.Logger(stderr)
	if err != nil {
		return err
	}

	cfg := catalogue.DefaultConfig()
	if *data != "" {
		b, err := os.ReadFile(*data)
		if err != nil {
			return err
		}
		c, err := catalogue.Parse(b)
		if err != nil {
			return fmt.Errorf("%s: %w", *data, err)
		}
		cfg.Catalogue = c
	}
	switch {
	case *keys != "":
		b, err := os.ReadFile(*keys)
		if err != nil {
			return err
		}
		if cfg.Keys, err = catalogue.ParseKeyFile(*keys, b); err != nil {
			return err
		}
	case os.Getenv(catalogueKeysEnv) != "":
		var err error
		if cfg.Keys, err = catalogue.ParseKeyList(catalogueKeysEnv, os.Getenv(catalogueKeysEnv)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("no partner keys: give --keys FILE or set %s (make hashes with 'turnledger catalogue hash-key')", catalogueKeysEnv)
	}

	cliflag.WarnIfNotLoopback(logger, *addr)
	cfg.BaseURL = *baseURL
	return catalogue.ListenAndServe(ctx, cfg, *addr, logger, stderr)
}

func catalogueHashKey(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("catalogue hash-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	label := fs.String("label", "", "label written after the hash (e.g. the partner's name)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: turnledger catalogue hash-key [--label NAME] < key\n\nReads one partner key (the first line of stdin; never an argument, which\nwould stay in the shell history) and prints the line for the key file.")
		fs.PrintDefaults()
	}
	if help, err := cliflag.Parse(fs, args, stdout); help || err != nil {
		return err
	}
	line, err := bufio.NewReader(catalogueStdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	key := strings.TrimSpace(line)
	if key == "" {
		return &exitCodeError{code: 2, msg: "turnledger catalogue hash-key: no key on stdin"}
	}
	// The hash, then the label when there is one.
	fmt.Fprintln(stdout, strings.TrimSpace(catalogue.HashKey(key).String()+"  "+strings.TrimSpace(*label)))
	return nil
}

func catalogueNewKey(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("catalogue new-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if help, err := cliflag.Parse(fs, args, stdout); help || err != nil {
		return err
	}
	key, err := catalogue.NewKey(rand.Reader)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key:  %s\nhash: %s\n", key, catalogue.HashKey(key))
	fmt.Fprintln(stderr, "Give the key to the partner once; keep only the hash (add it to the --keys file).")
	return nil
}
