package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/turnledger/turnledger/deployconfig"
	"github.com/turnledger/turnledger/internal/cliflag"
)

const deployconfigUsage = `Usage:
  turnledger deployconfig validate FILE...   check configuration files against the schema
  turnledger deployconfig schema             print the JSON Schema (draft-07)

validate prints "FILE: valid" or one line per problem,
"FILE:LINE:COLUMN: at \"/json/pointer\": message", and exits with
0 when every file is valid, 1 when some file is invalid, and 2 when some
file cannot be read or is not YAML or JSON (2 wins over 1).`

// runDeployconfig validates deployment configuration files or prints the schema.
func runDeployconfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, deployconfigUsage)
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, deployconfigUsage)
		return nil
	case "schema":
		fs := flag.NewFlagSet("deployconfig schema", flag.ContinueOnError)
		fs.SetOutput(stderr)
		fs.Usage = func() { fmt.Fprintln(fs.Output(), "Usage: turnledger deployconfig schema") }
		if help, err := cliflag.Parse(fs, args[1:], stdout); help || err != nil {
			return err
		}
		if fs.NArg() != 0 {
			return &exitCodeError{code: 2, msg: "turnledger deployconfig schema takes no arguments"}
		}
		_, err := stdout.Write(deployconfig.Schema())
		return err
	case "validate":
		return runDeployconfigValidate(ctx, args[1:], stdout, stderr)
	default:
		return fmt.Errorf("%w: unknown deployconfig command %q\n%s", errUsage, args[0], deployconfigUsage)
	}
}

// deployconfigStdin is what `deployconfig validate -` reads; tests replace it.
var deployconfigStdin io.Reader = os.Stdin

// stdinName is how problems of standard input name their file.
const stdinName = "<stdin>"

func runDeployconfigValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("deployconfig validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quiet := fs.Bool("quiet", false, "print nothing for valid files")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: turnledger deployconfig validate [--quiet] FILE...\n\nFlags may come before or after the files; - reads standard input, and\neverything after -- is a file.\n\nFlags:")
		fs.PrintDefaults()
	}
	// Flags may come anywhere among the files, as with most validators.
	var files []string
	for rest := args; len(rest) > 0; {
		if help, err := cliflag.Parse(fs, rest, stdout); help || err != nil {
			return err
		}
		left := fs.Args()
		if used := rest[:len(rest)-len(left)]; len(used) > 0 && used[len(used)-1] == "--" {
			files = append(files, left...)
			break
		}
		if len(left) == 0 {
			break
		}
		files, rest = append(files, left[0]), left[1:]
	}
	if len(files) == 0 {
		return fmt.Errorf("%w: turnledger deployconfig validate: no FILE given (see turnledger deployconfig validate --help)", errUsage)
	}
	v, err := deployconfig.New()
	if err != nil {
		return err
	}
	read := func(name string) (string, []byte, error) {
		if name == "-" {
			data, err := io.ReadAll(deployconfigStdin)
			return stdinName, data, err
		}
		data, err := os.ReadFile(name)
		return name, data, unwrapPathError(err)
	}
	code, summary, err := v.ValidateFiles(ctx, files, read, *quiet, stdout)
	if err != nil {
		return err
	}
	switch code {
	case 0:
		return nil
	case 1:
		return &exitCodeError{code: 1, msg: summary}
	default:
		return &exitCodeError{code: 2, msg: summary}
	}
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
