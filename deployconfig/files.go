package deployconfig

import (
	"context"
	"fmt"
	"io"
)

// ValidateFiles validates the files in order, reading each with read (which
// also gives the name to report it by), and writes to out "NAME: valid"
// (unless quiet), one line per problem, or one line for a file that cannot
// be read or is not YAML or JSON. It returns the exit status of `turnledger
// deployconfig validate` — 0 when every file is valid, 1 when some file is
// invalid, 2 when some file cannot be read or parsed (2 wins over 1) — and a
// summary line.
func (v *Validator) ValidateFiles(ctx context.Context, files []string, read func(name string) (string, []byte, error), quiet bool, out io.Writer) (code int, summary string, err error) {
	invalid, unreadable := 0, 0
	for _, name := range files {
		if err := ctx.Err(); err != nil {
			return 0, "", err
		}
		name, data, err := read(name)
		if err != nil {
			fmt.Fprintf(out, "%s: cannot read: %v\n", name, err)
			code = 2
			unreadable++
			continue
		}
		problems, err := v.Validate(name, data)
		if err != nil {
			fmt.Fprintf(out, "%s:%v\n", name, err)
			code = 2
			unreadable++
			continue
		}
		if len(problems) == 0 {
			if !quiet {
				fmt.Fprintf(out, "%s: valid\n", name)
			}
			continue
		}
		for _, p := range problems {
			fmt.Fprintf(out, "%s:%s\n", name, p)
		}
		invalid++
		if code == 0 {
			code = 1
		}
	}
	return code, fmt.Sprintf("%d of %d files invalid, %d unreadable", invalid, len(files), unreadable), nil
}
