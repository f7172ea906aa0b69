package lease_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// olderHistory makes a lease table in a schema of its own whose history
// table is of an older version: without scheduled_at, output and
// stopped_by. It
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
	mustExec(t, admin, `ALTER TABLE `+history+` DROP COLUMN scheduled_at, DROP COLUMN output, DROP COLUMN stopped_by`)
	return admin, schema, table, history
}

// A history table of an older version, without scheduled_at, output and
// stopped_by, is upgraded by the first take that finds it, and runs are recorded in
// it from then on; readers that meet it before read the new columns as
// NULL, and never alter it.
func TestUpgradesAnOlderHistoryTable(t *testing.T) {
	t.Parallel()
	admin, schema, table, history := olderHistory(t)
	mustExec(t, admin, `INSERT INTO `+history+` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome)
VALUES ('job', 'old', 1, now() - interval '1 hour', now() - interval '1 hour', 0, 'exited')`)

	before := snapshot(t, admin, schema)
	runs, err := lwtest.Reader(t, admin, table).History(ctx(t), inspect.HistoryQuery{Job: "job"})
	if err != nil || len(runs) != 1 || runs[0].ScheduledAt != nil || runs[0].OutputBytes != 0 || runs[0].By != "" {
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
	if len(upgraded) != 1 || !strings.HasSuffix(upgraded[0]["message"].(string), ": added scheduled_at, output, stopped_by") {
		t.Errorf("log = %v, want one line saying scheduled_at, output and stopped_by were added", upgraded)
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

// The tables of the version before runs recorded who stopped them: a
// history table without stopped_by, a lease table without released_by
// and scheduled_since.
// Every reader works on them as they are, reading the schedule a run was
// for (only the missing column reads as NULL), and alters nothing; an
// operator's release of a live lease works on them, not saying who asked;
// the first take adds both columns, and from then on a stopped run records
// who asked.
func TestTablesWithoutWhoStoppedARun(t *testing.T) {
	t.Parallel()
	admin := pgtest.Pool(t)
	schema := leaseSchema(t, admin)
	table, lt := leaseTable(schema)
	history := pgx.Identifier{schema, "lease_history"}.Sanitize()
	if _, err := newStore(t, admin, table, "admin").Migrate(ctx(t)); err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, `ALTER TABLE `+history+` DROP COLUMN stopped_by`)
	mustExec(t, admin, `ALTER TABLE `+lt+` DROP COLUMN released_by, DROP COLUMN scheduled_since`)
	mustExec(t, admin, `INSERT INTO `+history+` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome, scheduled_at)
VALUES ('job', 'old', 1, now() - interval '1 hour', now() - interval '1 hour', 0, 'exited', date_trunc('hour', now()) - interval '1 hour')`)
	mustExec(t, admin, `INSERT INTO `+lt+` (job_name, holder, expires_at, fencing_token) VALUES ('job', 'old', now() + interval '1 hour', 2)`)

	before := snapshot(t, admin, schema)
	r := lwtest.Reader(t, admin, table)
	runs, err := r.History(ctx(t), inspect.HistoryQuery{Job: "job"})
	if err != nil || len(runs) != 1 || runs[0].ScheduledAt == nil || runs[0].By != "" {
		t.Errorf("history: %+v, %v; want the run, with its scheduled time", runs, err)
	}
	if f, err := r.Freshness(ctx(t), "job"); err != nil || f.LastRun == nil || f.LastCounted == nil || f.LastSuccess == nil {
		t.Errorf("freshness: %+v, %v; want the run as newest, counted and success", f, err)
	}
	if s, err := r.Summary(ctx(t), "job", time.Hour*2); err != nil || s.LastRun == nil || s.LastCounted == nil || !s.Verdict.Healthy() {
		t.Errorf("summary: %+v, %v; want the run, and the job held and healthy", s, err)
	}
	if jobs, err := r.Status(ctx(t), "job"); err != nil || len(jobs) != 1 || jobs[0].Holder != "old" {
		t.Errorf("status: %+v, %v; want old's lease", jobs, err)
	}
	if after := snapshot(t, admin, schema); after != before {
		t.Errorf("reading the tables altered them:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if holder, _, err := newStore(t, admin, table, "ops").ReleaseHeldBy(ctx(t), "job", "old", 0, false, "release by ops"); err != nil || holder != "old" {
		t.Errorf("release of old's lease: %q, %v; want old's released", holder, err)
	}
	mustExec(t, admin, `UPDATE `+lt+` SET expires_at = now()`)

	var logs syncBuffer
	s := newStore(t, admin, table, "a", lease.WithLogger(zerolog.New(&logs)))
	l, err := s.TryAcquire(ctx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	if lines := logs.lines(t, "upgraded table"); len(lines) != 1 || !strings.HasSuffix(lines[0]["message"].(string), ": added scheduled_since, released_by") {
		t.Errorf("log = %v, want one line saying scheduled_since and released_by were added", lines)
	}
	if lines := logs.lines(t, "upgraded history table"); len(lines) != 1 || !strings.HasSuffix(lines[0]["message"].(string), ": added stopped_by") {
		t.Errorf("log = %v, want one line saying stopped_by was added", lines)
	}
	if _, _, err := newStore(t, admin, table, "ops").ReleaseHeldBy(ctx(t), "job", "a", 0, false, "release by ops"); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx(t), lease.End{ExitCode: new(int), Outcome: lease.OutcomeStopped}); err != nil {
		t.Fatal(err)
	}
	runs, err = lwtest.Reader(t, admin, table).History(ctx(t), inspect.HistoryQuery{Job: "job"})
	if err != nil || len(runs) < 1 || runs[0].Holder != "a" || runs[0].Outcome != lease.OutcomeStopped || runs[0].By != "release by ops" {
		t.Errorf("history after the upgrade: %+v, %v; want a's run stopped by the release by ops", runs, err)
	}
}
