package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnledger/turnledger/internal/jsonhttp"
)

// File is the configuration file: what to watch, how, and whom to tell. It
// names the environment variables holding secrets; it never holds a secret.
type File struct {
	Connections []ConnectionConfig `json:"connections"`
	Queries     []QueryConfig      `json:"queries"`
	Channels    []ChannelConfig    `json:"channels"`
}

// ConnectionConfig is one database or engine the queries run against.
type ConnectionConfig struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"` // "postgres" or "turnledger"
	Description string `json:"description,omitempty"`

	// postgres: a connection string without a password (URL or key=value
	// form), and the environment variable holding the password, if any.
	DSN         string `json:"dsn,omitempty"`
	PasswordEnv string `json:"password_env,omitempty"`

	// turnledger: the engine's base URL, the variable holding an admin
	// token, and the projects whose Turns are watched.
	URL           string   `json:"url,omitempty"`
	AdminTokenEnv string   `json:"admin_token_env,omitempty"`
	Projects      []string `json:"projects,omitempty"`
}

// QueryConfig is one monitored query.
type QueryConfig struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	Connection  string `json:"connection"`
	// Query is SQL for a postgres connection, or the name of a check for a
	// turnledger connection (see EngineChecks).
	Query    string   `json:"query"`
	Interval Duration `json:"interval"`
	// Timeout bounds one run; zero means DefaultQueryTimeout.
	Timeout Duration `json:"timeout,omitempty"`
	Check   Check    `json:"check"`
	// Channels to notify; empty means every channel.
	Channels []string `json:"channels,omitempty"`
	// Paused queries are not scheduled; they can still be run by hand.
	Paused bool `json:"paused,omitempty"`
}

// ChannelConfig is one notification channel.
type ChannelConfig struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // "webhook", "nats" or "log"

	// webhook: the URL, or the variable holding it (for URLs that are
	// themselves secrets), and the variable holding the signing secret.
	// nats: the server URL and the subject, and the variable holding a token.
	URL       string `json:"url,omitempty"`
	URLEnv    string `json:"url_env,omitempty"`
	SecretEnv string `json:"secret_env,omitempty"`
	Subject   string `json:"subject,omitempty"`
	TokenEnv  string `json:"token_env,omitempty"`
}

// Duration is a time.Duration written in JSON as a Go duration string
// such as "30s" or "5m".
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"30s\" or \"5m\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as \"30s\" or \"5m\"", s)
	}
	*d = Duration(v)
	return nil
}

// ParseFile decodes a configuration file strictly: unknown fields and
// trailing data are errors. It does not validate; Config.Validate does.
func ParseFile(data []byte) (File, error) {
	var f File
	if err := jsonhttp.DecodeBytes(data, &f); err != nil {
		return File{}, errors.New(strings.Replace(err.Error(), "request body", "configuration", 1))
	}
	return f, nil
}

// SecretEnvNames lists the environment variables the file names, so that the
// caller can read them into Config.Secrets.
func (f File) SecretEnvNames() []string {
	var names []string
	add := func(s string) {
		if s != "" && !slices.Contains(names, s) {
			names = append(names, s)
		}
	}
	for _, c := range f.Connections {
		add(c.PasswordEnv)
		add(c.AdminTokenEnv)
	}
	for _, c := range f.Channels {
		add(c.URLEnv)
		add(c.SecretEnv)
		add(c.TokenEnv)
	}
	return names
}

// Defaults and bounds.
const (
	DefaultAddr         = "127.0.0.1:5000"
	DefaultDataPath     = "data/monitor.db"
	DefaultQueryTimeout = 30 * time.Second
	MinInterval         = time.Second
	MaxTimeout          = 10 * time.Minute
	DefaultStatsDays    = 7
	MaxStatsDays        = 90
)

