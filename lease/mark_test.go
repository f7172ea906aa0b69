package lease_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/lease"
)

// runTime takes the lease for at on s, and finishes the run at once.
func runTime(t *testing.T, s *lease.Store, at time.Time) {
	t.Helper()
	c, err := s.TakeScheduled(ctx(t), "job", everySpec, at, true)
	if err != nil || c.Lease == nil {
		t.Fatalf("take of %v: %v %+v", at, err, c)
	}
	code := 0
	if err := c.Lease.Finish(ctx(t), lease.End{ExitCode: &code, Outcome: lease.OutcomeExited}); err != nil {
		t.Fatal(err)
	}
}

// wantAccounted asserts that s can neither run nor record at again.
func wantAccounted(t *testing.T, s *lease.Store, at time.Time, why string) {
	t.Helper()
	c, err := s.TakeScheduled(ctx(t), "job", everySpec, at, true)
	if err != nil || c.Lease != nil || !c.Decided() {
		if c.Lease != nil {
			c.Lease.Release(ctx(t), nil)
		}
		t.Fatalf("%s: take of %v got a lease %t, claim %q (%v); want it accounted for", why, at, c.Lease != nil, c.Outcome, err)
	}
	if n, _, _, err := s.RecordMissed(ctx(t), "job", lease.OutcomeMissed, []lease.Missed{{At: at}}); err != nil || n != 0 {
		t.Fatalf("%s: recording %v missed wrote %d (%v); want 0", why, at, n, err)
	}
}

// An instance that keeps claims a short time prunes them; another that
// catches up over a longer window, back from an outage with its old
// position, must not run the pruned times again.
func TestPrunedClaimsLetNoTimeRunAgain(t *testing.T) {
	t.Parallel()
	_, _, a, b, reg := twoSchedulers(t)
	base := reg.Now.Truncate(2 * time.Second)
	for i := 5; i >= 1; i-- {
		runTime(t, a, base.Add(-time.Duration(2*i)*time.Second))
	}
	// Keep nothing older than a microsecond: every claim but the latest goes.
	if err := a.PruneClaims(ctx(t), "job", time.Microsecond); err != nil {
		t.Fatal(err)
	}
	for i := 5; i >= 1; i-- {
		wantAccounted(t, b, base.Add(-time.Duration(2*i)*time.Second), "after pruning")
	}
}

// An operator who empties the claims table (TRUNCATE, or DELETE) does not
// make the time that just ran due again: a scheduler that starts next
// accounts from the lease row's mark.
func TestEmptiedClaimsLetNoTimeRunAgain(t *testing.T) {
	t.Parallel()
	for _, empty := range []string{"TRUNCATE ", "DELETE FROM "} {
		t.Run(empty, func(t *testing.T) {
			t.Parallel()
			pool, table, a, b, reg := twoSchedulers(t)
			at := reg.Now.Truncate(2 * time.Second)
			runTime(t, a, at)
			mustExec(t, pool, empty+pgx.Identifier{table + "_schedule"}.Sanitize())
			again, err := b.Register(ctx(t), "job", everySpec, nil)
			if err != nil {
				t.Fatal(err)
			}
			if again.Latest.Before(at) {
				t.Errorf("a scheduler starting now accounts from %v, want %v or later", again.Latest, at)
			}
			wantAccounted(t, b, at, "after the claims were emptied")
		})
	}
}

// Two instances back from an outage at different moments summarise
// missed times that overlap: the second summary, reaching back to the
// first one's times, is refused whole, and says where to plan from.
func TestMissedSummariesNeverOverlap(t *testing.T) {
	t.Parallel()
	pool, table, a, b, reg := twoSchedulers(t)
	base := reg.Now.Truncate(2 * time.Second)
	at := func(i int) time.Time { return base.Add(-time.Duration(2*i) * time.Second) }
	n, _, latest, err := a.RecordMissed(ctx(t), "job", lease.OutcomeMissed, []lease.Missed{{First: at(20), At: at(10)}})
	if err != nil || n != 1 || !latest.Equal(at(10)) {
		t.Fatalf("first summary: %d %v %v", n, latest, err)
	}
	n, _, latest, err = b.RecordMissed(ctx(t), "job", lease.OutcomeMissed, []lease.Missed{{First: at(15), At: at(5)}, {At: at(4)}})
	if err != nil || n != 0 || !latest.Equal(at(10)) {
		t.Fatalf("overlapping summary: recorded %d, mark %v (%v); want 0 and the first summary's last time", n, latest, err)
	}
	n, _, _, err = b.RecordMissed(ctx(t), "job", lease.OutcomeMissed, []lease.Missed{{First: at(9), At: at(5)}, {At: at(4)}})
	if err != nil || n != 2 {
		t.Fatalf("summary after the mark: recorded %d (%v), want 2", n, err)
	}
	var total int64
	if err := pool.QueryRow(ctx(t), `SELECT count(*) FROM `+pgx.Identifier{table + "_schedule"}.Sanitize()).Scan(&total); err != nil || total != 3 {
		t.Fatalf("%d claims (%v), want 3", total, err)
	}
}

