// Package cliflag is the flag plumbing of the turnledger command: the
// logger flags every service takes, flag parsing that prints help to
// standard output and names bad values plainly (a duration says it needs a
// unit), and the warning for a listener off loopback. Only cmd/turnledger
// uses it; it reads no environment or file.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// LogOptions are the logger flags every service (serve, runtime, monitor,
// catalogue) takes: --log-format text|json and --log-level
// debug|info|warn|error.
type LogOptions struct {
	format string
	level  string
}

// Register adds --log-format and --log-level to fs.
func (o *LogOptions) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.level, "log-level", "info", "lowest level logged: debug, info, warn or error")
}

// Logger returns the logger the options describe, writing to w.
func (o LogOptions) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level must be debug, info, warn or error, not %q", ErrUsage, o.level)
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(o.format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("%w: --log-format must be text or json, not %q", ErrUsage, o.format)
}

// Parse parses args with fs so that every problem is reported once:
// the flag package itself prints nothing; a bad flag comes back as a usage
// error (Main prints it, exit 2), and -h/--help prints the usage once, to
// stdout, and reports help. Usage functions must write to fs.Output().
func Parse(fs *flag.FlagSet, args []string, stdout io.Writer) (help bool, err error) {
	usage, out := fs.Usage, fs.Output()
	var durations []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok {
			if _, ok := g.Get().(time.Duration); ok {
				f.Value = durationFlag{g}
				durations = append(durations, f)
			}
		}
	})

	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err = fs.Parse(args)
	for _, f := range durations { // the usage text names their type "duration"
		f.Value = f.Value.(durationFlag).Getter
	}
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(out)
		return true, nil
	case err != nil:
		msg := err.Error()
		if strings.HasPrefix(msg, "invalid value ") {
			msg = strings.Replace(msg, " for flag -", " for flag --", 1)
		}
		return false, fmt.Errorf("%w: turnledger %s: %s (see turnledger %s --help)", ErrUsage, fs.Name(), msg, fs.Name())
	}
	return false, nil
}

// ErrUsage marks an error whose message is a usage text (exit status 2).
var ErrUsage = errors.New("usage")

// durationFlag is a duration flag whose bad values say what a duration
// looks like (the flag package says only "parse error").
type durationFlag struct{ flag.Getter }

func (d durationFlag) Set(s string) error {
	if d.Getter.Set(s) == nil {
		return nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return fmt.Errorf("a duration needs a unit, such as %ss or 2m", s)
	}
	return errors.New("not a duration: use a number and a unit, such as 30s, 2m or 1h30m")
}

// ParseInterspersed parses args with fs where flags may come before, between
// and after the positional arguments, and returns those in order.
func ParseInterspersed(fs *flag.FlagSet, args []string, stdout io.Writer) (positional []string, help bool, err error) {
	for rest := args; ; rest = fs.Args()[1:] {
		if help, err := Parse(fs, rest, stdout); help || err != nil {
			return nil, help, err
		}
		if fs.NArg() == 0 {
			return positional, false, nil
		}
		positional = append(positional, fs.Arg(0))
	}
}

// WarnIfNotLoopback warns when a service is told to listen beyond loopback.
func WarnIfNotLoopback(log *slog.Logger, addr string) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return // net.Listen reports it
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return
	}
	log.Warn("listening beyond loopback: the API is reachable from other machines; put it behind TLS and a firewall", "addr", addr)
}
