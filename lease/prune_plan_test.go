package lease

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/schema"
)

// A release prunes its own job's old runs through the (job_name,
// finished_at) index, even when another job has most of the history's
// old runs: never a scan of the history, and never another job's rows.
func TestPruneUsesTheJobIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s, err := New(pool, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ht := schema.HistoryTable(pgx.Identifier{table}).Sanitize()
	for _, sql := range []string{
		`INSERT INTO ` + ht + ` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome)
SELECT 'busy', 'h', g, now() - interval '60 days' - g * interval '1 minute', now() - interval '60 days' - g * interval '1 minute', 0, 'exited'
FROM generate_series(1, 50000) g`,
		`INSERT INTO ` + ht + ` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome)
SELECT 'quiet', 'h', g, now() - g * interval '40 days', now() - g * interval '40 days', 0, 'exited' FROM generate_series(1, 3) g`,
		`ANALYZE ` + ht,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := pool.Query(ctx, `EXPLAIN (COSTS OFF) `+s.sql.releasePruning, pgx.NamedArgs{
		"row": "quiet", "holder": "h", "token": int64(1), "hold_for": int64(0), "exit_code": 0, "job_channel": "chan", "table_channel": "chan",
		"job": "quiet", "slot": 1, "handoff": true, "first": int64(1000000), "outcome": OutcomeExited, "attempt": 1, "output": []byte(nil), "keep": (30 * 24 * time.Hour).Microseconds()})
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
	name := strings.Trim(schema.HistoryTable(pgx.Identifier{table})[0], `"`)
	switch {
	case !strings.Contains(plan, "Index Scan using "+strings.Trim(index, `"`)+" on "+name):
		t.Errorf("the prune does not find the job's old runs through %s:\n%s", index, plan)
	case strings.Contains(plan, "Seq Scan on "+name), regexp.MustCompile(`Sort Key: [^\n]*finished_at`).MatchString(plan):
		t.Errorf("the prune scans or sorts the history:\n%s", plan)
	}
}
