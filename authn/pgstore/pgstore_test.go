package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/authn"
	"github.com/turnledger/turnledger/authn/pgstore"
	"github.com/turnledger/turnledger/authn/pgstore/pgstoretest"
	"github.com/turnledger/turnledger/authn/storetest"
	"github.com/turnledger/turnledger/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func open(t *testing.T, url string, o pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestContract runs the store contract shared with the bbolt store, as the
// runtime role.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		db := pgstoretest.New(t)
		admin := open(t, db.AdminURL, pgstore.Options{Admin: true})
		rt := open(t, db.RuntimeURL, pgstore.Options{})
		return split{Store: rt, admin: admin}
	})
}

// split is the runtime role's store with the owner's tenant administration,
// as in a deployment: the runtime role cannot write tenants.
type split struct {
	*pgstore.Store
	admin *pgstore.Store
}

func (s split) AddTenant(ctx context.Context, idp, plan string, now time.Time) (authn.Tenant, error) {
	return s.admin.AddTenant(ctx, idp, plan, now)
}

func (s split) SetTenantStatus(ctx context.Context, ref, status string, now time.Time) (authn.Tenant, error) {
	return s.admin.SetTenantStatus(ctx, ref, status, now)
}

// TestMigrateIdempotent: the first run applies every version, later and
// concurrent runs apply none.
func TestMigrateIdempotent(t *testing.T) {
	db := pgstoretest.NewUnmigrated(t)
	ctx := context.Background()
	if _, err := pgstore.Open(ctx, db.AdminURL, pgstore.Options{Admin: true}); !errors.Is(err, pgstore.ErrSchema) {
		t.Errorf("Open(unmigrated) error = %v, want ErrSchema", err)
	}
	got, err := pgstore.Migrate(ctx, db.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for v := 1; v <= pgstore.SchemaVersion(); v++ {
		want = append(want, v)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Migrate(fresh) applied (-want +got):\n%s", diff)
	}
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			applied, err := pgstore.Migrate(ctx, db.AdminURL)
			if err == nil && len(applied) > 0 {
				err = errors.New("a second migration applied versions again")
			}
			errc <- err
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Errorf("Migrate(again) error = %v", err)
		}
	}
	open(t, db.AdminURL, pgstore.Options{Admin: true})
}

// TestOpenRefusesPrivilegedRole: the runtime must not run as a role that
// escapes row-level security.
func TestOpenRefusesPrivilegedRole(t *testing.T) {
	db := pgstoretest.New(t)
	ctx := context.Background()
	if _, err := pgstore.Open(ctx, db.AdminURL, pgstore.Options{}); !errors.Is(err, pgstore.ErrPrivileged) {
		t.Errorf("Open(superuser) error = %v, want ErrPrivileged", err)
	}
	sql := mustSQL(t, db.AdminURL)
	if _, err := sql.Exec("ALTER ROLE " + db.Role + " BYPASSRLS"); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Open(ctx, db.RuntimeURL, pgstore.Options{}); !errors.Is(err, pgstore.ErrPrivileged) {
		t.Errorf("Open(BYPASSRLS role) error = %v, want ErrPrivileged", err)
	}
}

