package monitor

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/turnledger/turnledger/internal/pgtest"
)

// shop is a real PostgreSQL database with an orders table: two orders
// stuck in "pending", one "shipped".
func shop(t *testing.T) string {
	t.Helper()
	dsn := pgtest.New(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, `
		CREATE TABLE orders (
			id uuid PRIMARY KEY, status text NOT NULL, total numeric(10,2) NOT NULL,
			qty int NOT NULL, placed_at timestamptz NOT NULL, note bytea);
		INSERT INTO orders VALUES
			('11111111-2222-3333-4444-555555555555', 'pending', 12.50, 2, '2026-03-01 10:00:00+00', 'gift'),
			('21111111-2222-3333-4444-555555555555', 'pending', 99.99, 1, '2026-03-02 11:30:00+00', NULL),
			('31111111-2222-3333-4444-555555555555', 'shipped', 5.00, 7, '2026-03-03 09:15:00+00', '\xff00')`)
	if err != nil {
		t.Fatalf("create orders: %v", err)
	}
	return dsn
}

func pgConfig(t *testing.T, c *clock, dsn string, queries ...QueryConfig) Config {
	t.Helper()
	cfg := testConfig(t, c, nil)
	cfg.Connections = []ConnectionConfig{{ID: "shop", Kind: KindPostgres, DSN: dsn}}
	cfg.Queries = queries
	return cfg
}

func rowCount(op string, v float64) Check { return Check{Kind: CheckRowCount, Op: op, Value: &v} }

func TestPostgresQueriesPassAndFail(t *testing.T) {
	dsn := shop(t)
	c := newClock()
	m := open(t, pgConfig(t, c, dsn,
		QueryConfig{ID: "no-pending", Connection: "shop", Query: "SELECT id FROM orders WHERE status = 'pending'", Interval: Duration(time.Minute), Check: rowCount(">", 0)},
		QueryConfig{ID: "no-lost", Connection: "shop", Query: "SELECT id FROM orders WHERE status = 'lost'", Interval: Duration(time.Minute), Check: rowCount(">", 0)},
		QueryConfig{ID: "qty-sane", Connection: "shop", Query: "SELECT qty FROM orders", Interval: Duration(time.Minute), Check: Check{Kind: CheckValueRange, Column: "qty", Min: ptr(1.0), Max: ptr(5.0)}},
		QueryConfig{ID: "totals-sane", Connection: "shop", Query: "SELECT total FROM orders", Interval: Duration(time.Minute), Check: Check{Kind: CheckValueRange, Column: "total", Max: ptr(100.0)}},
		QueryConfig{ID: "bad-sql", Connection: "shop", Query: "SELECT nope FROM orders", Interval: Duration(time.Minute), Check: Check{Kind: CheckQueryFails}},
		QueryConfig{ID: "writes", Connection: "shop", Query: "DELETE FROM orders RETURNING id", Interval: Duration(time.Minute), Check: Check{Kind: CheckQueryFails}},
		QueryConfig{ID: "slow", Connection: "shop", Query: "SELECT pg_sleep(10)", Interval: Duration(time.Minute), Timeout: Duration(200 * time.Millisecond), Check: Check{Kind: CheckQueryFails}},
	))
	for _, tc := range []struct {
		id         string
		wantPassed bool
		wantRows   int
		wantReason string
	}{
		{"no-pending", false, 2, "row count 2 > 0"},
		{"no-lost", true, 0, "row count 0, fails when > 0"},
		{"qty-sane", false, 3, "row 3: qty = 7 is above the maximum 5"},
		{"totals-sane", true, 3, "total within range in 3 rows"},
	} {
		out, err := m.RunQuery(context.Background(), tc.id, TriggerManual)
		if err != nil {
			t.Fatalf("RunQuery(%s) = %v", tc.id, err)
		}
		got := []any{out.Run.Passed, out.Run.RowCount, out.Run.Reason}
		if diff := cmp.Diff([]any{tc.wantPassed, tc.wantRows, tc.wantReason}, got); diff != "" {
			t.Errorf("RunQuery(%s) passed, rows, reason (-want +got):\n%s", tc.id, diff)
		}
		if (out.Error != nil) == tc.wantPassed {
			t.Errorf("RunQuery(%s).Error = %+v, want an error only when the check fails", tc.id, out.Error)
		}
	}
	for _, id := range []string{"bad-sql", "writes", "slow"} {
		out, err := m.RunQuery(context.Background(), id, TriggerManual)
		if err != nil {
			t.Fatalf("RunQuery(%s) = %v", id, err)
		}
		if out.Run.Passed || !strings.HasPrefix(out.Run.Reason, "query failed: ") || out.Error == nil {
			t.Errorf("RunQuery(%s) = passed %v, reason %q, error %v; want a failed query that opens an error", id, out.Run.Passed, out.Run.Reason, out.Error)
		}
	}
	// The DELETE ran in a read-only transaction: every order is still there.
	out, err := m.RunQuery(context.Background(), "qty-sane", TriggerManual)
	if err != nil || out.Run.RowCount != 3 {
		t.Errorf("orders after the DELETE query = %d (%v), want 3", out.Run.RowCount, err)
	}
}

