package lease_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
	schemapkg "github.com/redbite/leasewrap/schema"
)

// Each schema test works in a schema of its own, so that "nothing altered"
// covers leasewrap_check too (other tests create it in public), and so that
// every lease table is called "lease" and two schemas' catalogs compare
// equal, constraint and index names included.

// leaseSchema creates a fresh schema, dropped with everything in it when the
// test ends, and returns its name.
func leaseSchema(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	name := pgtest.Table(t, pool) // a name no other test uses
	mustExec(t, pool, `CREATE SCHEMA `+pgx.Identifier{name}.Sanitize())
	t.Cleanup(func() {
		if _, err := pool.Exec(ctx(t), `DROP SCHEMA `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop test schema %s: %v", name, err)
		}
	})
	return name
}

// migratedSchema is a fresh schema (see leaseSchema) with leasewrap's
// tables migrated by the admin pool it returns, and the lease table's name
// as --table takes it and quoted.
func migratedSchema(t *testing.T) (admin *pgxpool.Pool, schema, table, quoted string) {
	t.Helper()
	admin = pgtest.Pool(t)
	schema = leaseSchema(t, admin)
	table, quoted = leaseTable(schema)
	if _, err := newStore(t, admin, table, "admin").Migrate(ctx(t)); err != nil {
		t.Fatal(err)
	}
	return admin, schema, table, quoted
}

