package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/turnledger/turnledger/deployconfig"
)

// exitCodeError carries an exit status and the message printed for it.
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string { return e.msg }
func (e *exitCodeError) ExitCode() int { return e.code }

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
		if help, err := parseFlags(fs, args[1:], stdout); help || err != nil {
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
		if help, err := parseFlags(fs, rest, stdout); help || err != nil {
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
	code, invalid, unreadable := 0, 0, 0
	for _, name := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		var data []byte
		if name == "-" {
			name = stdinName
			data, err = io.ReadAll(deployconfigStdin)
		} else {
			data, err = os.ReadFile(name)
		}
		if err != nil {
			fmt.Fprintf(stdout, "%s: cannot read: %v\n", name, unwrapPathError(err))
			code = 2
			unreadable++
			continue
		}
		problems, err := v.Validate(name, data)
		if err != nil {
			fmt.Fprintf(stdout, "%s:%v\n", name, err)
			code = 2
			unreadable++
			continue
		}
		if len(problems) == 0 {
			if !*quiet {
				fmt.Fprintf(stdout, "%s: valid\n", name)
			}
			continue
		}
		for _, p := range problems {
			fmt.Fprintf(stdout, "%s:%s\n", name, p)
		}
		invalid++
		if code == 0 {
			code = 1
		}
	}
	summary := fmt.Sprintf("%d of %d files invalid, %d unreadable", invalid, len(files), unreadable)
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
