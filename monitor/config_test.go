package monitor

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// validConfig is a configuration with every kind of connection, channel
// and check, all valid.
func validConfig() Config {
	cfg := DefaultConfig()
	cfg.DataPath = "/tmp/x/monitor.db"
	cfg.Connections = []ConnectionConfig{
		{ID: "db", Kind: KindPostgres, DSN: "postgres://monitor@127.0.0.1:5432/app?sslmode=disable", PasswordEnv: "DB_PW"},
		{ID: "db2", Kind: KindPostgres, DSN: "host=127.0.0.1 user=monitor dbname=app"},
		{ID: "engine", Kind: KindTurnledger, URL: "http://127.0.0.1:8000", AdminTokenEnv: "TL_ADMIN", Projects: []string{"p1"}},
		{ID: "spare", Kind: KindPostgres, DSN: "host=127.0.0.1"},
	}
	cfg.Channels = []ChannelConfig{
		{ID: "hook", Kind: ChannelWebhook, URL: "https://hooks.example.com/x", SecretEnv: "HOOK_SECRET"},
		{ID: "hook2", Kind: ChannelWebhook, URLEnv: "HOOK_URL"},
		{ID: "bus", Kind: ChannelNATS, URL: "nats://127.0.0.1:4222", Subject: "ops.alerts", TokenEnv: "NATS_TOKEN"},
		{ID: "log", Kind: ChannelLog},
	}
	cfg.Queries = []QueryConfig{
		{ID: "q1", Connection: "db", Query: "SELECT 1", Interval: Duration(time.Minute), Check: rowCount(">", 0), Channels: []string{"hook", "log"}},
		{ID: "q2", Connection: "engine", Query: EngineProjectionLag, Interval: Duration(time.Second), Timeout: Duration(time.Second), Check: Check{Kind: CheckValueRange, Column: "lag", Min: ptr(0.0), Max: ptr(5.0)}},
		{ID: "q3", Connection: "db2", Query: "SELECT 1", Interval: Duration(time.Hour), Check: Check{Kind: CheckQueryFails}},
	}
	cfg.Secrets = map[string]string{"DB_PW": "x", "TL_ADMIN": "x", "HOOK_SECRET": "x", "HOOK_URL": "https://hooks.example.com/secret", "NATS_TOKEN": "x"}
	return cfg
}

func TestValidateAcceptsAGoodConfig(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Errorf("Validate(valid config) = %v, want nil", err)
	}
}

