package lease_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// olderHistory makes a lease table in a schema of its own whose history
// table is of an older version: without scheduled_at and output. It
// returns the pool, the schema, the table as --table takes it and the
// history table quoted.
func olderHistory(t *testing.T) (*pgxpool.Pool, string, string, string) {
	t.Helper()
	admin := pgtest.Pool(t)
	schema := leaseSchema(t, admin)
	table, _ := leaseTable(schema)
	history := pgx.Identifier{schema, "lease_history"}.Sanitize()
	if _, err := newStore(t, admin, table, "admin").Migrate(ctx(t)); err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, `ALTER TABLE `+history+` DROP COLUMN scheduled_at, DROP COLUMN output`)
	return admin, schema, table, history
}

// A history table of an older version, without scheduled_at and output,
// is upgraded by the first take that finds it, and runs are recorded in
// it from then on; readers that meet it before read the new columns as
// NULL, and never alter it.
func TestUpgradesAnOlderHistoryTable(t *testing.T) {
	t.Parallel()
	admin, schema, table, history := olderHistory(t)
	mustExec(t, admin, `INSERT INTO `+history+` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome)
VALUES ('job', 'old', 1, now() - interval '1 hour', now() - interval '1 hour', 0, 'exited')`)

	before := snapshot(t, admin, schema)
	runs, err := lwtest.Reader(t, admin, table).History(ctx(t), inspect.HistoryQuery{Job: "job"})
	if err != nil || len(runs) != 1 || runs[0].ScheduledAt != nil || runs[0].OutputBytes != 0 {
		t.Fatalf("history of the older table: %+v, %v; want its one run, without schedule or output", runs, err)
	}
	if after := snapshot(t, admin, schema); after != before {
		t.Errorf("reading the older history table altered it:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	var logs syncBuffer
	s := newStore(t, admin, table, "a", lease.WithLogger(zerolog.New(&logs)))
	l, err := s.TryAcquire(ctx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx(t), new(int)); err != nil {
		t.Fatal(err)
	}
	upgraded := logs.lines(t, "upgraded history table")
	if len(upgraded) != 1 || !strings.HasSuffix(upgraded[0]["message"].(string), ": added scheduled_at, output") {
		t.Errorf("log = %v, want one line saying scheduled_at and output were added", upgraded)
	}
	runs, err = lwtest.Reader(t, admin, table).History(ctx(t), inspect.HistoryQuery{Job: "job"})
	if err != nil || len(runs) != 2 || runs[0].Holder != "a" {
		t.Errorf("history after the upgrade: %+v, %v; want a's run recorded on top of the old one", runs, err)
	}
}

// A role that may write to an older history table but not ALTER it runs
// its jobs under the lease and says once that runs are not recorded, and
// why; it alters nothing.
func TestOlderHistoryTableARoleCannotUpgrade(t *testing.T) {
	t.Parallel()
	admin, schema, table, history := olderHistory(t)
	pool := leastPrivileged(t, admin, schema)
	mustExec(t, admin, `GRANT SELECT, INSERT ON `+history+` TO `+pgx.Identifier{testRole(schema)}.Sanitize())
	before := snapshot(t, admin, schema)

	var logs syncBuffer
	s := newStore(t, pool, table, "low", lease.WithLogger(zerolog.New(&logs)), lease.WithHistoryKeep(0))
	for i := range 2 {
		l, err := s.TryAcquire(ctx(t), "job")
		if err != nil {
			t.Fatalf("acquire %d: %v", i+1, err)
		}
		if err := l.Release(ctx(t), new(int)); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
	}
	warned := logs.lines(t, "runs are not recorded")
	if len(warned) != 1 || !strings.Contains(warned[0]["message"].(string), "column scheduled_at is missing") {
		t.Errorf("warnings = %v, want one saying scheduled_at is missing", warned)
	}
	if after := strings.SplitN(snapshot(t, admin, schema), "\nrows:", 2)[0]; after != strings.SplitN(before, "\nrows:", 2)[0] {
		t.Errorf("the role altered the schema:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
