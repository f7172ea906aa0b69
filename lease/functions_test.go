package lease_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// hotFunctions are the lease table's own functions (table "lease"), as
// the catalog names them, less the hash that ends their names.
var hotFunctions = []string{"lease_enter", "lease_look", "lease_renew"}

// hotFunctionsSQL lists the lease table's functions in the schema $1, in
// PL/pgSQL, with their names (less the hash) and signatures.
const hotFunctionsSQL = `SELECT regexp_replace(p.proname, '_[0-9a-f]{8}$', ''), p.oid::regprocedure::text FROM pg_proc p
JOIN pg_language g ON g.oid = p.prolang
WHERE p.pronamespace = $1::text::regnamespace AND p.proname ~ '^lease_(enter|look|renew)_[0-9a-f]{8}$' AND g.lanname = 'plpgsql'
ORDER BY 1`

// functionsIn lists the lease table's functions in schema, in PL/pgSQL,
// less the hash that ends their names.
func functionsIn(t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	names, _ := hotFunctionsIn(t, pool, schema)
	return names
}

// hotFunctionsIn lists the lease table's functions in schema: names less
// the hash, and signatures.
func hotFunctionsIn(t *testing.T, pool *pgxpool.Pool, schema string) (names, signatures []string) {
	t.Helper()
	rows, err := pool.Query(ctx(t), hotFunctionsSQL, schema)
	if err != nil {
		t.Fatal(err)
	}
	var name, signature string
	if _, err := pgx.ForEachRow(rows, []any{&name, &signature}, func() error {
		names, signatures = append(names, name), append(signatures, signature)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return names, signatures
}

// dropFunctions drops the lease table's functions in schema: a table of
// an earlier version.
func dropFunctions(t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	_, signatures := hotFunctionsIn(t, pool, schema)
	for _, f := range signatures {
		mustExec(t, pool, `DROP FUNCTION `+f)
	}
}

// handOver runs, as user, a leader of job "job" on table that renews for
// a second while a polling standby queues and looks, then releases, and
// the standby takes the lease; it returns what both sent.
func handOver(t *testing.T, user, table, quoted string, opts ...lease.Option) []trip {
	t.Helper()
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	var tr tracer
	pool := tracedPool(t, u.String(), &tr)
	leader := mustAcquire(t, newStore(t, pool, table, "leader", opts...), "job")
	got := make(chan *lease.Lease, 1)
	sctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	go func() {
		l, err := newStore(t, pool, table, "standby", append(opts, lease.WithListen(false))...).Acquire(sctx, "job")
		if err != nil && sctx.Err() == nil {
			t.Errorf("standby: %v", err)
		}
		got <- l
	}()
	pgtest.Eventually(t, 20*time.Second, "the standby queued", func() bool {
		var in bool
		err := pool.QueryRow(ctx(t), `SELECT coalesce(queue @> '[{"holder": "standby"}]', false) FROM `+quoted+` WHERE job_name = 'job'`).Scan(&in)
		return err == nil && in
	})
	// Renewals every 200ms, looks every 50ms (200ms behind the head).
	time.Sleep(time.Second)
	if err := leader.Release(ctx(t), nil); err != nil {
		t.Fatalf("release after a second of renewals: %v", err)
	}
	select {
	case l := <-got:
		if l == nil {
			t.Fatal("the standby got no lease")
		}
		if err := l.Release(ctx(t), nil); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the standby got no lease within 10s")
	}
	return tr.since(0)
}

// calls counts the trips that call the lease table's function named with
// suffix (before the hash).
func calls(trips []trip, suffix string) (n int) {
	call := hotCall(suffix)
	for _, tr := range trips {
		if len(tr.sql) == 1 && strings.HasPrefix(tr.sql[0], "SELECT * FROM ") && call.MatchString(tr.sql[0]) {
			n++
		}
	}
	return n
}

// Migrate creates the lease table's functions, and adds them to a table
// of an earlier version (one line, nothing else changed: as a fresh
// migration leaves it); a Store's first take adds them too, as it
// upgrades a table; and the statements a fleet sends most go through
// them: a leader's renewals, a polling standby's entry and looks.
func TestMigrateCreatesTheLeaseTablesFunctions(t *testing.T) {
	t.Parallel()
	admin, schema, table, quoted := migratedSchema(t)
	if got := functionsIn(t, admin, schema); !slices.Equal(got, hotFunctions) {
		t.Fatalf("functions after migrate: %v, want %v", got, hotFunctions)
	}
	fresh := strings.SplitN(snapshot(t, admin, schema), "\nrows:", 2)[0]
	dropFunctions(t, admin, schema)
	changes, err := newStore(t, admin, table, "a").Migrate(ctx(t))
	if err != nil || len(changes) != 1 || !strings.HasPrefix(changes[0], "created functions ") {
		t.Errorf("migrate of a table without its functions: %q, %v; want one line, created functions", changes, err)
	}
	if got := strings.SplitN(snapshot(t, admin, schema), "\nrows:", 2)[0]; got != fresh {
		t.Errorf("upgraded schema:\n%s\nwant, as freshly created:\n%s", got, fresh)
	}

	dropFunctions(t, admin, schema)
	trips := handOver(t, admin.Config().ConnConfig.User, table, quoted)
	if got := functionsIn(t, admin, schema); !slices.Equal(got, hotFunctions) {
		t.Fatalf("functions after a first take: %v, want %v", got, hotFunctions)
	}
	for _, fn := range []string{"renew", "look", "enter"} {
		if calls(trips, fn) == 0 {
			t.Errorf("no call of the %s function in %s", fn, brief(trips))
		}
	}
}

// A role that may not create the functions, on a table without them,
// sends its statements in full (and creates nothing); so does a Store
// whose table lost them while it ran: the leader keeps renewing, and a
// warning says why, once.
func TestWithoutTheFunctionsStatementsGoInFull(t *testing.T) {
	t.Parallel()
	admin, schema, table, quoted := migratedSchema(t)
	dropFunctions(t, admin, schema)
	leastPrivileged(t, admin, schema)
	role := testRole(schema)
	mustExec(t, admin, `GRANT SELECT, INSERT ON `+pgx.Identifier{schema, "lease_history"}.Sanitize()+` TO `+pgx.Identifier{role}.Sanitize())
	trips := handOver(t, role, table, quoted)
	if got := functionsIn(t, admin, schema); len(got) != 0 {
		t.Errorf("the role created %v", got)
	}
	for _, fn := range []string{"renew", "look", "enter"} {
		if n := calls(trips, fn); n > 0 {
			t.Errorf("%d calls of the %s function, which is not there", n, fn)
		}
	}

	// The functions go while a lease is held through them.
	other := leaseSchema(t, admin)
	otherTable, otherQuoted := leaseTable(other)
	var logs syncBuffer
	held := mustAcquire(t, newStore(t, admin, otherTable, "held", lease.WithLogger(zerolog.New(&logs))), "job")
	dropFunctions(t, admin, other)
	var dropped time.Time
	if err := admin.QueryRow(ctx(t), `SELECT clock_timestamp()`).Scan(&dropped); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, 5*time.Second, "a renewal after the functions went", func() bool {
		var renewed time.Time
		err := admin.QueryRow(ctx(t), `SELECT renewed_at FROM `+otherQuoted+` WHERE job_name = 'job'`).Scan(&renewed)
		return err == nil && renewed.After(dropped)
	})
	if err := held.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	if warned := logs.lines(t, "the lease table's functions are gone"); len(warned) != 1 {
		t.Errorf("warnings %v, want one", warned)
	}
}

// A function of the name that is not leasewrap's (another answer) is left
// as it is: the migration goes on without the functions, and the
// statements are sent in full.
func TestAForeignFunctionOfTheNameIsLeftAlone(t *testing.T) {
	t.Parallel()
	admin := pgtest.Pool(t)
	schema := leaseSchema(t, admin)
	table, quoted := leaseTable(schema)
	mustExec(t, admin, `CREATE FUNCTION `+lease.HotFunctions(table)[0]+` RETURNS integer LANGUAGE sql AS 'SELECT 1'`)
	changes, err := newStore(t, admin, table, "admin").Migrate(ctx(t))
	if err != nil || len(changes) == 0 || !strings.HasPrefix(changes[0], "created table ") {
		t.Fatalf("migrate: %q, %v; want the tables created", changes, err)
	}
	for _, c := range changes {
		if strings.HasPrefix(c, "created functions") {
			t.Errorf("migrate said %q", c)
		}
	}
	trips := handOver(t, admin.Config().ConnConfig.User, table, quoted)
	for _, fn := range []string{"renew", "look", "enter"} {
		if n := calls(trips, fn); n > 0 {
			t.Errorf("%d calls of the %s function: %s", n, fn, brief(trips))
		}
	}
}

// A function of a renewal's name and arguments that a role other than
// the lease table's owner created (one that may create functions in the
// table's schema) is not called, for it could answer "renewed" without
// renewing: the renewals go in full and move the lease's expiry, and a
// warning names the function.
func TestAFunctionAnotherRoleOwnsIsNotCalled(t *testing.T) {
	t.Parallel()
	admin, schema, table, quoted := migratedSchema(t)
	renew := lease.HotFunctions(table)[1]
	mustExec(t, admin, `DROP FUNCTION `+renew)
	intruder := testRole(schema)
	intruder = pgx.Identifier{intruder[:min(len(intruder), 60)] + "_fn"}.Sanitize()
	mustExec(t, admin, `CREATE ROLE `+intruder)
	t.Cleanup(func() {
		if _, err := admin.Exec(ctx(t), `DROP OWNED BY `+intruder+`; DROP ROLE `+intruder); err != nil {
			t.Errorf("drop test role %s: %v", intruder, err)
		}
	})
	mustExec(t, admin, `GRANT USAGE, CREATE ON SCHEMA `+pgx.Identifier{schema}.Sanitize()+` TO `+intruder+`;
BEGIN; SET LOCAL ROLE `+intruder+`;
CREATE FUNCTION `+renew+` RETURNS TABLE (renewed boolean, token bigint, holder text, released boolean)
  LANGUAGE sql AS 'SELECT true, $3, $2, false';
COMMIT`)
	worker := leastPrivileged(t, admin, schema)
	mustExec(t, admin, `GRANT SELECT, INSERT ON `+pgx.Identifier{schema, "lease_history"}.Sanitize()+` TO `+pgx.Identifier{testRole(schema)}.Sanitize())

	var logs syncBuffer
	held := mustAcquire(t, newStore(t, worker, table, "held", lease.WithLogger(zerolog.New(&logs))), "job")
	var taken, expires time.Time
	if err := admin.QueryRow(ctx(t), `SELECT clock_timestamp(), expires_at FROM `+quoted+` WHERE job_name = 'job'`).Scan(&taken, &expires); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, 5*time.Second, "a renewal that moves the expiry", func() bool {
		var renewed, now time.Time
		err := admin.QueryRow(ctx(t), `SELECT renewed_at, expires_at FROM `+quoted+` WHERE job_name = 'job'`).Scan(&renewed, &now)
		return err == nil && renewed.After(taken) && now.After(expires)
	})
	if err := held.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	warned := logs.lines(t, "the lease table's function is owned by a role other than the table's owner")
	if len(warned) != 1 || warned[0]["function"] != renew {
		t.Errorf("warnings %v, want one naming %s", warned, renew)
	}
}

// A table whose name holds what a function's body gives a meaning (an @
// as a statement's parameter, the dollar quote's tag) has its functions
// all the same: migrate creates them, and a leader's renewals, a polling
// standby's entry and looks go through them.
func TestFunctionsOfATableNamedWithAtAndDollar(t *testing.T) {
	t.Parallel()
	admin := pgtest.Pool(t)
	for _, name := range []string{"a@job$fn$b", "a@zz"} {
		schema := leaseSchema(t, admin)
		table, quoted := schema+"."+name, pgx.Identifier{schema, name}.Sanitize()
		changes, err := newStore(t, admin, table, "admin").Migrate(ctx(t))
		if err != nil || !slices.ContainsFunc(changes, func(c string) bool { return strings.HasPrefix(c, "created functions ") }) {
			t.Fatalf("table %q: migrate: %q, %v; want the functions created", name, changes, err)
		}
		trips := handOver(t, admin.Config().ConnConfig.User, table, quoted)
		for _, fn := range []string{"renew", "look", "enter"} {
			if calls(trips, fn) == 0 {
				t.Errorf("table %q: no call of the %s function in %s", name, fn, brief(trips))
			}
		}
	}
}