// problems counts the problems Validate joined.
func problems(err error) int {
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		return len(j.Unwrap())
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestValidateRejectsEachProblem(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *Config)
	}{
		{"empty data path", func(c *Config) { c.DataPath = "" }},
		{"no clock", func(c *Config) { c.Now = nil }},
		{"zero webhook attempts", func(c *Config) { c.WebhookAttempts = 0 }},
		{"bad connection id", func(c *Config) { c.Connections[3].ID = "Bad Id" }},
		{"duplicate connection id", func(c *Config) { c.Connections[3].ID = "db" }},
		{"unknown connection kind", func(c *Config) { c.Connections[1].Kind = "mysql" }},
		{"password in a URL dsn", func(c *Config) { c.Connections[0].DSN = "postgres://monitor:hunter2@127.0.0.1/app" }},
		{"password in a URL dsn query", func(c *Config) { c.Connections[0].DSN = "postgres://monitor@127.0.0.1/app?password=hunter2" }},
		{"password in a keyword dsn", func(c *Config) { c.Connections[1].DSN = "host=127.0.0.1 password=hunter2" }},
		{"dsn that does not parse", func(c *Config) { c.Connections[1].DSN = "host=127.0.0.1 port=notaport" }},
		{"empty dsn", func(c *Config) { c.Connections[1].DSN = "" }},
		{"unset password variable", func(c *Config) { delete(c.Secrets, "DB_PW") }},
		{"url on a postgres connection", func(c *Config) { c.Connections[1].URL = "http://x" }},
		{"engine url not http", func(c *Config) { c.Connections[2].URL = "ftp://127.0.0.1" }},
		{"engine url with credentials", func(c *Config) { c.Connections[2].URL = "http://u:p@127.0.0.1" }},
		{"engine projects without a token", func(c *Config) { c.Connections[2].AdminTokenEnv = "" }},
		{"engine bad project id", func(c *Config) { c.Connections[2].Projects = []string{"a.b"} }},
		{"unset admin token variable", func(c *Config) { delete(c.Secrets, "TL_ADMIN") }},
		{"query on a missing connection", func(c *Config) { c.Queries[0].Connection = "nope" }},
		{"empty query", func(c *Config) { c.Queries[0].Query = "  " }},
		{"unknown engine check", func(c *Config) { c.Queries[1].Query = "SELECT 1" }},
		{"interval too short", func(c *Config) { c.Queries[0].Interval = Duration(500 * time.Millisecond) }},
		{"timeout too long", func(c *Config) { c.Queries[0].Timeout = Duration(time.Hour) }},
		{"duplicate query id", func(c *Config) { c.Queries[1].ID = "q1" }},
		{"unknown check kind", func(c *Config) { c.Queries[0].Check = Check{Kind: "regex"} }},
		{"row_count without value", func(c *Config) { c.Queries[0].Check.Value = nil }},
		{"row_count bad op", func(c *Config) { c.Queries[0].Check.Op = "=>" }},
		{"value_range without bounds", func(c *Config) { c.Queries[1].Check.Min, c.Queries[1].Check.Max = nil, nil }},
		{"value_range min above max", func(c *Config) { c.Queries[1].Check.Min = ptr(9.0) }},
		{"value_range without column", func(c *Config) { c.Queries[1].Check.Column = "" }},
		{"query_fails with an op", func(c *Config) { c.Queries[2].Check.Op = ">" }},
		{"query on a missing channel", func(c *Config) { c.Queries[0].Channels = []string{"nope"} }},
		{"duplicate channel id", func(c *Config) { c.Channels[1].ID = "hook" }},
		{"unknown channel kind", func(c *Config) { c.Channels[3].Kind = "email" }},
		{"webhook with url and url_env", func(c *Config) { c.Channels[0].URLEnv = "HOOK_URL" }},
		{"webhook url not http", func(c *Config) { c.Channels[0].URL = "mailto:x@example.com" }},
		{"webhook url variable not a URL", func(c *Config) { c.Secrets["HOOK_URL"] = "not a url" }},
		{"unset webhook secret variable", func(c *Config) { delete(c.Secrets, "HOOK_SECRET") }},
		{"nats url not nats", func(c *Config) { c.Channels[2].URL = "http://127.0.0.1:4222" }},
		{"nats wildcard subject", func(c *Config) { c.Channels[2].Subject = "ops.>" }},
		{"log channel with a url", func(c *Config) { c.Channels[3].URL = "http://x" }},
	} {
		cfg := validConfig()
		tc.edit(&cfg)
		if err := cfg.Validate(); problems(err) != 1 {
			t.Errorf("Validate(%s) = %v, want exactly one problem", tc.name, err)
		}
	}
	// Several problems are reported together.
	cfg := validConfig()
	cfg.DataPath = ""
	cfg.Queries[0].Connection = "nope"
	cfg.Channels[3].Kind = "email"
	if err := cfg.Validate(); problems(err) != 3 {
		t.Errorf("Validate(three problems) = %v, want all three", err)
	}
}

func TestParseFile(t *testing.T) {
	for _, in := range []string{``, `{`, `{"queries": [{"id": "a", "extra": 1}]}`, `{"connections": {}}`, `{"queries": [{"interval": 5}]}`, `{"queries": [{"interval": "soon"}]}`, `{} {}`} {
		if _, err := ParseFile([]byte(in)); err == nil {
			t.Errorf("ParseFile(%q) = nil error, want one", in)
		}
	}
	f, err := ParseFile([]byte(`{"connections":[{"id":"db","kind":"postgres","dsn":"host=x","password_env":"PW"}],
		"queries":[{"id":"q","connection":"db","query":"SELECT 1","interval":"90s","check":{"kind":"row_count","op":">","value":0}}],
		"channels":[{"id":"h","kind":"webhook","url_env":"HOOK","secret_env":"PW"}]}`))
	if err != nil {
		t.Fatalf("ParseFile = %v", err)
	}
	if got := time.Duration(f.Queries[0].Interval); got != 90*time.Second {
		t.Errorf("interval = %v, want 1m30s", got)
	}
	if diff := cmp.Diff([]string{"PW", "HOOK"}, f.SecretEnvNames()); diff != "" {
		t.Errorf("SecretEnvNames (-want +got):\n%s", diff)
	}
}

// The example configuration in docs/ parses and validates once its
// variables are set.
func TestExampleConfig(t *testing.T) {
	data, err := os.ReadFile("../docs/monitor.example.json")
	if err != nil {
		t.Fatalf("read example: %v", err)
	}
	f, err := ParseFile(data)
	if err != nil {
		t.Fatalf("ParseFile(example) = %v", err)
	}
	cfg := DefaultConfig()
	cfg.File = f
	for _, name := range f.SecretEnvNames() {
		cfg.Secrets[name] = "https://hooks.example.com/T000/B000/XXXX"
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate(example) = %v, want nil", err)
	}
	if len(f.Connections) < 2 || len(f.Queries) < 3 || len(f.Channels) < 3 {
		t.Errorf("example has %d connections, %d queries, %d channels; want an example of each kind", len(f.Connections), len(f.Queries), len(f.Channels))
	}
}
