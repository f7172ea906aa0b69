package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// wantPaused asserts that err says the job is paused by by.
func wantPaused(t *testing.T, err error, by string) {
	t.Helper()
	var held *lease.HeldError
	if !errors.As(err, &held) || held.State != lease.StatePaused || held.Paused == nil || held.Paused.By != by {
		t.Fatalf("got %v, want the job paused by %q", err, by)
	}
}

// A paused job's lease is taken by no instance, of one slot or several,
// until it is resumed; a command running when it was paused goes on.
func TestAPausedJobIsNotTaken(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	a, op := newStore(t, pool, table, "a"), newStore(t, pool, table, "ops")
	l, err := a.TryAcquire(ctx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	p, running, err := op.Pause(ctx(t), "job", "disk full", time.Time{})
	if err != nil || running != "a" || p.By != "ops" || p.Reason != "disk full" || !p.Until.IsZero() {
		t.Fatalf("pause: %+v running %q (%v); want it by ops, until resumed, with a's command going on", p, running, err)
	}
	select {
	case <-l.Done():
		t.Fatal("the pause ended the running command's lease")
	case <-time.After(3 * 300 * time.Millisecond): // three renewals
	}
	l.Release(ctx(t), nil)
	_, err = a.TryAcquire(ctx(t), "job")
	wantPaused(t, err, "ops")
	_, err = newStore(t, pool, table, "s", lease.WithSlots(2)).TryAcquire(ctx(t), "other")
	if err != nil {
		t.Fatal(err) // another job is not paused
	}
	if _, _, err := op.Pause(ctx(t), "other", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	_, err = newStore(t, pool, table, "s2", lease.WithSlots(2)).TryAcquire(ctx(t), "other")
	wantPaused(t, err, "ops")
	was, err := op.Resume(ctx(t), "job")
	if err != nil || was == nil || was.By != "ops" {
		t.Fatalf("resume: %+v %v", was, err)
	}
	if again, err := op.Resume(ctx(t), "job"); err != nil || again != nil {
		t.Fatalf("a second resume: %+v %v, want nothing to resume", again, err)
	}
	l, err = a.TryAcquire(ctx(t), "job")
	if err != nil {
		t.Fatalf("after resume: %v", err)
	}
	l.Release(ctx(t), nil)
}

// A pause with an end runs out by itself. A take that a loaded machine
// sent as the pause ended (on the database clock) proves nothing: the test
// pauses another job longer, up to three times.
func TestAPauseRunsOut(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	a, op := newStore(t, pool, table, "a"), newStore(t, pool, table, "ops")
	dbNow := func() time.Time {
		var now time.Time
		if err := pool.QueryRow(ctx(t), "SELECT now()").Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}
	job, judged := "", false
	for i, d := range []time.Duration{time.Second, 4 * time.Second, 16 * time.Second} {
		job = fmt.Sprintf("job%d", i)
		end := dbNow().Add(d)
		if _, _, err := op.Pause(ctx(t), job, "", end); err != nil {
			t.Fatal(err)
		}
		l, err := a.TryAcquire(ctx(t), job)
		if err == nil && !dbNow().Before(end) {
			// Taken: the pause ended during the take.
			t.Logf("the take of %s came as its %s pause ended: pausing longer", job, d)
			l.Release(ctx(t), nil)
			continue
		}
		wantPaused(t, err, "ops")
		judged = true
		break
	}
	if !judged {
		t.Fatal("every take came after its pause ended: the test proved nothing")
	}
	pgtest.Eventually(t, 30*time.Second, "the pause to run out", func() bool {
		l, err := a.TryAcquire(ctx(t), job)
		if err == nil {
			l.Release(ctx(t), nil)
		}
		return err == nil
	})
}

// A standby waits while the job is paused, and takes the lease as soon as
// it is resumed.
func TestAStandbyTakesWhenTheJobIsResumed(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	a, op := newStore(t, pool, table, "a"), newStore(t, pool, table, "ops")
	if _, _, err := op.Pause(ctx(t), "job", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		l, err := a.Acquire(wctx, "job")
		if err == nil {
			l.Release(context.Background(), nil)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the standby of a paused job returned %v", err)
	case <-time.After(500 * time.Millisecond): // several retry intervals
	}
	if _, err := op.Resume(ctx(t), "job"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("after resume: %v", err)
	}
}

// A scheduled time due while the job is paused is claimed paused, once,
// with a history row, whether it is on time or owed (catch-up); a missed
// time recorded while paused is paused too. The times stay accounted for.
func TestScheduledTimesWhilePausedAreRecordedPaused(t *testing.T) {
	t.Parallel()
	pool, table, a, b, reg := twoSchedulers(t)
	op := newStore(t, pool, table, "ops")
	base := reg.Now.Truncate(2 * time.Second)
	if _, _, err := op.Pause(ctx(t), "job", "maintenance", time.Time{}); err != nil {
		t.Fatal(err)
	}
	for _, late := range []bool{false, true} {
		at := base.Add(-2 * time.Second)
		if late {
			at = base
		}
		c, err := a.TakeScheduled(ctx(t), "job", everySpec, at, !late)
		if err != nil || c.Lease != nil || c.Outcome != lease.OutcomePaused || c.By != "ops" {
			t.Fatalf("take of %v (base %v, reg %v) while paused: %v %+v, want claimed paused by ops", at, base, reg.Now, err, c)
		}
		wantAccounted(t, b, at, "paused")
	}
	if _, err := op.Resume(ctx(t), "job"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx(t), "SELECT count(*) FROM "+pgx.Identifier{table + "_history"}.Sanitize()+
		" WHERE outcome = 'paused'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d paused rows in the history (%v), want 2", n, err)
	}
	next := base.Add(2 * time.Second)
	pgtest.Eventually(t, 10*time.Second, "the next time to run once resumed", func() bool {
		c, err := b.TakeScheduled(ctx(t), "job", everySpec, next, true)
		if err != nil {
			t.Fatal(err)
		}
		if c.Lease != nil {
			c.Lease.Release(ctx(t), nil)
		}
		return c.Lease != nil
	})
}

// A take that finds the job paused says so from its own statement, with
// the pause it saw: a second read could find the pause just ended, and the
// job neither paused nor held.
func TestATakeFindingAPauseSaysSoInOneRoundTrip(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	op := newStore(t, pool, table, "ops")
	if _, err := op.Migrate(ctx(t)); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	for _, job := range []string{"one", "two"} {
		if _, _, err := op.Pause(ctx(t), job, "upgrade", until); err != nil {
			t.Fatal(err)
		}
	}
	var tr tracer
	traced := tracedPool(t, pgtest.URL(), &tr)
	for _, c := range []struct {
		job         string
		slots, want int // want: HeldError.Slots, 0 for one slot
	}{{"one", 1, 0}, {"two", 2, 2}} {
		s := newStore(t, traced, table, "a", lease.WithSlots(c.slots))
		mustAcquire(t, s, "warm").Release(ctx(t), nil) // the shape check is behind us
		from := len(tr.since(0))
		_, err := s.TryAcquire(ctx(t), c.job)
		wantPaused(t, err, "ops")
		var held *lease.HeldError
		errors.As(err, &held)
		if held.Paused.Reason != "upgrade" || held.Slots != c.want || held.ExpiresIn != time.Minute {
			t.Errorf("%d slots: %+v (pause %+v), want the reason, the slots and a look again in a minute", c.slots, held, held.Paused)
		}
		if trips := tr.since(from); len(trips) != 1 {
			t.Errorf("%d slots: a take that found the job paused made %d round trips, want 1: %v", c.slots, len(trips), trips)
		}
	}
}

// A time recorded missed while the job is paused (a scheduler catching up
// on times due while it was down) is recorded paused, by who paused the
// job, in its claim and its history row, as a take that finds the pause
// records it: not by the instance that recorded it.
func TestMissedTimesWhilePausedArePausedByWhoPaused(t *testing.T) {
	t.Parallel()
	pool, table, a, _, reg := twoSchedulers(t)
	op := newStore(t, pool, table, "ops")
	base := reg.Now.Truncate(2 * time.Second)
	if _, _, err := op.Pause(ctx(t), "job", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	at := base.Add(2 * time.Second)
	pgtest.Eventually(t, 10*time.Second, "a time due after the pause recorded", func() bool {
		n, _, _, err := a.RecordMissed(ctx(t), "job", lease.OutcomeMissed, []lease.Missed{{At: at}})
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	var claimBy, claim, runBy, run string
	if err := pool.QueryRow(ctx(t), "SELECT c.holder, c.outcome, h.holder, h.outcome FROM "+pgx.Identifier{table + "_schedule"}.Sanitize()+
		" c JOIN "+pgx.Identifier{table + "_history"}.Sanitize()+" h ON h.scheduled_at = c.scheduled_at WHERE c.scheduled_at = $1", at).
		Scan(&claimBy, &claim, &runBy, &run); err != nil {
		t.Fatal(err)
	}
	if claim != lease.OutcomePaused || run != lease.OutcomePaused || claimBy != "ops" || runBy != "ops" {
		t.Errorf("claim %s by %s, history %s by %s; want both paused by ops", claim, claimBy, run, runBy)
	}
}
