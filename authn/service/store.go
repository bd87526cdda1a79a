package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/boltstore"
	"github.com/turnledger/turnledger/authn/pgstore"
	bolt "go.etcd.io/bbolt"
)

// DefaultDBPath is the bbolt file used when neither --db nor DATABASE_URL
// is set.
const DefaultDBPath = "./data/runtime.db"

// DB is where the runtime's records live: a bbolt file (path) or a
// PostgreSQL database (url). Exactly one is set.
type DB struct {
	Path string
	URL  string
}

// String names the database for logs, without a password.
func (d DB) String() string {
	if d.URL == "" {
		return d.Path
	}
	return redactURL(d.URL)
}

// IsPostgresURL reports a postgres:// or postgresql:// URL.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// ResolveDB picks the database: the --db flag, else the database URL, else
// ./data/runtime.db. postgres:// and postgresql:// select PostgreSQL;
// bolt:<path>, bolt://<path> and a plain path select bbolt. A URL is never
// taken for a file name: any other value that starts like a URL (a scheme
// and a colon, with or without slashes) or reads as a keyword/value
// connection string ("host=db dbname=x") is refused, so a typing slip
// never makes a bbolt file named after a database address. A path that
// starts with "/", "./" or "../" is always a path.
func ResolveDB(flagValue, dbURL, name string) (DB, error) {
	v, from := flagValue, "--db"
	if v == "" {
		v, from = dbURL, name
	}
	if v == "" {
		return DB{Path: DefaultDBPath}, nil
	}
	if IsPostgresURL(v) {
		return DB{URL: v}, nil
	}
	if rest, ok := strings.CutPrefix(v, "bolt:"); ok {
		rest = strings.TrimPrefix(rest, "//")
		if rest == "" {
			return DB{}, fmt.Errorf("%s %q names no file", from, v)
		}
		return DB{Path: rest}, nil
	}
	t := strings.TrimSpace(v) // " postgres://…" is no file name either
	if m := urlScheme.FindStringSubmatch(t); m != nil {
		// The value is not printed: it may hold a password.
		switch strings.ToLower(m[1]) {
		case "postgres", "postgresql":
			return DB{}, fmt.Errorf("%s is a PostgreSQL address this runtime cannot read: write postgres://[user[:password]@]host[:port]/dbname, the scheme in lower case followed by //, without white space around it", from)
		case "bolt":
			return DB{}, fmt.Errorf("%s: write the bbolt scheme in lower case, bolt:<path>", from)
		}
		return DB{}, fmt.Errorf("%s scheme %q is not supported; use postgres://…, bolt:<path> or a file path (a file whose name starts with a word and a colon: bolt:<name> or ./<name>)", from, m[1])
	}
	if !strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "./") && !strings.HasPrefix(t, "../") && looksLikeDSN(t) {
		return DB{}, fmt.Errorf("%s looks like a keyword/value connection string (host=… dbname=…); write it as a URL, postgres://user@host:port/dbname?sslmode=…, or name a bbolt file with bolt:<path>", from)
	}
	return DB{Path: v}, nil
}

