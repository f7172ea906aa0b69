package lease

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// heldLease is holder h's lease on job j, on a fresh table of its own.
func heldLease(t *testing.T) (context.Context, *pgxpool.Pool, string, *Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s, err := New(pool, append(standbyTimings, WithTable(table), WithHolder("h"))...)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.TryAcquire(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, pool, table, l
}

// A release sent again, as releaseRow does when the connection broke
// before the answer (the first may have committed: a switchover ends
// every session), records the run once.
func TestAReleaseSentAgainRecordsTheRunOnce(t *testing.T) {
	t.Parallel()
	ctx, pool, table, l := heldLease(t)
	l.stopKeeper()
	<-l.keeperDone
	zero := 0
	end := End{ExitCode: &zero, Outcome: OutcomeExited}
	for range 2 {
		if err := l.releaseRow(ctx, 0, end); err != nil {
			t.Fatal(err)
		}
	}
	var runs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{table + HistorySuffix}.Sanitize()+
		` WHERE job_name = 'j'`).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != 1 {
		t.Errorf("%d history rows after the release was sent twice, want 1", runs)
	}
}

// The release planned ahead (WarmRelease) is planned, not run: the row
// and the history are as they were. The release that follows records the
// run as usual, and a WarmRelease after it starts nothing.
func TestTheReleasePlannedAheadWritesNothing(t *testing.T) {
	t.Parallel()
	ctx, pool, table, l := heldLease(t)
	state := func() (row string, runs int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT to_jsonb(l)::text, (SELECT count(*) FROM `+pgx.Identifier{table + HistorySuffix}.Sanitize()+
			`) FROM `+pgx.Identifier{table}.Sanitize()+` AS l WHERE job_name = 'j'`).Scan(&row, &runs); err != nil {
			t.Fatal(err)
		}
		return row, runs
	}
	row, runs := state()
	if err := l.planRelease(); err != nil {
		t.Fatalf("planning the release: %v", err)
	}
	if after, afterRuns := state(); after != row || afterRuns != runs {
		t.Errorf("planning the release changed the table:\nrow %s, %d runs\nwas %s, %d runs", after, afterRuns, row, runs)
	}

	l.WarmRelease()
	if err := l.Release(ctx, nil); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	timer := l.warmTimer
	l.mu.Unlock()
	l.WarmRelease()
	l.mu.Lock()
	again := l.warmTimer
	l.mu.Unlock()
	if again != timer {
		t.Error("WarmRelease after the release started a warm-up")
	}
	if _, afterRuns := state(); afterRuns != runs+1 {
		t.Errorf("%d runs recorded after the release, want %d", afterRuns, runs+1)
	}
}

// A run recorded without its row (RecordLost) a while after its command
// ended (a release first, retried on a loaded machine) keeps its times:
// it finished when the command ended, and started Ran before that.
func TestARunRecordedLateKeepsItsTimes(t *testing.T) {
	t.Parallel()
	ctx, pool, table, l := heldLease(t)
	ended := time.Now().Add(-5 * time.Second)
	if err := l.RecordLost(ctx, End{Attempt: 1, Outcome: OutcomeLost, Ran: time.Second, Ended: ended}); err != nil {
		t.Fatal(err)
	}
	var ran, endedAgo time.Duration
	if err := pool.QueryRow(ctx, `SELECT finished_at - started_at, now() - finished_at FROM `+
		pgx.Identifier{table + HistorySuffix}.Sanitize()).Scan(&ran, &endedAgo); err != nil {
		t.Fatal(err)
	}
	if ran != time.Second || endedAgo < 5*time.Second || endedAgo > 15*time.Second {
		t.Errorf("recorded: ran %s, ended %s ago; want 1s, 5s ago", ran, endedAgo)
	}
}