// leaseTable is the lease table in schema, as --table takes it and quoted.
func leaseTable(schema string) (string, string) {
	return schema + ".lease", pgx.Identifier{schema, "lease"}.Sanitize()
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(ctx(t), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// snapshot describes everything in schema a migration could touch: every
// relation's columns (type, NOT NULL, default), constraints, indexes,
// functions, and the lease table's rows.
func snapshot(t *testing.T, pool *pgxpool.Pool, schema string) string {
	t.Helper()
	var catalog string
	err := pool.QueryRow(ctx(t), `SELECT coalesce(string_agg(line, E'\n' ORDER BY line), '') FROM (
  SELECT c.relname || ' ' || c.relkind::text || ' ' || a.attname || ' ' ||
    format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END ||
    coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '') AS line
  FROM pg_class c
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
  WHERE c.relnamespace = $1::text::regnamespace
  UNION ALL
  SELECT 'constraint ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
  WHERE connamespace = $1::text::regnamespace
  UNION ALL
  SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
  WHERE c.relnamespace = $1::text::regnamespace
  UNION ALL
  SELECT 'function ' || p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = $1::text::regnamespace) x`,
		schema).Scan(&catalog)
	if err != nil {
		t.Fatalf("read catalog of %s: %v", schema, err)
	}
	var rows string
	_, quoted := leaseTable(schema)
	if err := pool.QueryRow(ctx(t), `SELECT coalesce(string_agg(l::text, E'\n' ORDER BY l::text), '') FROM `+quoted+` l`).
		Scan(&rows); err != nil {
		t.Fatalf("read rows of %s: %v", quoted, err)
	}
	// The schema's name appears in index and function definitions.
	return strings.ReplaceAll(catalog, schema, "SCHEMA") + "\nrows:\n" + rows
}

// freshSnapshot is the snapshot of a schema in which Migrate created the
// lease table and function: what an upgrade must end in.
func freshSnapshot(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	schema := leaseSchema(t, pool)
	table, _ := leaseTable(schema)
	if _, err := newStore(t, pool, table, "fresh").Migrate(ctx(t)); err != nil {
		t.Fatalf("migrate a fresh schema: %v", err)
	}
	return strings.SplitN(snapshot(t, pool, schema), "\nrows:", 2)[0]
}

// wantRefused checks that err is the *SchemaError naming column, found and
// want, with exactly the message an operator reads.
func wantRefused(t *testing.T, what string, err error, quoted, column, found, want string) {
	t.Helper()
	var se *lease.SchemaError
	if !errors.As(err, &se) || !errors.Is(err, lease.ErrNotLeaseTable) {
		t.Fatalf("%s: got %v, want a *SchemaError matching ErrNotLeaseTable", what, err)
	}
	if se.Column != column || se.Found != found || se.Want != want {
		t.Errorf("%s: got column %q found %q want %q; want column %q found %q want %q",
			what, se.Column, se.Found, se.Want, column, found, want)
	}
	msg := "lease table " + quoted + " is not a leasewrap table: "
	if column != "" {
		msg += "column " + column + " is "
	}
	msg += found + ", want " + want
	if err.Error() != msg {
		t.Errorf("%s: message\n  %s\nwant\n  %s", what, err, msg)
	}
}

// refusedCase is a table that is not a lease table, and the first mismatch
// the refusal must name.
type refusedCase struct {
	name, create              string // create has {{table}} for the quoted name
	column, found, want, rows string // rows: an optional INSERT's VALUES
}

// testRefused checks that both Migrate and the first acquisition (what a
// run does) refuse the table with the expected error, and that the schema
// (table, constraints, rows, functions) is exactly as it was.
func testRefused(t *testing.T, c refusedCase) {
	pool := pgtest.Pool(t)
	schema := leaseSchema(t, pool)
	table, quoted := leaseTable(schema)
	mustExec(t, pool, strings.NewReplacer("{{table}}", quoted, "{{schema}}", pgx.Identifier{schema}.Sanitize()).Replace(c.create))
	if c.rows != "" {
		mustExec(t, pool, `INSERT INTO `+quoted+` VALUES `+c.rows)
	}
	before := snapshot(t, pool, schema)
	_, err := newStore(t, pool, table, "a").Migrate(ctx(t))
	wantRefused(t, "migrate", err, quoted, c.column, c.found, c.want)
	l, err := newStore(t, pool, table, "a").TryAcquire(ctx(t), "job")
	if err == nil {
		l.Release(ctx(t), nil)
	}
	wantRefused(t, "acquire", err, quoted, c.column, c.found, c.want)
	if after := snapshot(t, pool, schema); after != before {
		t.Errorf("the refused table was altered:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// full is every column of a lease table, with the right types, for tables
// that differ from one in their key only.
const full = `job_name text NOT NULL, holder text NOT NULL, expires_at timestamptz NOT NULL,
  fencing_token bigint NOT NULL DEFAULT 0, acquired_at timestamptz, renewed_at timestamptz,
  last_started_at timestamptz, last_finished_at timestamptz, last_exit_code integer,
  last_holder text, released_at timestamptz`

// expires_at without a time zone is compared with now() in each session's
// time zone, which let two wrappers hold one lease.
func TestRefusesATimestampWithoutTimeZone(t *testing.T) {
	t.Parallel()
	testRefused(t, refusedCase{
		create: `CREATE TABLE {{table}} (job_name text PRIMARY KEY, holder text NOT NULL, expires_at timestamp NOT NULL)`,
		rows:   `('job', 'someone', now() - interval '1 hour')`,
		column: "expires_at", found: "timestamp without time zone", want: "timestamp with time zone",
	})
}

// A mistyped --table naming some other table must not grow eleven columns.
func TestRefusesAnUnrelatedTable(t *testing.T) {
	t.Parallel()
	for _, c := range []refusedCase{
		{name: "empty, no key", create: `CREATE TABLE {{table}} (title text, body text)`,
			column: "job_name", found: "missing", want: "text"},
		{name: "keyed, with rows", create: `CREATE TABLE {{table}} (id bigserial PRIMARY KEY, job_name text, holder text)`,
			rows:   `(1, 'a', 'b')`,
			column: "expires_at", found: "missing", want: "timestamp with time zone"},
		{name: "job_name of another type", create: `CREATE TABLE {{table}} (job_name varchar(80) PRIMARY KEY, holder text, expires_at timestamptz)`,
			column: "job_name", found: "character varying(80)", want: "text"},
		{name: "a view", create: `CREATE VIEW {{table}} AS SELECT 'j'::text AS job_name, 'h'::text AS holder, '2000-01-01 00:00Z'::timestamptz AS expires_at`,
			found: "it is a view", want: "a table"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testRefused(t, c)
		})
	}
}

// ON CONFLICT (job_name) needs a key on job_name alone; a table keyed by
// something else holds other rows than leases.
func TestRefusesAWrongPrimaryKey(t *testing.T) {
	t.Parallel()
	for _, c := range []refusedCase{
		{name: "composite", create: `CREATE TABLE {{table}} (` + full + `, PRIMARY KEY (job_name, holder))`,
			found: "its primary key is (job_name, holder)", want: "primary key (job_name)"},
		{name: "surrogate", create: `CREATE TABLE {{table}} (id bigserial PRIMARY KEY, ` + full + `, UNIQUE (job_name))`,
			found: "its primary key is (id)", want: "primary key (job_name)"},
		{name: "none", create: `CREATE TABLE {{table}} (` + full + `)`,
			found: "it has no primary key or unique constraint on job_name", want: "primary key (job_name)"},
		{name: "deferrable unique", create: `CREATE TABLE {{table}} (` + full + `, UNIQUE (job_name) DEFERRABLE)`,
			found: "it has no primary key or unique constraint on job_name", want: "primary key (job_name)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testRefused(t, c)
		})
	}
}

// upgrade creates a table from create ({{table}} for its quoted name) with one
// expired lease row, migrates it, and checks the result is a fresh lease
// table (plus extra) whose old row can be taken.
func upgrade(t *testing.T, create, extra string) []string {
	t.Helper()
	pool := pgtest.Pool(t)
	want := freshSnapshot(t, pool)
	schema := leaseSchema(t, pool)
	table, quoted := leaseTable(schema)
	mustExec(t, pool, strings.ReplaceAll(create, "{{table}}", quoted))
	mustExec(t, pool, `INSERT INTO `+quoted+` (job_name, holder, expires_at) VALUES ('old', 'someone', now() - interval '1 minute')`)
	s := newStore(t, pool, table, "a")
	changes, err := s.Migrate(ctx(t))
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	got := strings.SplitN(snapshot(t, pool, schema), "\nrows:", 2)[0]
	if extra != "" {
		lines := append(strings.Split(want, "\n"), extra)
		sort.Strings(lines)
		want = strings.Join(lines, "\n")
	}
	if got != want {
		t.Errorf("upgraded schema:\n%s\nwant, as freshly created:\n%s", got, want)
	}
	l, err := s.TryAcquire(ctx(t), "old")
	if err != nil {
		t.Fatalf("acquire the old expired row: %v", err)
	}
	defer l.Release(ctx(t), nil)
	if again, err := s.Migrate(ctx(t)); err != nil || len(again) != 0 {
		t.Errorf("second migrate: %q, %v; want no changes", again, err)
	}
	return changes
}

// The three-column table, as testdata/three-column-table.sql declares it, becomes a
// full lease table: NOT NULL included, since a NULL expires_at would make
// the job impossible to take again.
func TestUpgradesTheThreeColumnTable(t *testing.T) {
	t.Parallel()
	sql, err := os.ReadFile("testdata/three-column-table.sql")
	if err != nil {
		t.Fatal(err)
	}
	changes := upgrade(t, string(sql), "")
	if len(changes) != 5 || !strings.HasSuffix(changes[0], ": added fencing_token, acquired_at, renewed_at, "+
		"last_started_at, last_finished_at, last_exit_code, last_holder, released_at, slot, slots, schedule, last_scheduled_at, accounted_through, schedule_zone, scheduled_since, paused_until, paused_at, paused_by, pause_reason, queue, released_by; set NOT NULL on holder, expires_at") ||
		!strings.HasPrefix(changes[2], "created functions ") ||
		!strings.HasPrefix(changes[3], "created history table ") || !strings.HasPrefix(changes[4], "created claims table ") {
		t.Errorf("changes = %q, want the table upgraded, the functions, the history and the claims table created", changes)
	}
}

// Rows the three-column table allowed to hold NULL cannot be guessed at: the
// upgrade is refused as a whole and says which column to fix.
func TestRefusesToUpgradeRowsWithoutAHolder(t *testing.T) {
	t.Parallel()
	sql, err := os.ReadFile("testdata/three-column-table.sql")
	if err != nil {
		t.Fatal(err)
	}
	testRefused(t, refusedCase{
		create: string(sql),
		rows:   `('job', NULL, now() - interval '1 hour')`,
		column: "holder", found: "text with NULL in some rows",
		want: "text NOT NULL (give those rows a value or delete them, then run leasewrap migrate)",
	})
}

// An older leasewrap table is a subset of today's columns, each of the
// right type: it is upgraded, and a column of another type is refused.
func TestUpgradesAnOlderLeasewrapTableOnly(t *testing.T) {
	t.Parallel()
	t.Run("before released_at", func(t *testing.T) {
		t.Parallel()
		changes := upgrade(t, `CREATE TABLE {{table}} (job_name text PRIMARY KEY, holder text NOT NULL,
  expires_at timestamptz NOT NULL, fencing_token bigint NOT NULL DEFAULT 0, acquired_at timestamptz,
  renewed_at timestamptz, last_started_at timestamptz, last_finished_at timestamptz,
  last_exit_code integer, last_holder text)`, "")
		if len(changes) == 0 || !strings.HasSuffix(changes[0], ": added released_at, slot, slots, schedule, last_scheduled_at, accounted_through, schedule_zone, scheduled_since, paused_until, paused_at, paused_by, pause_reason, queue, released_by") {
			t.Errorf("changes = %q, want released_at, slot and slots added", changes)
		}
	})
	t.Run("before slots and history", func(t *testing.T) {
		t.Parallel()
		changes := upgrade(t, `CREATE TABLE {{table}} (job_name text PRIMARY KEY, holder text NOT NULL,
  expires_at timestamptz NOT NULL, fencing_token bigint NOT NULL DEFAULT 0, acquired_at timestamptz,
  renewed_at timestamptz, last_started_at timestamptz, last_finished_at timestamptz,
  last_exit_code integer, last_holder text, released_at timestamptz)`, "")
		if len(changes) != 5 || !strings.HasSuffix(changes[0], ": added slot, slots, schedule, last_scheduled_at, accounted_through, schedule_zone, scheduled_since, paused_until, paused_at, paused_by, pause_reason, queue, released_by") ||
			!strings.HasSuffix(changes[3], `."lease_history"`) || !strings.HasSuffix(changes[4], `."lease_schedule"`) {
			t.Errorf("changes = %q, want slot and slots added and the history and claims tables created", changes)
		}
	})
	t.Run("with a column of the operator's", func(t *testing.T) {
		t.Parallel()
		upgrade(t, `CREATE TABLE {{table}} (job_name text PRIMARY KEY, holder text NOT NULL,
  expires_at timestamptz NOT NULL, fencing_token bigint NOT NULL DEFAULT 0, note text)`,
			"lease r note text")
	})
	t.Run("renewed_at without time zone", func(t *testing.T) {
		t.Parallel()
		testRefused(t, refusedCase{
			create: `CREATE TABLE {{table}} (job_name text PRIMARY KEY, holder text NOT NULL,
  expires_at timestamptz NOT NULL, fencing_token bigint NOT NULL DEFAULT 0, renewed_at timestamp)`,
			column: "renewed_at", found: "timestamp without time zone", want: "timestamp with time zone",
		})
	})
	t.Run("a required column of the operator's", func(t *testing.T) {
		t.Parallel()
		testRefused(t, refusedCase{
			create: `CREATE TABLE {{table}} (job_name text PRIMARY KEY, holder text NOT NULL,
  expires_at timestamptz NOT NULL, owner_id integer NOT NULL)`,
			column: "owner_id", found: "integer NOT NULL without a default",
			want: "a column leasewrap need not fill: nullable or with a default",
		})
	})
}

// syncBuffer collects log lines from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged lines whose message starts with prefix.
func (b *syncBuffer) lines(t *testing.T, prefix string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if msg, _ := m["message"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// testRole names leastPrivileged's role for schema.
func testRole(schema string) string {
	role := "lw_test_" + strings.TrimPrefix(schema, "lw_")
	if len(role) > 63 {
		role = role[:63]
	}
	return role
}

// leastPrivileged creates a role with only USAGE on schema and SELECT,
// INSERT, UPDATE on its lease table, and returns a pool connected as it.
// Trust authentication lets the test log in as it without a password.
func leastPrivileged(t *testing.T, admin *pgxpool.Pool, schema string) *pgxpool.Pool {
	t.Helper()
	role := testRole(schema)
	r := pgx.Identifier{role}.Sanitize()
	_, quoted := leaseTable(schema)
	mustExec(t, admin, `CREATE ROLE `+r+` LOGIN`)
	t.Cleanup(func() {
		// DROP OWNED also revokes what was granted to the role.
		if _, err := admin.Exec(ctx(t), `DROP OWNED BY `+r+`; DROP ROLE `+r); err != nil {
			t.Errorf("drop test role %s: %v", role, err)
		}
	})
	mustExec(t, admin, `GRANT USAGE ON SCHEMA `+pgx.Identifier{schema}.Sanitize()+` TO `+r+`;
GRANT SELECT, INSERT, UPDATE ON `+quoted+` TO `+r)
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = role
	pool, err := pgxpool.NewWithConfig(ctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // before the role is dropped
	return pool
}

// A role with only SELECT, INSERT, UPDATE on a complete table runs the job
// when leasewrap_check is missing and it may not create it: one warning,
// nothing created, and Migrate says what privilege is missing.
func TestLeastPrivilegedRoleRunsWithoutTheCheckFunction(t *testing.T) {
	t.Parallel()
	admin, schema, table, quoted := migratedSchema(t)
	mustExec(t, admin, `DROP FUNCTION `+pgx.Identifier{schema, lease.CheckFunction}.Sanitize()+`(text, bigint, text)`)
	pool := leastPrivileged(t, admin, schema)
	before := strings.SplitN(snapshot(t, admin, schema), "\nrows:", 2)[0]

	var logs syncBuffer
	s := newStore(t, pool, table, "low", lease.WithLogger(zerolog.New(&logs)))
	for i := range 2 {
		l, err := s.TryAcquire(ctx(t), "job")
		if err != nil {
			t.Fatalf("acquire %d as a role with SELECT, INSERT, UPDATE: %v", i+1, err)
		}
		if err := l.Release(ctx(t), nil); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
	}
	warned := logs.lines(t, "fencing function")
	want := "fencing function leasewrap_check is missing and cannot be created (needs CREATE on schema " +
		schema + "); runs go on without it"
	if len(warned) != 1 || warned[0]["level"] != "warn" || warned[0]["message"] != want {
		t.Errorf("fencing warnings = %v, want one warn line %q", warned, want)
	}

	_, err := newStore(t, pool, table, "low").Migrate(ctx(t))
	wantMsg := "cannot create fencing function " + pgx.Identifier{schema, lease.CheckFunction}.Sanitize() +
		": needs CREATE on schema " + schema + " (run leasewrap migrate once as a role that has it)"
	if !errors.Is(err, lease.ErrFencingUnavailable) || err.Error() != wantMsg {
		t.Errorf("migrate as the role: %v, want ErrFencingUnavailable: %s", err, wantMsg)
	}
	if after := strings.SplitN(snapshot(t, admin, schema), "\nrows:", 2)[0]; after != before {
		t.Errorf("the least-privileged role altered the schema:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	var (
		holder   string
		released bool
	)
	if err := admin.QueryRow(ctx(t), `SELECT holder, released_at IS NOT NULL FROM `+quoted+` WHERE job_name = 'job'`).
		Scan(&holder, &released); err != nil || holder != "low" || !released {
		t.Errorf("lease row: holder %q, released %v, %v; want low's, released", holder, released, err)
	}
}

// Wrappers starting together on a database without the table: one creates
// it while the others look at the catalog, and none may mistake the table
// it half sees for a foreign one.
func TestConcurrentFirstUseNeverRefusesTheNewTable(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for round := range 40 {
		table := pgtest.Table(t, pool)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				own, err := pgxpool.New(ctx(t), pgtest.URL()) // a connection each, as wrappers have
				if err != nil {
					errs <- err
					return
				}
				defer own.Close()
				s, err := lease.New(own, lease.WithTable(table), lease.WithHolder(fmt.Sprint("w", i)))
				if err != nil {
					errs <- err
					return
				}
				l, err := s.TryAcquire(ctx(t), "job")
				if err == nil {
					defer l.Release(ctx(t), nil)
				}
				if err != nil && !errors.Is(err, lease.ErrHeld) {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
	}
}

// A missing privilege is a configuration problem, and says which grants
// to give.
func TestMissingPrivilegeSaysWhichGrants(t *testing.T) {
	t.Parallel()
	admin, schema, table, quoted := migratedSchema(t)
	pool := leastPrivileged(t, admin, schema)
	var role string
	if err := pool.QueryRow(ctx(t), `SELECT current_user`).Scan(&role); err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, `REVOKE UPDATE ON `+quoted+` FROM `+pgx.Identifier{role}.Sanitize())
	_, err := newStore(t, pool, table, "low").TryAcquire(ctx(t), "job")
	if !errors.Is(err, lease.ErrPermission) || !strings.Contains(err.Error(), "GRANT SELECT, INSERT, UPDATE ON the lease table") ||
		!strings.Contains(err.Error(), "permission denied") {
		t.Errorf("acquire without UPDATE: %v, want ErrPermission naming the grants and the server's message", err)
	}
}

// A claims table of an earlier version, without the index of requested
// runs: a role that does not own it schedules on, warned once, with
// nothing altered, and its Migrate says who may create the index; the
// owner's Migrate creates it and says so.
func TestEarlierClaimsTableGetsItsIndexOfRequestedRuns(t *testing.T) {
	t.Parallel()
	admin, schema, table, _ := migratedSchema(t)
	objects := schemapkg.For(pgx.Identifier{schema, "lease"})
	indexed := func() string {
		var def string
		err := admin.QueryRow(ctx(t), `SELECT coalesce((SELECT pg_get_indexdef(to_regclass($1))), '')`, objects.RequestsIndex()).Scan(&def)
		if err != nil {
			t.Fatal(err)
		}
		return def
	}
	want := "CREATE INDEX lease_schedule_requested ON " + schema + ".lease_schedule USING btree (job_name, scheduled_at) WHERE (outcome = 'requested'::text)"
	if def := indexed(); def != want {
		t.Fatalf("a new claims table's index of requested runs: %q, want %q", def, want)
	}
	mustExec(t, admin, `DROP INDEX `+objects.RequestsIndex())
	low := leastPrivileged(t, admin, schema)
	mustExec(t, admin, `GRANT SELECT, INSERT, DELETE ON `+objects.Claims+` TO `+pgx.Identifier{testRole(schema)}.Sanitize())
	before := strings.SplitN(snapshot(t, admin, schema), "\nrows:", 2)[0]

	var logs syncBuffer
	if _, err := newStore(t, low, table, "low", lease.WithLogger(zerolog.New(&logs))).Register(ctx(t), "job", "@hourly", nil); err != nil {
		t.Fatalf("a role that does not own the claims table cannot schedule: %v", err)
	}
	if warned := logs.lines(t, "requested runs"); len(warned) != 1 || warned[0]["level"] != "warn" {
		t.Errorf("warnings about the index = %v, want one warn line", warned)
	}
	_, err := newStore(t, low, table, "low").Migrate(ctx(t))
	if !errors.Is(err, schemapkg.ErrRequestsIndexUnavailable) || !strings.Contains(err.Error(), "only its owner may create it") {
		t.Errorf("migrate as a role that does not own the claims table: %v, want ErrRequestsIndexUnavailable", err)
	}
	if after := strings.SplitN(snapshot(t, admin, schema), "\nrows:", 2)[0]; after != before {
		t.Errorf("the least-privileged role altered the schema:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	changes, err := newStore(t, admin, table, "admin").Migrate(ctx(t))
	wantChange := "created index " + objects.RequestsIndex() + " of requested runs on claims table " + objects.Claims
	if err != nil || len(changes) != 1 || changes[0] != wantChange {
		t.Errorf("migrate as the owner: %q, %v; want %q", changes, err, wantChange)
	}
	if def := indexed(); def != want {
		t.Errorf("after the owner's migrate: %q, want %q", def, want)
	}
}
