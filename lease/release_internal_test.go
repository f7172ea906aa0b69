package lease

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// A release sent again, as releaseRow does when the connection broke
// before the answer (the first may have committed: a switchover ends
// every session), records the run once.
func TestAReleaseSentAgainRecordsTheRunOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
