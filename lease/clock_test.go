package lease_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// fakeClock is a lease.Clock that moves only when the test says: a keeper's
// hour-long timings play out in milliseconds.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Duration
	waiters []fakeWaiter
	waiting chan struct{} // a token per Wait that started
}

type fakeWaiter struct {
	at   time.Duration
	wake chan struct{}
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Hour, waiting: make(chan struct{}, 1024)} }

func (c *fakeClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Wait(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	w := fakeWaiter{at: c.now + d, wake: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	c.waiting <- struct{}{}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.wake:
		return nil
	}
}

// next waits until the keeper sleeps, then moves the clock to the end of
// its sleep and wakes it. It returns false if the lease ended instead.
func (c *fakeClock) next(t *testing.T, l *lease.Lease) bool {
	t.Helper()
	select {
	case <-c.waiting:
	case <-l.Done():
		return false
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper never went to sleep")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sort.Slice(c.waiters, func(i, j int) bool { return c.waiters[i].at < c.waiters[j].at })
	w := c.waiters[0]
	c.waiters = c.waiters[1:]
	c.now = max(c.now, w.at)
	close(w.wake)
	return true
}

// countingObserver counts renewal attempts.
type countingObserver struct {
	mu               sync.Mutex
	renewed, failed  int
	contacted, fails int
}

func (o *countingObserver) Contacted()   { o.mu.Lock(); o.contacted++; o.mu.Unlock() }
func (o *countingObserver) Reached()     {}
func (o *countingObserver) Failed(error) { o.mu.Lock(); o.fails++; o.mu.Unlock() }
func (o *countingObserver) Lost(error)   {}
func (o *countingObserver) Renewed(_ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.renewed++
	} else {
		o.failed++
	}
}

var hourLong = lease.Timings{TTL: time.Hour, RenewInterval: 20 * time.Minute, Grace: 10 * time.Minute, RetryInterval: time.Minute}

// The keeper renews a renew interval after the acquiring statement was sent,
// and each renewal moves the local deadline to a TTL after it was sent.
func TestKeeperRenewsOnTheClock(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	clock := newFakeClock()
	obs := &countingObserver{}
	s := newStore(t, pool, pgtest.Table(t, pool), "a", lease.WithTimings(hourLong), lease.WithClock(clock), lease.WithObserver(obs))
	l := mustAcquire(t, s, "job")
	defer l.Release(ctx(t), nil)
	start := clock.Now()
	for clock.Now() < start+hourLong.RenewInterval {
		if !clock.next(t, l) {
			t.Fatalf("lease ended: %v", l.Err())
		}
	}
	pgtest.Eventually(t, 10*time.Second, "a renewal", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.renewed == 1
	})
	if rem := l.Remaining(); rem != hourLong.TTL {
		t.Errorf("after a renewal at +20m the lease has %s left, want the full TTL of %s", rem, hourLong.TTL)
	}
}

// With the database unreachable, the keeper retries every retry interval
// and ends the lease exactly grace + safety margin before its local
// deadline: not a tick earlier, not later.
func TestKeeperEndsTheLeaseWhenRenewalsFail(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	proxy, url := pgtest.Proxied(t, pool)
	viaProxy, err := pgxpool.New(ctx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer viaProxy.Close()
	clock := newFakeClock()
	obs := &countingObserver{}
	s := newStore(t, viaProxy, pgtest.Table(t, pool), "a", lease.WithTimings(hourLong), lease.WithClock(clock), lease.WithObserver(obs))
	l := mustAcquire(t, s, "job")
	defer l.Release(ctx(t), nil)
	stopAt := clock.Now() + hourLong.TTL - hourLong.StopBefore()
	proxy.Cut()
	for clock.next(t, l) {
		if clock.Now() > stopAt {
			t.Fatalf("lease still held at +%s, past the stop point", clock.Now()-stopAt)
		}
	}
	if now := clock.Now(); now != stopAt {
		t.Errorf("lease ended %s from the stop point, want exactly at it", now-stopAt)
	}
	if !errors.Is(l.Err(), lease.ErrLost) {
		t.Errorf("Err = %v, want ErrLost", l.Err())
	}
	// Renewals were tried at +20m and then every minute until +47m.
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if want := int((hourLong.TTL-hourLong.StopBefore()-hourLong.RenewInterval)/hourLong.RetryInterval) + 1; obs.failed < want-1 || obs.renewed != 0 {
		t.Errorf("renewals: %d failed, %d ok; want about %d failed", obs.failed, obs.renewed, want)
	}
}
