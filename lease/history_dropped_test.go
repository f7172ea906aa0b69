package lease_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// A history table an operator drops under a running instance is made
// again, as the lease and claims tables are, by the next take: the runs
// after it are recorded, not none until a restart.
func TestHistoryDroppedUnderItIsMadeAgain(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	history := pgx.Identifier{table + "_history"}.Sanitize()
	s := newStore(t, pool, table, "a")
	run := func() {
		t.Helper()
		l, err := s.TryAcquire(ctx(t), "job")
		if err != nil {
			t.Fatal(err)
		}
		code := 0
		if err := l.Release(ctx(t), &code); err != nil {
			t.Fatal(err)
		}
	}
	run()
	mustExec(t, pool, `DROP TABLE `+history)
	run()
	run()
	var n int
	if err := pool.QueryRow(ctx(t), `SELECT count(*) FROM `+history+` WHERE job_name = 'job'`).Scan(&n); err != nil || n != 2 {
		t.Errorf("runs recorded after the history table was dropped: %d %v, want both", n, err)
	}
}
