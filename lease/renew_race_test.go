package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// An operator's release (release --id) that commits while a renewal waits
// on the row must read as the operator's release, not as a takeover.
func TestRenewalRacingAnOperatorsReleaseSaysSo(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	l := mustAcquire(t, newStore(t, pool, table, "a", lease.WithTTL(30*time.Second), lease.WithRenewInterval(100*time.Millisecond)), "job")
	tx, err := pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	// What release --id does, held open until a renewal waits behind it.
	if _, err := tx.Exec(ctx(t), `UPDATE `+pgx.Identifier{table}.Sanitize()+` SET released_at = now()`); err != nil {
		t.Fatal(err)
	}
	renew, _, _ := strings.Cut(lease.HotFunctions(table)[1], "(")
	pgtest.Eventually(t, 10*time.Second, "a renewal waiting on the release", func() bool {
		var n int
		_ = pool.QueryRow(ctx(t), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
  AND (query LIKE 'WITH renewed AS%' AND strpos(query, $1) > 0 OR strpos(query, $2) > 0)`,
			strings.TrimSuffix(pgx.Identifier{table}.Sanitize(), `"`), renew+"(").Scan(&n)
		return n > 0
	})
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lease not lost after the release")
	}
	if !errors.Is(l.Err(), lease.ErrReleasedByOperator) {
		t.Errorf("lease lost with %v, want ErrReleasedByOperator", l.Err())
	}
}
