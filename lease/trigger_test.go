package lease_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// Five schedulers take the same request at once, rounds after round: each
// request is run by exactly one of them, and is then a manual claim with
// that run's holder and token.
func TestRequestedRunIsTakenOnce(t *testing.T) {
	t.Parallel()
	pool, table, a, _, _ := twoSchedulers(t)
	var stores []*lease.Store
	for _, h := range []string{"a", "b", "c", "d", "e"} {
		s := newStore(t, pool, table, h)
		if _, err := s.Register(ctx(t), "job", everySpec, nil); err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	for round := 0; round < 10; round++ {
		at, err := a.RequestRun(ctx(t), "job")
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu     sync.Mutex
			leases []*lease.Lease
			wg     sync.WaitGroup
		)
		for _, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := s.TakeRequested(ctx(t), "job", everySpec)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Lease != nil {
					mu.Lock()
					leases = append(leases, r.Lease)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(leases) != 1 {
			t.Fatalf("round %d: %d instances took the request, want 1", round, len(leases))
		}
		l := leases[0]
		if !l.ScheduledAt().Equal(at) {
			t.Errorf("lease for %v, want the request's time %v", l.ScheduledAt(), at)
		}
		var (
			outcome string
			token   int64
		)
		err = pool.QueryRow(ctx(t), `SELECT outcome, fencing_token FROM `+pgx.Identifier{table + "_schedule"}.Sanitize()+
			` WHERE job_name = 'job' AND scheduled_at = $1`, at).Scan(&outcome, &token)
		if err != nil || outcome != lease.ClaimManual || token != l.Token() {
			t.Errorf("round %d: claim %q token %d (%v), want manual with the run's token %d", round, outcome, token, err, l.Token())
		}
		code := 0
		if err := l.Finish(ctx(t), lease.End{ExitCode: &code, Outcome: lease.OutcomeExited}); err != nil {
			t.Fatal(err)
		}
		// Nothing is left to take.
		if r, err := stores[0].TakeRequested(ctx(t), "job", everySpec); err != nil || r.Lease != nil || !r.At.IsZero() {
			t.Fatalf("round %d: after the run, a take found %+v (%v), want no request", round, r, err)
		}
	}
}

// A request and its manual run are not scheduled times: a scheduler that
// starts after them accounts from the latest scheduled time, so a time
// nobody ran before the request is still owed.
func TestRequestsDoNotAccountForScheduledTimes(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s := newStore(t, pool, table, "a")
	if _, err := s.Register(ctx(t), "job", everySpec, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestRun(ctx(t), "job"); err != nil {
		t.Fatal(err)
	}
	r, err := s.TakeRequested(ctx(t), "job", everySpec)
	if err != nil || r.Lease == nil {
		t.Fatalf("take of the request: %+v, %v", r, err)
	}
	if err := r.Lease.Finish(ctx(t), lease.End{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestRun(ctx(t), "job"); err != nil {
		t.Fatal(err)
	}
	reg, err := newStore(t, pool, table, "b").Register(ctx(t), "job", everySpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reg.Latest.IsZero() {
		t.Errorf("latest scheduled time %v, want none: only a manual run and a request are claimed", reg.Latest)
	}
}

// A job without a schedule recorded gets no request.
func TestRequestRunNeedsASchedule(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s := newStore(t, pool, table, "a")
	if _, err := s.RequestRun(ctx(t), "job"); !errors.Is(err, lease.ErrNoLeaseTable) {
		t.Errorf("without tables: %v, want ErrNoLeaseTable", err)
	}
	l, err := s.TryAcquire(ctx(t), "plain")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx(t), nil)
	if _, err := s.Register(ctx(t), "job", everySpec, nil); err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"plain", "none"} {
		if _, err := s.RequestRun(ctx(t), job); !errors.Is(err, lease.ErrNotScheduled) {
			t.Errorf("job %s: %v, want ErrNotScheduled", job, err)
		}
	}
}

// A withdrawal and a take of the same request race, round after round:
// exactly one of them wins. A withdrawn request is never run, and a taken
// one is never withdrawn: AwaitRequest then says it was taken, and by
// whom.
func TestWithdrawalRacesATake(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	asker := newStore(t, pool, table, "operator")
	sched := newStore(t, pool, table, "sched")
	if _, err := sched.Register(ctx(t), "job", everySpec, nil); err != nil {
		t.Fatal(err)
	}
	var withdrawn, taken int
	for round := 0; round < 20; round++ {
		at, err := asker.RequestRun(ctx(t), "job")
		if err != nil {
			t.Fatal(err)
		}
		var (
			r    lease.Requested
			terr error
			wg   sync.WaitGroup
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, terr = sched.TakeRequested(ctx(t), "job", everySpec)
		}()
		a, err := asker.AwaitRequest(ctx(t), "job", at, 0)
		wg.Wait()
		if err != nil || terr != nil {
			t.Fatalf("round %d: await %v, take %v", round, err, terr)
		}
		switch {
		case a.Withdrawn && r.Lease == nil:
			withdrawn++
		case a.Taken && r.Lease != nil && a.By == "sched":
			taken++
		default:
			t.Fatalf("round %d: await answered %+v and the take %+v: want exactly one to win", round, a, r)
		}
		if r.Lease != nil {
			if err := r.Lease.Finish(ctx(t), lease.End{}); err != nil {
				t.Fatal(err)
			}
		}
		if r, err := sched.TakeRequested(ctx(t), "job", everySpec); err != nil || r.Lease != nil || !r.At.IsZero() {
			t.Fatalf("round %d: after the race, a take found %+v (%v), want no request", round, r, err)
		}
	}
	t.Logf("%d withdrawn, %d taken", withdrawn, taken)
}

// A request that finds the lease held is neither taken nor withdrawn:
// AwaitRequest says who holds the lease, and the request stays.
func TestAwaitRequestBehindAHeldLease(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s := newStore(t, pool, table, "a")
	if _, err := s.Register(ctx(t), "job", everySpec, nil); err != nil {
		t.Fatal(err)
	}
	l, err := newStore(t, pool, table, "runner").TryAcquire(ctx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx(t), nil) }()
	at, err := s.RequestRun(ctx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.AwaitRequest(ctx(t), "job", at, 300*time.Millisecond)
	if err != nil || a.Held == nil || a.Held.Holder != "runner" || a.Taken || a.Withdrawn {
		t.Fatalf("behind a held lease: %+v (%v), want Held by runner", a, err)
	}
	if r, err := s.TakeRequested(ctx(t), "job", everySpec); err != nil || r.Held == nil || !r.At.Equal(at) {
		t.Errorf("the request does not wait for the lease: %+v (%v)", r, err)
	}
}
