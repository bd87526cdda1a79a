package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/turnledger/turnledger/internal/cliflag"
	"github.com/turnledger/turnledger/ledger"
	"github.com/turnledger/turnledger/serve"
)

// runArchive runs `turnledger archive ls|verify|cat`: it reads the archive
// segments a serve with --retain-finished wrote below its horizon
// (docs/retention.md has their format). It only reads, so it may run while
// serve writes new segments.
func runArchive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usageLine = "turnledger archive ls|verify|cat [flags]"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		if len(args) == 0 {
			return fmt.Errorf("%w: usage: %s", errUsage, usageLine)
		}
		fmt.Fprintln(stdout, "Usage: "+usageLine)
		fmt.Fprintln(stdout, "\n  ls      list the segments: name, first and last ledger_seq, bytes")
		fmt.Fprintln(stdout, "  verify  check every segment against its checksum and decode every event")
		fmt.Fprintln(stdout, "  cat     print the archived events as JSON Lines (--after, --until)")
		return nil
	}
	sub := args[0]
	fs := flag.NewFlagSet("archive "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data", "./data", "data directory of the turnledger serve whose archive to read")
	dir := fs.String("dir", "", "the archive directory itself (default <data>/archive), or nats://<bucket> for an archive in a NATS object store bucket (with --nats-url)")
	natsURL := fs.String("nats-url", "nats://127.0.0.1:4222", "the NATS server of an archive in an object store bucket")
	var after, until *uint64
	if sub == "cat" {
		after = fs.Uint64("after", 0, "print the events after this ledger_seq")
		until = fs.Uint64("until", 0, "print the events up to this ledger_seq (0: to the end)")
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: turnledger archive %s [flags]\n\nFlags:\n", sub)
		fs.PrintDefaults()
	}
	switch sub {
	case "ls", "verify", "cat":
	default:
		return fmt.Errorf("%w: unknown archive command %q: usage: %s", errUsage, sub, usageLine)
	}
	if help, err := cliflag.Parse(fs, args[1:], stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: archive %s takes no arguments", errUsage, sub)
	}
	path := *dir
	if path == "" {
		path = filepath.Join(*dataDir, "archive")
	}
	var a *ledger.Archive
	var err error
	if bucket, ok := ledger.IsObjectArchive(path); ok {
		nc, cerr := nats.Connect(*natsURL, nats.Name("turnledger archive"))
		if cerr != nil {
			return fmt.Errorf("turnledger archive: connect to %s: %w", serve.RedactURLs(*natsURL), cerr)
		}
		defer nc.Close()
		js, jerr := jetstream.New(nc)
		if jerr != nil {
			return jerr
		}
		a, err = ledger.ReadObjectArchive(ctx, js, bucket)
	} else {
		a, err = ledger.ReadArchive(path)
	}
	if err != nil {
		return err
	}
	segs, err := a.Segments()
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	switch sub {
	case "ls":
		var total int64
		for _, s := range segs {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", s.Name, s.First, s.Last, s.Bytes)
			total += s.Bytes
		}
		fmt.Fprintf(w, "%d segments, %d bytes\n", len(segs), total)
	case "verify":
		var bad []error
		events := 0
		for _, s := range segs {
			n, err := a.Verify(s)
			events += n
			if err != nil {
				fmt.Fprintf(w, "%s\tDAMAGED\t%v\n", s.Name, err)
				bad = append(bad, err)
				continue
			}
			fmt.Fprintf(w, "%s\tok\t%d events\n", s.Name, n)
		}
		// The archive holds every event from ledger_seq 1 on: segments
		// follow one another without overlap or gap.
		var prev uint64
		for _, s := range segs {
			var err error
			switch {
			case s.First <= prev:
				err = fmt.Errorf("%w: %s overlaps the segment before it (which ends at %d)", ledger.ErrArchiveDamaged, s.Name, prev)
			case s.First > prev+1:
				err = fmt.Errorf("%w: ledger_seq %d to %d are in no segment (before %s)", ledger.ErrArchiveDamaged, prev+1, s.First-1, s.Name)
			}
			if err != nil {
				fmt.Fprintf(w, "%s\tDAMAGED\t%v\n", s.Name, err)
				bad = append(bad, err)
			}
			prev = s.Last
		}
		if len(bad) > 0 {
			w.Flush()
			return &exitCodeError{code: 1, msg: fmt.Sprintf("turnledger archive verify: %d of %d segments damaged", len(bad), len(segs))}
		}
		fmt.Fprintf(w, "%d segments, %d events: ok\n", len(segs), events)
	case "cat":
		enc := json.NewEncoder(w)
		errEnough := errors.New("enough")
		err := a.Lines(*after, func(l ledger.ArchiveLine) error {
			if *until != 0 && l.LedgerSeq > *until {
				return errEnough
			}
			return enc.Encode(l)
		})
		if err != nil && !errors.Is(err, errEnough) {
			return err
		}
	}
	return nil
}
