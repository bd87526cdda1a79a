package service

import "testing"

func TestResolveDB(t *testing.T) {
	cases := []struct {
		flag, url string
		want      DB
	}{
		{"x.db", "bolt:/ignored.db", DB{Path: "x.db"}},
		{"", "", DB{Path: "./data/runtime.db"}},
		{"", "bolt:///var/lib/rt.db", DB{Path: "/var/lib/rt.db"}},
		{"", "bolt:data/rt.db", DB{Path: "data/rt.db"}},
		{"", "bolt://data/rt.db", DB{Path: "data/rt.db"}},
		{"", "bolt:postgres:/x", DB{Path: "postgres:/x"}},
		{"", "bolt:host=a.db", DB{Path: "host=a.db"}},
		{"", "/srv/rt.db", DB{Path: "/srv/rt.db"}},
		{"", "./postgres:x.db", DB{Path: "./postgres:x.db"}},
		{"", "/srv/host=a dbname=b.db", DB{Path: "/srv/host=a dbname=b.db"}},
		{"", "./host=a dbname=b.db", DB{Path: "./host=a dbname=b.db"}},
		{"", "data/rt-2026=01.db", DB{Path: "data/rt-2026=01.db"}},
		{"", "1:2.db", DB{Path: "1:2.db"}},
		{"", "postgres://rt@db/turnledger", DB{URL: "postgres://rt@db/turnledger"}},
		{"postgresql://rt@db/x", "bolt:/ignored.db", DB{URL: "postgresql://rt@db/x"}},
	}
	for _, tc := range cases {
		got, err := ResolveDB(tc.flag, tc.url, "DATABASE_URL")
		if err != nil || got != tc.want {
			t.Errorf("ResolveDB(%q, %q) = %+v, %v, want %+v", tc.flag, tc.url, got, err, tc.want)
		}
	}
	// A database address is never a file name: whatever looks like a URL
	// (a scheme and a colon) or a keyword/value connection string is
	// PostgreSQL when it is postgres:// or postgresql://, and refused
	// otherwise.
	for _, bad := range []string{
		"mysql://x", "bolt:", "bolt://", "Postgres://x/y", "POSTGRESQL://x/y",
		"postgres:/x", "postgres:x", "postgresql:/db", "postgresql:x", "postgres:", "Bolt:x.db",
		"mysql:x", "sqlite:rt.db", "file:rt.db", "file:///srv/rt.db", "s3+https:bucket", "a.b-c:x",
		" postgres://rt@db/x", "\tpostgres:/x",
		"host=db dbname=turnledger", "dbname=turnledger", "host=/var/run/postgresql",
		"user=rt password=secret host=db", "HOST=db", "sslmode = disable",
		"foo=1 bar=2", "service=turnledger", "rt host=a.db",
	} {
		if got, err := ResolveDB("", bad, "DATABASE_URL"); err == nil {
			t.Errorf("ResolveDB(%q) = %+v, nil error, want one", bad, got)
		}
		if got, err := ResolveDB(bad, "", "DATABASE_URL"); err == nil {
			t.Errorf("ResolveDB(--db %q) = %+v, nil error, want one", bad, got)
		}
	}
}