func TestPostgresResultValuesAreJSON(t *testing.T) {
	dsn := shop(t)
	m := open(t, pgConfig(t, newClock(), dsn, QueryConfig{ID: "q", Connection: "shop", Interval: Duration(time.Minute), Check: Check{Kind: CheckQueryFails},
		Query: "SELECT id, status, total, qty, placed_at, note, NULL::int AS nothing, 1.5::float8 AS f FROM orders ORDER BY id"}))
	out, err := m.RunQuery(context.Background(), "q", TriggerManual)
	if err != nil {
		t.Fatalf("RunQuery = %v", err)
	}
	want := Result{
		Columns: []string{"id", "status", "total", "qty", "placed_at", "note", "nothing", "f"},
		Rows: []map[string]any{
			{"id": "11111111-2222-3333-4444-555555555555", "status": "pending", "total": 12.5, "qty": int64(2), "placed_at": "2026-03-01T10:00:00Z", "note": "gift", "nothing": nil, "f": 1.5},
			{"id": "21111111-2222-3333-4444-555555555555", "status": "pending", "total": 99.99, "qty": int64(1), "placed_at": "2026-03-02T11:30:00Z", "note": nil, "nothing": nil, "f": 1.5},
			{"id": "31111111-2222-3333-4444-555555555555", "status": "shipped", "total": 5.0, "qty": int64(7), "placed_at": "2026-03-03T09:15:00Z", "note": "/wA=", "nothing": nil, "f": 1.5},
		},
		RowCount: 3,
	}
	if diff := cmp.Diff(want, out.Result); diff != "" {
		t.Errorf("RunQuery result (-want +got):\n%s", diff)
	}
}

func TestPostgresConnectionTest(t *testing.T) {
	dsn := shop(t)
	u, _ := url.Parse(dsn)
	u.Path = "/no_such_database"
	cfg := pgConfig(t, newClock(), dsn)
	cfg.Connections = append(cfg.Connections, ConnectionConfig{ID: "missing", Kind: KindPostgres, DSN: u.String()})
	m := open(t, cfg)

	good, err := m.TestConnection(context.Background(), "shop")
	if err != nil || !good.OK || good.Error != "" || good.Details["server_version"] == "" {
		t.Errorf("TestConnection(shop) = %+v, %v; want ok with a server version", good, err)
	}
	bad, err := m.TestConnection(context.Background(), "missing")
	if err != nil || bad.OK || !strings.Contains(bad.Error, "no_such_database") {
		t.Errorf("TestConnection(missing) = %+v, %v; want not ok, naming the missing database", bad, err)
	}
}