func mustSQL(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestRowLevelSecurity checks the policy in the database itself, with
// direct SQL as the runtime role: under user A's context B's rows are not
// there (not readable, not writable, not deletable), and a transaction that
// forgot to set a context sees no row at all rather than every row.
func TestRowLevelSecurity(t *testing.T) {
	db := pgstoretest.New(t)
	ctx := context.Background()
	admin := open(t, db.AdminURL, pgstore.Options{Admin: true})
	rt := open(t, db.RuntimeURL, pgstore.Options{})
	tn, err := admin.AddTenant(ctx, "acme", "standard", t0)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := admin.AddTenant(ctx, "other", "standard", t0)
	a, _ := rt.UpsertUser(ctx, tn.ID, authn.Identity{TenantClaim: "acme", UserClaim: "a"}, t0)
	b, _ := rt.UpsertUser(ctx, tn.ID, authn.Identity{TenantClaim: "acme", UserClaim: "b"}, t0)
	c, _ := rt.UpsertUser(ctx, other.ID, authn.Identity{TenantClaim: "other", UserClaim: "a"}, t0)
	for _, u := range []struct{ tenant, user, provider string }{{tn.ID, a, "pa"}, {tn.ID, b, "pb"}, {other.ID, c, "pc"}} {
		if err := rt.PutProfile(ctx, u.tenant, u.user, authn.Profile{Provider: u.provider, APIKeyCiphertext: []byte("sealed"), UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}

	raw := mustSQL(t, db.RuntimeURL)
	// providers runs query in one transaction after setup and returns the
	// providers of the rows it sees.
	providers := func(setup string, args []any, query string) []string {
		t.Helper()
		tx, err := raw.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if setup != "" {
			if _, err := tx.Exec(setup, args...); err != nil {
				t.Fatalf("%s: %v", setup, err)
			}
		}
		rows, err := tx.Query(query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var p string
			rows.Scan(&p)
			out = append(out, p)
		}
		return out
	}
	const setCtx = `SELECT set_config('turnledger.tenant_id', $1, true), set_config('turnledger.user_id', $2, true)`
	const all = `SELECT provider FROM provider_profiles ORDER BY provider`
	if got := providers(setCtx, []any{tn.ID, a}, all); !cmp.Equal(got, []string{"pa"}) {
		t.Errorf("as A, SELECT every profile = %v, want [pa]", got)
	}
	if got := providers(setCtx, []any{tn.ID, a}, `SELECT provider FROM provider_profiles WHERE user_id = '`+b+`'`); len(got) != 0 {
		t.Errorf("as A, SELECT B's profiles = %v, want none", got)
	}
	if got := providers(setCtx, []any{tn.ID, c}, all); len(got) != 0 {
		t.Errorf("as another tenant's user id under this tenant, SELECT = %v, want none", got)
	}
	if got := providers("", nil, all); len(got) != 0 {
		t.Errorf("with no context, SELECT every profile = %v, want none", got)
	}
	// A pooled connection that once carried a context (now reset to '')
	// still sees nothing without a new one.
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, _ := conn.BeginTx(ctx, nil)
	tx.Exec(setCtx, tn.ID, a)
	tx.Commit()
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM provider_profiles`).Scan(&n); err != nil || n != 0 {
		t.Errorf("after the context's transaction ended, count = %d, %v, want 0", n, err)
	}
	conn.Close()

	// Writes under A's context cannot touch or create B's rows.
	tx2, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx2.Exec(setCtx, tn.ID, a)
	if res, err := tx2.Exec(`UPDATE provider_profiles SET model = 'stolen' WHERE user_id = '` + b + `'`); err != nil {
		t.Errorf("UPDATE B's row as A: %v", err)
	} else if n, _ := res.RowsAffected(); n != 0 {
		t.Errorf("UPDATE B's row as A changed %d rows", n)
	}
	if res, err := tx2.Exec(`DELETE FROM provider_profiles`); err != nil {
		t.Errorf("DELETE as A: %v", err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("DELETE every row as A removed %d rows, want 1 (A's own)", n)
	}
	if _, err := tx2.Exec(`INSERT INTO provider_profiles (tenant_id, user_id, provider, updated_at) VALUES ($1, $2, 'forged', now())`, tn.ID, b); err == nil {
		t.Errorf("INSERT a row for B as A succeeded, want a policy violation")
	}
	tx2.Rollback()

	// The test server's superuser, by contrast, sees every row: superusers
	// and BYPASSRLS roles escape the policy, which is why Open refuses them
	// for the runtime.
	ownerSees := 0
	if err := mustSQL(t, db.AdminURL).QueryRow(`SELECT count(*) FROM provider_profiles`).Scan(&ownerSees); err != nil || ownerSees != 3 {
		t.Errorf("superuser count = %d, %v, want 3", ownerSees, err)
	}
}

// TestTicketRaceAcrossPools: two runtime stores with pools of their own (as
// two runtime processes have) race many redeemers for one ticket; one wins.
func TestTicketRaceAcrossPools(t *testing.T) {
	db := pgstoretest.New(t)
	ctx := context.Background()
	s1 := open(t, db.RuntimeURL, pgstore.Options{})
	s2 := open(t, db.RuntimeURL, pgstore.Options{})
	for i := range 20 {
		h := [32]byte{byte(i), 9}
		want := authn.Ticket{Principal: authn.Principal{TenantID: "t", UserID: "u"}, ExpiresAt: t0.Add(time.Minute)}
		if err := s1.PutTicket(ctx, h, want, t0); err != nil {
			t.Fatal(err)
		}
		var takers []func() (authn.Ticket, error)
		for range 5 {
			takers = append(takers,
				func() (authn.Ticket, error) { return s1.TakeTicket(ctx, h) },
				func() (authn.Ticket, error) { return s2.TakeTicket(ctx, h) })
		}
		if wins := storetest.Race(t, want, takers...); wins != 1 {
			t.Fatalf("round %d: ticket taken %d times, want 1", i, wins)
		}
	}
}
