package inspect

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schema"
)

// The summary reads each job's newest run, newest run that counts (not
// stopped) and newest success from the
// (job_name, finished_at) index, even when one job has nearly every run
// and another never succeeded: the planner would otherwise walk the
// (finished_at) index back through all of them for the latter, on every
// scrape.
func TestSummaryUsesTheJobIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	migrate(t, pool, table)
	r, err := Open(pool, table)
	if err != nil {
		t.Fatal(err)
	}
	lt, ht := pgx.Identifier{table}.Sanitize(), schema.HistoryTable(pgx.Identifier{table}).Sanitize()
	for _, sql := range []string{
		`INSERT INTO ` + lt + ` (job_name, holder, expires_at, fencing_token) VALUES ('busy', 'h', now(), 1), ('failing', 'h', now(), 1)`,
		`INSERT INTO ` + ht + ` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome)
SELECT 'busy', 'h', g, now() - g * interval '1 minute', now() - g * interval '1 minute', 0, 'exited' FROM generate_series(1, 50000) g`,
		`INSERT INTO ` + ht + ` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome)
SELECT 'failing', 'h', g, now() - g * interval '1 hour', now() - g * interval '1 hour', 1, 'exited' FROM generate_series(1, 3) g`,
		`ANALYZE ` + ht,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := pool.Query(ctx, `EXPLAIN (COSTS OFF) `+r.sql.summary,
		pgx.StrictNamedArgs{"window": (24 * time.Hour).Microseconds(), "job": nil, "claims": r.objects.Claims})
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	var index string
	if err := pool.QueryRow(ctx, `SELECT indexrelid::regclass::text FROM pg_catalog.pg_index
WHERE indrelid = $1::regclass AND indnkeyatts = 2`, ht).Scan(&index); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(plan, "Index Scan Backward using "+strings.Trim(index, `"`)+" "); n != 3 {
		t.Errorf("the newest run, the newest run that counts and the newest success are not all read backward from %s:\n%s", index, plan)
	}
	jobs, err := r.Summaries(ctx, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].LastSuccess == nil || jobs[1].LastSuccess != nil || *jobs[1].LastRun.ExitCode != 1 ||
		jobs[0].Runs[lease.OutcomeExited] != 24*60-1 && jobs[0].Runs[lease.OutcomeExited] != 24*60 || jobs[1].Runs[lease.OutcomeExited] != 3 {
		t.Errorf("summaries %+v", jobs)
	}
}

// migrate creates table and its history as leasewrap migrate does.
func migrate(t *testing.T, db lease.DB, table string) {
	t.Helper()
	s, err := lease.New(db, lease.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
}
