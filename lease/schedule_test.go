package lease_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

const everySpec = "@every 2s"

// twoSchedulers registers two stores on a fresh table for job "job" on
// everySpec.
func twoSchedulers(t *testing.T) (*pgxpool.Pool, string, *lease.Store, *lease.Store, lease.Registration) {
	t.Helper()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	a, b := newStore(t, pool, table, "a"), newStore(t, pool, table, "b")
	reg, err := a.Register(ctx(t), "job", everySpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Register(ctx(t), "job", everySpec, nil); err != nil {
		t.Fatal(err)
	}
	return pool, table, a, b, reg
}

func TestScheduledTakeClaimsEachTimeOnce(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	reg, err := newStore(t, pool, table, "a").Register(ctx(t), "job", everySpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := reg.Now.Truncate(2 * time.Second)
	// Five instances take the same due time at once: exactly one runs it.
	var (
		mu     sync.Mutex
		leases []*lease.Lease
		wg     sync.WaitGroup
	)
	for _, h := range []string{"a", "b", "c", "d", "e"} {
		s := newStore(t, pool, table, h)
		if _, err := s.Register(ctx(t), "job", everySpec, nil); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.TakeScheduled(ctx(t), "job", everySpec, at, true)
			if err != nil {
				t.Error(err)
				return
			}
			if c.Lease != nil {
				mu.Lock()
				leases = append(leases, c.Lease)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(leases) != 1 {
		t.Fatalf("%d instances took the time, want 1", len(leases))
	}
	l := leases[0]
	if !l.ScheduledAt().Equal(at) {
		t.Errorf("lease for %v, want %v", l.ScheduledAt(), at)
	}
	// Once the run is over, the lease is free, but the time stays claimed.
	code := 0
	if err := l.Finish(ctx(t), lease.End{ExitCode: &code, Outcome: lease.OutcomeExited}); err != nil {
		t.Fatal(err)
	}
	c, err := newStore(t, pool, table, "late").TakeScheduled(ctx(t), "job", everySpec, at, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.Lease != nil || c.Outcome != lease.ClaimRun {
		t.Fatalf("a late instance got lease %v, claim %q; want the time claimed as run", c.Lease, c.Outcome)
	}
	var (
		scheduled time.Time
		outcome   string
	)
	if err := pool.QueryRow(ctx(t), "SELECT scheduled_at, outcome FROM "+pgx.Identifier{table + "_history"}.Sanitize()).
		Scan(&scheduled, &outcome); err != nil {
		t.Fatal(err)
	}
	if !scheduled.Equal(at) || outcome != lease.OutcomeExited {
		t.Errorf("history has %v %s, want %v exited", scheduled, outcome, at)
	}
}

// A time due while another instance holds the lease is skipped, once
// (a late time is not: the holder may be catching up), and the scheduler
// that skipped it does not queue for the lease.
func TestScheduledTakeSkipsATimeWhileTheLeaseIsHeld(t *testing.T) {
	t.Parallel()
	pool, table, a, b, reg := twoSchedulers(t)
	first := reg.Now.Truncate(2 * time.Second).Add(-2 * time.Second)
	c, err := a.TakeScheduled(ctx(t), "job", everySpec, first, true)
	if err != nil || c.Lease == nil {
		t.Fatalf("take: %v %+v", err, c)
	}
	defer c.Lease.Release(ctx(t), nil)
	next := first.Add(2 * time.Second)
	// A late time is not skipped: the holder may be catching up.
	late, err := b.TakeScheduled(ctx(t), "job", everySpec, next, false)
	if err != nil || late.Decided() || late.Held == nil {
		t.Fatalf("late time: %v %+v, want held and undecided", err, late)
	}
	for range 2 {
		skip, err := b.TakeScheduled(ctx(t), "job", everySpec, next, true)
		if err != nil || skip.Lease != nil || skip.Outcome != lease.OutcomeSkipped {
			t.Fatalf("due time while held: %v %+v, want skipped", err, skip)
		}
	}
	// A scheduler does not queue: each time is claimed with its own take.
	if q := queueOf(t, pool, table, "job"); len(q) > 0 {
		t.Errorf("queue %v after a scheduler found the lease held, want none", q)
	}
	var n int
	if err := pool.QueryRow(ctx(t), "SELECT count(*) FROM "+pgx.Identifier{table + "_history"}.Sanitize()+
		" WHERE outcome = 'skipped' AND scheduled_at = $1", next).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d skipped rows (%v), want 1", n, err)
	}
}

func TestMissedTimesAreRecordedOnce(t *testing.T) {
	t.Parallel()
	pool, table, a, b, reg := twoSchedulers(t)
	base := reg.Now.Truncate(2 * time.Second)
	times := []lease.Missed{{At: base.Add(-6 * time.Second), First: base.Add(-20 * time.Second)}, {At: base.Add(-4 * time.Second)},
		{At: base.Add(-2 * time.Second)}, {At: base.Add(time.Hour)}}
	n, _, latest, err := a.RecordMissed(ctx(t), "job", lease.OutcomeMissed, times)
	if err != nil || n != 3 || !latest.Equal(base.Add(-2*time.Second)) {
		t.Fatalf("recorded %d (latest %v, %v), want 3 (not the time to come)", n, latest, err)
	}
	if n, _, _, err := b.RecordMissed(ctx(t), "job", lease.OutcomeMissed, times); err != nil || n != 0 {
		t.Fatalf("second record: %d, %v; want 0", n, err)
	}
	c, err := b.TakeScheduled(ctx(t), "job", everySpec, base.Add(-2*time.Second), true)
	if err != nil || c.Lease != nil || c.Outcome != lease.OutcomeMissed {
		t.Fatalf("take of a missed time: %v %+v", err, c)
	}
	var first time.Time
	if err := pool.QueryRow(ctx(t), "SELECT started_at FROM "+pgx.Identifier{table + "_history"}.Sanitize()+
		" WHERE scheduled_at = $1 AND outcome = 'missed'", base.Add(-6*time.Second)).Scan(&first); err != nil || !first.Equal(base.Add(-20*time.Second)) {
		t.Fatalf("summary row starts %v (%v)", first, err)
	}
}

func TestInstancesWithAnotherScheduleAreRefused(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	if _, err := newStore(t, pool, table, "a").Register(ctx(t), "job", everySpec, nil); err != nil {
		t.Fatal(err)
	}
	_, err := newStore(t, pool, table, "b").Register(ctx(t), "job", "@every 3s", nil)
	var se *lease.ScheduleError
	if !errors.As(err, &se) || se.Found != everySpec {
		t.Fatalf("got %v, want a *ScheduleError naming %q", err, everySpec)
	}
}

// A scheduler's connection that broke while it slept until the next time
// costs the take no failure: it is sent again on a fresh one.
func TestScheduledTakeSurvivesAConnectionThatBrokeWhileIdle(t *testing.T) {
	t.Parallel()
	admin := pgtest.Pool(t)
	table := pgtest.Table(t, admin)
	app := "lw_idle_" + strings.TrimPrefix(table, "lw_")
	if len(app) > 63 {
		app = app[:63]
	}
	pool, err := lease.Connect(ctx(t), pgtest.URL()+"&application_name="+app)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := newStore(t, pool, table, "a")
	reg, err := s.Register(ctx(t), "job", everySpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '`+app+`'`)
	c, err := s.TakeScheduled(ctx(t), "job", everySpec, reg.Now.Truncate(2*time.Second), true)
	if err != nil || c.Lease == nil {
		t.Fatalf("take after the idle connection was cut: %v %+v", err, c)
	}
	c.Lease.Release(ctx(t), nil)
}

// A scheduler runs for months: an operator who drops the claims table, or
// the lease table, under it does not stop it for good. Its next take makes
// the table again and claims its time.
func TestScheduledTakeMakesAgainATableDroppedUnderIt(t *testing.T) {
	t.Parallel()
	for _, dropped := range []string{"claims", "lease"} {
		t.Run(dropped, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.Pool(t)
			table := pgtest.Table(t, pool)
			s := newStore(t, pool, table, "a")
			reg, err := s.Register(ctx(t), "job", everySpec, nil)
			if err != nil {
				t.Fatal(err)
			}
			drop := pgx.Identifier{table}.Sanitize()
			if dropped == "claims" {
				drop = pgx.Identifier{table + "_schedule"}.Sanitize()
			}
			mustExec(t, pool, `DROP TABLE `+drop+` CASCADE`)
			at := reg.Now.Truncate(2 * time.Second)
			c, err := s.TakeScheduled(ctx(t), "job", everySpec, at, true)
			if err != nil || c.Lease == nil {
				t.Fatalf("take after the %s table was dropped: %v %+v", dropped, err, c)
			}
			c.Lease.Release(ctx(t), nil)
			var outcome string
			if err := pool.QueryRow(ctx(t), `SELECT outcome FROM `+pgx.Identifier{table + "_schedule"}.Sanitize()+
				` WHERE job_name = 'job' AND scheduled_at = $1`, at).Scan(&outcome); err != nil || outcome != "run" {
				t.Errorf("the time's claim: %q %v, want run", outcome, err)
			}
		})
	}
}

// Instances whose zone data compute other times for one spec are refused
// as for another schedule; a job recorded before fingerprints were gets
// the first one that registers; resetting the schedule resets it too.
func TestInstancesWithOtherZoneDataAreRefused(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	const spec = "CRON_TZ=Europe/Berlin 24 16 * * *"
	rules := func(fp string) lease.ZoneRules {
		return func(year int) string { return strconv.Itoa(year) + ":" + fp }
	}
	if _, err := newStore(t, pool, table, "a").Register(ctx(t), "job", spec, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := newStore(t, pool, table, "b").Register(ctx(t), "job", spec, rules("old")); err != nil {
		t.Fatalf("the first fingerprint of a recorded schedule: %v", err)
	}
	_, err := newStore(t, pool, table, "c").Register(ctx(t), "job", spec, rules("new"))
	var se *lease.ScheduleError
	if !errors.As(err, &se) || !se.ZoneData || !strings.Contains(err.Error(), "other zone data") {
		t.Fatalf("other zone data: %v, want a *ScheduleError saying so", err)
	}
	if _, err := newStore(t, pool, table, "d").Register(ctx(t), "job", spec, rules("old")); err != nil {
		t.Fatalf("the same zone data: %v", err)
	}
	mustExec(t, pool, `UPDATE `+pgx.Identifier{table}.Sanitize()+` SET schedule = NULL`)
	if _, err := newStore(t, pool, table, "c").Register(ctx(t), "job", spec, rules("new")); err != nil {
		t.Fatalf("after the schedule was reset: %v", err)
	}
	if _, err := newStore(t, pool, table, "b").Register(ctx(t), "job", spec, rules("old")); !errors.As(err, &se) {
		t.Fatalf("the old zone data after the reset: %v, want refused", err)
	}
}

// The lease row records when the job's schedule was set: by the first
// instance that registers it, kept by every later one, moved by a
// reschedule to another schedule (not by one to the same).
func TestTheScheduleRecordsWhenItWasSet(t *testing.T) {
	t.Parallel()
	pool, table, a, b, reg := twoSchedulers(t)
	since := func() time.Time {
		t.Helper()
		var at *time.Time
		if err := pool.QueryRow(ctx(t), "SELECT scheduled_since FROM "+pgx.Identifier{table}.Sanitize()+" WHERE job_name = 'job'").Scan(&at); err != nil {
			t.Fatal(err)
		}
		if at == nil {
			t.Fatal("scheduled_since is NULL")
		}
		return *at
	}
	first := since()
	if first.After(reg.Now) || reg.Now.Sub(first) > time.Minute {
		t.Fatalf("scheduled_since %v, want when a registered (%v)", first, reg.Now)
	}
	if _, err := b.Register(ctx(t), "job", everySpec, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reschedule(ctx(t), "job", everySpec); err != nil {
		t.Fatal(err)
	}
	if got := since(); !got.Equal(first) {
		t.Fatalf("scheduled_since %v after a second registration and a reschedule to the same, want %v", got, first)
	}
	if _, err := a.Reschedule(ctx(t), "job", "@every 3s"); err != nil {
		t.Fatal(err)
	}
	if got := since(); !got.After(first) {
		t.Fatalf("scheduled_since %v after a reschedule, want later than %v", got, first)
	}
}
