package lease_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// A release that commits while a take waits on the row's lock (after the
// take's snapshot saw the run still going) leaves the run as its holder
// recorded it: the take does not go through on the released row and close
// the run a second time, as lost.
func TestTakeRacingAReleaseNeverClosesTheRunTwice(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	l := mustAcquire(t, newStore(t, pool, table, "a", lease.WithTTL(30*time.Second)), "job")
	quoted := pgx.Identifier{table}.Sanitize()
	history := pgx.Identifier{table + "_history"}.Sanitize()

	// The holder's release, as its statement does it, held open: its now()
	// is earlier than that of the take that follows.
	tx, err := pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx(t))
	if _, err := tx.Exec(ctx(t), `UPDATE `+quoted+` SET expires_at = now(), released_at = now(), last_finished_at = now(),
  last_exit_code = 0 WHERE job_name = 'job';
INSERT INTO `+history+` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome)
  VALUES ('job', 'a', `+strconv.FormatInt(l.Token(), 10)+`, now(), now(), 0, 'exited')`); err != nil {
		t.Fatal(err)
	}
	taken := make(chan error, 1)
	go func() {
		_, err := newStore(t, pool, table, "b").TryAcquire(ctx(t), "job")
		taken <- err
	}()
	waitForLockWait(t, pool, table)
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-taken:
		if !errors.Is(err, lease.ErrHeld) {
			t.Errorf("take racing the release: %v, want it to find the lease as its snapshot saw it (held)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("take still blocked after the release committed")
	}
	var outcomes []string
	rows, err := pool.Query(ctx(t), `SELECT outcome FROM `+history+` WHERE job_name = 'job' AND fencing_token = $1`, l.Token())
	if err != nil {
		t.Fatal(err)
	}
	if outcomes, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(outcomes) != 1 || outcomes[0] != lease.OutcomeExited {
		t.Errorf("history of the released run: %v, want it recorded once, as exited", outcomes)
	}
}