// Config is everything a Monitor needs. Only the command reads files and the
// environment; it hands the results over here.
type Config struct {
	File
	// Secrets holds the values of the environment variables the file
	// names, by name. A named variable missing here is a configuration error.
	Secrets map[string]string
	// DataPath is the bbolt file keeping errors and run history.
	DataPath string

	Now        func() time.Time
	Sleep      func(ctx context.Context, d time.Duration) error
	Logger     *slog.Logger
	HTTPClient *http.Client

	// Webhook deliveries are tried WebhookAttempts times, waiting
	// WebhookBackoff, then twice as long each time, up to WebhookMaxBackoff.
	WebhookAttempts   int
	WebhookBackoff    time.Duration
	WebhookMaxBackoff time.Duration
}

// DefaultConfig returns a Config with the real clock and no queries.
func DefaultConfig() Config {
	return Config{
		Secrets:           map[string]string{},
		DataPath:          DefaultDataPath,
		Now:               time.Now,
		Sleep:             sleepContext,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		HTTPClient:        &http.Client{Timeout: 30 * time.Second},
		WebhookAttempts:   5,
		WebhookBackoff:    time.Second,
		WebhookMaxBackoff: 30 * time.Second,
	}
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// subjectPattern allows NATS subject tokens without wildcards.
var subjectPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	secret := func(owner, name string) {
		if name == "" {
			return
		}
		if _, ok := c.Secrets[name]; !ok {
			bad("%s: environment variable %s is not set", owner, name)
		}
	}
	if c.DataPath == "" {
		bad("data path is empty")
	}
	if c.Now == nil || c.Sleep == nil || c.Logger == nil || c.HTTPClient == nil {
		bad("Now, Sleep, Logger and HTTPClient must be set (start from DefaultConfig)")
	}
	if c.WebhookAttempts < 1 || c.WebhookBackoff < 0 || c.WebhookMaxBackoff < c.WebhookBackoff {
		bad("webhook retries: attempts must be at least 1 and 0 <= backoff <= max backoff")
	}

	conns := map[string]string{}
	for i, cc := range c.Connections {
		owner := fmt.Sprintf("connections[%d]", i)
		if !idPattern.MatchString(cc.ID) {
			bad("%s: id %q must match %s", owner, cc.ID, idPattern)
		} else if _, dup := conns[cc.ID]; dup {
			bad("%s: id %q is used twice", owner, cc.ID)
		} else {
			owner = fmt.Sprintf("connection %q", cc.ID)
		}
		conns[cc.ID] = cc.Kind
		switch cc.Kind {
		case KindPostgres:
			if cc.URL != "" || cc.AdminTokenEnv != "" || len(cc.Projects) > 0 {
				bad("%s: url, admin_token_env and projects belong to turnledger connections", owner)
			}
			if err := checkDSN(cc.DSN); err != nil {
				bad("%s: %v", owner, err)
			}
			secret(owner, cc.PasswordEnv)
		case KindTurnledger:
			if cc.DSN != "" || cc.PasswordEnv != "" {
				bad("%s: dsn and password_env belong to postgres connections", owner)
			}
			if u, err := url.Parse(cc.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				bad("%s: url %q must be an http(s) URL without credentials", owner, cc.URL)
			}
			for _, p := range cc.Projects {
				if !subjectPattern.MatchString(p) || strings.Contains(p, ".") {
					bad("%s: project id %q is not a valid id", owner, p)
				}
			}
			if len(cc.Projects) > 0 && cc.AdminTokenEnv == "" {
				bad("%s: admin_token_env is required to read the Turns of projects", owner)
			}
			secret(owner, cc.AdminTokenEnv)
		default:
			bad("%s: kind %q must be %q or %q", owner, cc.Kind, KindPostgres, KindTurnledger)
		}
	}

	chans := map[string]bool{}
	for i, ch := range c.Channels {
		owner := fmt.Sprintf("channels[%d]", i)
		if !idPattern.MatchString(ch.ID) {
			bad("%s: id %q must match %s", owner, ch.ID, idPattern)
		} else if chans[ch.ID] {
			bad("%s: id %q is used twice", owner, ch.ID)
		} else {
			owner = fmt.Sprintf("channel %q", ch.ID)
		}
		chans[ch.ID] = true
		switch ch.Kind {
		case ChannelWebhook:
			if (ch.URL == "") == (ch.URLEnv == "") {
				bad("%s: exactly one of url and url_env is required", owner)
			}
			raw := ch.URL
			if ch.URLEnv != "" {
				secret(owner, ch.URLEnv)
				raw = c.Secrets[ch.URLEnv]
			}
			if u, err := url.Parse(raw); raw != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
				bad("%s: the webhook URL must be an absolute http(s) URL", owner)
			}
			secret(owner, ch.SecretEnv)
			if ch.Subject != "" || ch.TokenEnv != "" {
				bad("%s: subject and token_env belong to nats channels", owner)
			}
		case ChannelNATS:
			if u, err := url.Parse(ch.URL); err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" || u.User != nil {
				bad("%s: url %q must be a nats:// or tls:// URL without credentials", owner, ch.URL)
			}
			if !subjectPattern.MatchString(ch.Subject) {
				bad("%s: subject %q must be dot-separated tokens without wildcards", owner, ch.Subject)
			}
			secret(owner, ch.TokenEnv)
			if ch.URLEnv != "" || ch.SecretEnv != "" {
				bad("%s: url_env and secret_env belong to webhook channels", owner)
			}
		case ChannelLog:
			if ch.URL != "" || ch.URLEnv != "" || ch.SecretEnv != "" || ch.Subject != "" || ch.TokenEnv != "" {
				bad("%s: a log channel takes no other fields", owner)
			}
		default:
			bad("%s: kind %q must be %q, %q or %q", owner, ch.Kind, ChannelWebhook, ChannelNATS, ChannelLog)
		}
	}

	queries := map[string]bool{}
	for i, q := range c.Queries {
		owner := fmt.Sprintf("queries[%d]", i)
		if !idPattern.MatchString(q.ID) {
			bad("%s: id %q must match %s", owner, q.ID, idPattern)
		} else if queries[q.ID] {
			bad("%s: id %q is used twice", owner, q.ID)
		} else {
			owner = fmt.Sprintf("query %q", q.ID)
		}
		queries[q.ID] = true
		kind, ok := conns[q.Connection]
		if !ok {
			bad("%s: connection %q is not configured", owner, q.Connection)
		}
		if strings.TrimSpace(q.Query) == "" {
			bad("%s: query is empty", owner)
		} else if ok && kind == KindTurnledger {
			if _, _, err := ParseEngineQuery(q.Query); err != nil {
				bad("%s: %v", owner, err)
			}
		}
		if time.Duration(q.Interval) < MinInterval {
			bad("%s: interval %v must be at least %v", owner, time.Duration(q.Interval), MinInterval)
		}
		if q.Timeout < 0 || time.Duration(q.Timeout) > MaxTimeout {
			bad("%s: timeout %v must be between 0 (default %v) and %v", owner, time.Duration(q.Timeout), DefaultQueryTimeout, MaxTimeout)
		}
		if err := q.Check.validate(); err != nil {
			bad("%s: check: %v", owner, err)
		}
		for _, ch := range q.Channels {
			if !chans[ch] {
				bad("%s: channel %q is not configured", owner, ch)
			}
		}
	}
	return errors.Join(errs...)
}

// checkDSN accepts a connection string that parses and holds no password.
func checkDSN(dsn string) error {
	if strings.TrimSpace(dsn) == "" {
		return errors.New("dsn is empty")
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return errors.New("dsn is not a valid URL")
		}
		if _, has := u.User.Password(); has || u.Query().Has("password") {
			return errors.New("dsn must not hold a password: name the variable holding it in password_env")
		}
	} else if regexp.MustCompile(`(^|\s)password\s*=`).MatchString(dsn) {
		return errors.New("dsn must not hold a password: name the variable holding it in password_env")
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return errors.New("dsn does not parse as a PostgreSQL connection string")
	}
	return nil
}

// timeout is the query's run bound.
func (q QueryConfig) timeout() time.Duration {
	if q.Timeout == 0 {
		return DefaultQueryTimeout
	}
	return time.Duration(q.Timeout)
}
