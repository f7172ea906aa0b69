package lease

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/schema"
)

// Looking for a requested run reads the claims table's index of requested
// runs, not every claim of the job: with a month of claims of a job and
// one request, the look reads a handful of rows, and as many as there are
// claims once the index is dropped (which shows the measure can tell).
// A scheduler that cannot listen (behind PgBouncer) looks every retry
// interval, for as long as it runs.
func TestLookingForRequestsReadsOnlyTheRequested(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s, err := New(pool, WithTable(table), WithHolder("h"))
	if err != nil {
		t.Fatal(err)
	}
	const spec, claims = "@every 10s", 5000
	if _, err := s.Register(ctx, "job", spec, nil); err != nil {
		t.Fatal(err)
	}
	claimsTable := schema.ClaimsTable(pgx.Identifier{table})
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO `+claimsTable.Sanitize()+` (job_name, scheduled_at, outcome, holder, fencing_token)
SELECT 'job', now() - g * interval '10 seconds', 'exited', 'h', g FROM generate_series(1, $1::integer) g`, claims)
	exec(`ANALYZE ` + claimsTable.Sanitize())
	if _, err := s.RequestRun(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	// A plan's scans of the claims table: the rows each returned and those
	// its filter read and dropped, over all its loops.
	read := func() int {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }() // the take is only explained
		var out string
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+s.sql.req.takeRecording,
			pgx.StrictNamedArgs{"job": "job", "holder": "h", "ttl": s.cfg.TTL.Microseconds(), "spec": spec}).Scan(&out); err != nil {
			t.Fatal(err)
		}
		var plan []struct{ Plan planNode }
		if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan) != 1 {
			t.Fatalf("EXPLAIN's plan %q: %v", out, err)
		}
		return plan[0].Plan.read(claimsTable[len(claimsTable)-1])
	}
	if n := read(); n > 10 {
		t.Errorf("looking for the one request among %d claims read %d rows of the claims table, want a few", claims, n)
	}
	exec(`DROP INDEX ` + schema.For(pgx.Identifier{table}).RequestsIndex())
	if n := read(); n < claims {
		t.Errorf("without the index, the look read %d rows, want all %d claims: the measure cannot tell", n, claims)
	}
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	Relation        string     `json:"Relation Name"`
	Rows            float64    `json:"Actual Rows"`
	Loops           float64    `json:"Actual Loops"`
	RemovedByFilter float64    `json:"Rows Removed by Filter"`
	Plans           []planNode `json:"Plans"`
}

// read sums the rows the scans of relation returned and filtered out.
func (n planNode) read(relation string) int {
	total := 0
	if n.Relation == relation {
		total = int((n.Rows + n.RemovedByFilter) * max(n.Loops, 1))
	}
	for _, c := range n.Plans {
		total += c.read(relation)
	}
	return total
}
