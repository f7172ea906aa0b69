package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// holderPool connects as the lease holder does, under its own
// application_name (to find its backends in pg_stat_activity), with a
// lock_timeout: a renewal that waits on any heavyweight lock fails with
// SQLSTATE 55P03 instead of waiting unseen.
func holderPool(t *testing.T, app string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "1s"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// The leader's child holds leasewrap_check's FOR KEY SHARE in a long
// transaction while a standby's take is queued on the row (the waiter holds
// the row's heavyweight tuple lock): the leader's renewals must still go
// through at once, or the leader would lose its lease to its own job.
// PostgreSQL lets an UPDATE that leaves the key alone skip the tuple lock
// when the only locker is a key-share one, so the renewal neither waits for
// the fenced transaction nor queues behind the take.
func TestRenewalsNeverWaitBehindAFencedTransaction(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	app := fmt.Sprintf("lw-renewer-%d", time.Now().UnixNano())
	seen := &renewals{}
	// A long TTL: a loaded machine cannot make the lease run out, so a
	// renewal that stops is one that waited on a lock.
	l := mustAcquire(t, newStore(t, holderPool(t, app), table, "a", lease.WithTTL(30*time.Second),
		lease.WithRenewInterval(100*time.Millisecond), lease.WithObserver(seen)), "job")
	tx, err := fencedTx(t, pool, table, "job", l.Token())
	if err != nil {
		t.Fatal(err)
	}
	taken := make(chan error, 1)
	go func() {
		// The same long TTL: the take's budget, which follows from it,
		// must outlast the checks below, or it stops waiting on a loaded
		// machine before they see it queued.
		_, err := newStore(t, pool, table, "b", lease.WithTTL(30*time.Second)).TryAcquire(ctx(t), "job")
		taken <- err
	}()
	waitForLockWait(t, pool, table)
	takePid := tupleLockHolder(t, pool, table)

	// Three renewals committed while the fenced transaction is open and the
	// take is queued; none of them may wait on a lock.
	before, _ := seen.counts()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if wait := lockWaitOf(t, pool, app); wait != "" {
			t.Fatalf("a renewal waits on a lock behind the fenced transaction: %s", wait)
		}
		ok, _ := seen.counts()
		errs := seen.errors()
		for _, err := range errs {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
				t.Fatalf("a renewal waited on a lock for longer than lock_timeout: %v", err)
			}
		}
		select {
		case <-l.Done():
			t.Fatalf("lease lost while the fenced transaction ran: %v (renewal errors %v)", l.Err(), errs)
		default:
		}
		if ok >= before+3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals in 30s while the fenced transaction ran, want 3 (errors %v)", ok-before, errs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pid := tupleLockHolder(t, pool, table); pid != takePid {
		t.Fatalf("the take (pid %d) stopped waiting while the fenced transaction was open", takePid)
	}
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-taken:
		if !errors.Is(err, lease.ErrHeld) {
			t.Errorf("take of the renewed lease after the fenced transaction: %v, want ErrHeld", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("take still blocked after the fenced transaction ended")
	}
	l.Release(ctx(t), nil)
}

// tupleLockHolder returns the backend that holds a tuple lock on table while
// it waits for a transaction: a take queued behind the fenced transaction.
// It looks until one does: the take wakes for a moment, without its lock,
// each time a renewal it also waited for commits.
func tupleLockHolder(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var pid int
	pgtest.Eventually(t, 10*time.Second, "a take holding the row's tuple lock while waiting for the fenced transaction", func() bool {
		err := pool.QueryRow(ctx(t), `SELECT t.pid FROM pg_locks t JOIN pg_locks w ON w.pid = t.pid
WHERE t.locktype = 'tuple' AND t.granted AND t.relation = $1::regclass
  AND w.locktype = 'transactionid' AND NOT w.granted`, pgx.Identifier{table}.Sanitize()).Scan(&pid)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return err == nil
	})
	return pid
}

// lockWaitOf describes a lock wait of any backend of application app, with
// the locks it waits for, or returns "".
func lockWaitOf(t *testing.T, pool *pgxpool.Pool, app string) string {
	t.Helper()
	rows, err := pool.Query(ctx(t), `SELECT a.pid, a.wait_event, left(a.query, 60),
  coalesce(string_agg(l.locktype || ' ' || l.mode, ', '), '')
FROM pg_stat_activity a LEFT JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
WHERE a.application_name = $1 AND a.wait_event_type = 'Lock'
GROUP BY a.pid, a.wait_event, a.query`, app)
	if err != nil {
		t.Fatal(err)
	}
	var waits []string
	for rows.Next() {
		var pid int
		var event, query, locks string
		if err := rows.Scan(&pid, &event, &query, &locks); err != nil {
			t.Fatal(err)
		}
		waits = append(waits, fmt.Sprintf("pid %d wait_event %s on %q waiting for [%s]", pid, event, query, locks))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(waits, "; ")
}