// urlScheme matches the start of a URL: a scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" or ".") and a colon.
var urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*):`)

// dsnPair matches a key=value pair of a libpq keyword/value connection
// string, at the start or after white space.
var dsnPair = regexp.MustCompile(`(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)\s*=`)

// dsnKeys are libpq connection parameters; one of them before "=" makes a
// value a connection string even without spaces ("dbname=turnledger").
var dsnKeys = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true,
	"password": true, "passfile": true, "sslmode": true, "sslcert": true,
	"sslkey": true, "sslrootcert": true, "sslpassword": true, "sslnegotiation": true,
	"connect_timeout": true, "application_name": true, "options": true,
	"service": true, "target_session_attrs": true, "channel_binding": true,
	"require_auth": true, "gssencmode": true, "krbsrvname": true,
	"client_encoding": true, "load_balance_hosts": true,
}

// looksLikeDSN reports a libpq keyword/value connection string: a pair
// whose key is a libpq parameter, or white space and any key=value pair.
func looksLikeDSN(v string) bool {
	pairs := dsnPair.FindAllStringSubmatch(v, -1)
	for _, p := range pairs {
		if dsnKeys[strings.ToLower(p[1])] {
			return true
		}
	}
	return len(pairs) > 0 && strings.ContainsAny(v, " \t\n")
}

// StoreCloser is a store the caller closes.
type StoreCloser interface {
	authn.Store
	Close() error
}

// OpenStore opens the runtime's store. On PostgreSQL, a
// DATABASE_ADMIN_URL (adminURL) first brings the schema up to date as its
// owner and grants the runtime role (the one DATABASE_URL logs in as) its
// privileges, so a fresh database needs nothing else; without one the
// schema must already be current and granted (`turnledger runtime migrate
// --grant-to`).
func OpenStore(ctx context.Context, db DB, adminURL string, logf func(string, ...any)) (StoreCloser, error) {
	if db.URL == "" {
		s, err := OpenBolt(db.Path)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if adminURL != "" {
		if !IsPostgresURL(adminURL) {
			return nil, fmt.Errorf("DATABASE_ADMIN_URL must be a postgres:// URL when DATABASE_URL is one")
		}
		applied, err := pgstore.Migrate(ctx, adminURL)
		if err != nil {
			return nil, fmt.Errorf("migrate through DATABASE_ADMIN_URL: %w", err)
		}
		if len(applied) > 0 {
			logf("turnledger runtime: applied schema migrations %v", applied)
		}
		if err := grantRuntimeRole(ctx, db.URL, adminURL, logf); err != nil {
			return nil, err
		}
	}
	return pgstore.Open(ctx, db.URL, pgstore.Options{})
}

// grantRuntimeRole gives the role DATABASE_URL (dbURL) logs in as the
// privileges of pgstore.Grants, through the owner's adminURL. Without them
// the runtime role cannot read a schema the runtime has just made. A role
// name Grant cannot take is left alone with a warning: the operator grants
// it by hand, and Open says so if they did not.
func grantRuntimeRole(ctx context.Context, dbURL, adminURL string, logf func(string, ...any)) error {
	role, err := pgstore.Role(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL (DATABASE_URL): %w", err)
	}
	if !pgstore.ValidRole(role) {
		logf("turnledger runtime: not granting the runtime's privileges to role %q (not a lower-case name); grant them by hand (docs/runtime.md)", role)
		return nil
	}
	if err := pgstore.Grant(ctx, adminURL, role); err != nil {
		return fmt.Errorf("grant the runtime's privileges to %s through DATABASE_ADMIN_URL: %w", role, err)
	}
	return nil
}

// IsMisconfigured reports a database that answers but must not be used as
// it is (an old schema, a role that escapes row-level security): the runtime
// stops on these even where a missing database is only a warning.
func IsMisconfigured(err error) bool {
	return errors.Is(err, pgstore.ErrSchema) || errors.Is(err, pgstore.ErrPrivileged)
}

// TenantAdmin is what `turnledger tenants` needs from a store.
type TenantAdmin interface {
	AddTenant(ctx context.Context, idpTenantID, plan string, now time.Time) (authn.Tenant, error)
	SetTenantStatus(ctx context.Context, ref, status string, now time.Time) (authn.Tenant, error)
	Tenants(ctx context.Context) ([]authn.Tenant, error)
	Close() error
}

// OpenTenantAdmin opens db for administration. PostgreSQL is migrated first,
// so the command works on a fresh database; it needs the schema owner's URL.
func OpenTenantAdmin(ctx context.Context, db DB) (TenantAdmin, error) {
	if db.URL == "" {
		s, err := OpenBolt(db.Path)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if _, err := pgstore.Migrate(ctx, db.URL); err != nil {
		return nil, fmt.Errorf("migrate %s (tenants needs the schema owner: DATABASE_ADMIN_URL): %w", db, err)
	}
	return pgstore.Open(ctx, db.URL, pgstore.Options{Admin: true})
}

// OpenBolt opens the bbolt store at path, waiting at most 2 s for another
// process's lock.
func OpenBolt(path string) (*boltstore.Store, error) {
	s, err := boltstore.Open(path, boltstore.Options{Timeout: 2 * time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("database %s is locked by another process (bbolt allows one writer process; stop the other `turnledger runtime` or `tenants` first)", path)
	}
	return s, err
}

// Migrate brings the PostgreSQL schema to this build's version as its owner
// (adminURL) and, when grantTo is not empty, grants that role the runtime's
// privileges, saying what it did on out.
func Migrate(ctx context.Context, adminURL, grantTo string, out io.Writer) error {
	applied, err := pgstore.Migrate(ctx, adminURL)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(out, "schema of %s is at version %d; nothing to apply\n", redactURL(adminURL), pgstore.SchemaVersion())
	} else {
		fmt.Fprintf(out, "schema of %s is at version %d (applied %v)\n", redactURL(adminURL), pgstore.SchemaVersion(), applied)
	}
	if grantTo != "" {
		if err := pgstore.Grant(ctx, adminURL, grantTo); err != nil {
			return err
		}
		fmt.Fprintf(out, "granted the runtime's privileges to %s\n", grantTo)
	}
	return nil
}