// An instance with --catch-up latest records the late times missed as one
// summary; one with --catch-up all, back a moment later, must not run
// them: the first to account for a time decides.
func TestTimesInsideAMissedSummaryAreNotRun(t *testing.T) {
	t.Parallel()
	_, _, a, b, reg := twoSchedulers(t)
	base := reg.Now.Truncate(2 * time.Second)
	if n, _, _, err := a.RecordMissed(ctx(t), "job", lease.OutcomeMissed,
		[]lease.Missed{{First: base.Add(-40 * time.Second), At: base.Add(-4 * time.Second)}}); err != nil || n != 1 {
		t.Fatalf("summary: %d %v", n, err)
	}
	for i := 20; i >= 2; i-- {
		wantAccounted(t, b, base.Add(-time.Duration(2*i)*time.Second), "inside the summary")
	}
	runTime(t, b, base.Add(-2*time.Second))
}

// A time skipped while the lease was held moves the mark too: a time
// before it is not run later.
func TestASkippedTimeMovesTheMark(t *testing.T) {
	t.Parallel()
	_, _, a, b, reg := twoSchedulers(t)
	base := reg.Now.Truncate(2 * time.Second)
	c, err := a.TakeScheduled(ctx(t), "job", everySpec, base.Add(-6*time.Second), true)
	if err != nil || c.Lease == nil {
		t.Fatalf("take: %v %+v", err, c)
	}
	skip, err := b.TakeScheduled(ctx(t), "job", everySpec, base, true)
	if err != nil || skip.Outcome != lease.OutcomeSkipped || !skip.Now.After(base.Add(-time.Second)) {
		t.Fatalf("due time while held: %v %+v, want skipped", err, skip)
	}
	c.Lease.Release(ctx(t), nil)
	wantAccounted(t, b, base.Add(-2*time.Second), "before a skipped time")
}

// Missed times of a job whose lease row an operator deleted are recorded
// all the same: the row is made again, and the mark moves on.
func TestMissedTimesAreRecordedWhenTheLeaseRowIsGone(t *testing.T) {
	t.Parallel()
	pool, table, a, b, reg := twoSchedulers(t)
	base := reg.Now.Truncate(2 * time.Second)
	mustExec(t, pool, `DELETE FROM `+pgx.Identifier{table}.Sanitize())
	n, _, latest, err := a.RecordMissed(ctx(t), "job", lease.OutcomeMissed, []lease.Missed{{At: base.Add(-2 * time.Second)}})
	if err != nil || n != 1 || !latest.Equal(base.Add(-2*time.Second)) {
		t.Fatalf("recorded %d, mark %v (%v); want 1 and the time", n, latest, err)
	}
	wantAccounted(t, b, base.Add(-2*time.Second), "recorded without a lease row")
}

// A scheduled run whose holder never released is closed as lost with its
// scheduled time even when an operator emptied the claims meanwhile: the
// time keeps its one account.
func TestALostScheduledRunKeepsItsTimeWhenTheClaimsAreEmptied(t *testing.T) {
	t.Parallel()
	pool, table, _, b, reg := twoSchedulers(t)
	// A holder whose keeper renews only after the test: its row, expired
	// by hand, stays expired, as a dead holder's would.
	gone := newStore(t, pool, table, "gone", lease.WithTimings(hourLong))
	if _, err := gone.Register(ctx(t), "job", everySpec, nil); err != nil {
		t.Fatal(err)
	}
	base := reg.Now.Truncate(2 * time.Second)
	c, err := gone.TakeScheduled(ctx(t), "job", everySpec, base.Add(-2*time.Second), true)
	if err != nil || c.Lease == nil {
		t.Fatalf("take: %v %+v", err, c)
	}
	defer c.Lease.Release(ctx(t), nil)
	// The holder is gone: its lease expired, and the claims were emptied.
	mustExec(t, pool, `UPDATE `+pgx.Identifier{table}.Sanitize()+` SET expires_at = now() - interval '1 second'`)
	mustExec(t, pool, `TRUNCATE `+pgx.Identifier{table + "_schedule"}.Sanitize())
	runTime(t, b, base)
	var scheduled *time.Time
	if err := pool.QueryRow(ctx(t), `SELECT scheduled_at FROM `+pgx.Identifier{table + "_history"}.Sanitize()+
		` WHERE outcome = 'lost'`).Scan(&scheduled); err != nil {
		t.Fatal(err)
	}
	if scheduled == nil || !scheduled.Equal(base.Add(-2*time.Second)) {
		t.Errorf("the lost run is recorded for %v, want %v", scheduled, base.Add(-2*time.Second))
	}
}
