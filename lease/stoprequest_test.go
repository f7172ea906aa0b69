package lease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/session"
	"github.com/redbite/leasewrap/lease"
)

// tracedSession is the connection lease.ConnectSession makes, with tr on it.
func tracedSession(t *testing.T, tr *tracer) *session.Conn {
	t.Helper()
	c, err := lease.ConnectSession(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Config()
	c.Close()
	cfg.ConnConfig.Tracer = tr
	s := session.New(cfg)
	t.Cleanup(s.Close)
	return s
}

// A holder on a session listens on its one connection for an operator's
// release of its lease, and ends the lease (Done) within round trips of
// it, not at its next renewal, a minute away; a forced release as well.
func TestAHolderOnASessionHearsItsReleaseAtOnce(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	slow := []lease.Option{lease.WithTTL(3 * time.Minute), lease.WithRenewInterval(time.Minute),
		lease.WithGrace(time.Second), lease.WithRetryInterval(time.Second)}
	operator := newStore(t, pool, table, "operator")
	for _, force := range []bool{false, true} {
		var tr tracer
		s := newStore(t, tracedSession(t, &tr), table, "h", slow...)
		l := mustAcquire(t, s, "job")
		pgtest.Eventually(t, 10*time.Second, "the holder listens", func() bool {
			return countTrips(tr.since(0), isListen) == 1
		})
		asked := time.Now()
		if _, _, err := operator.ReleaseHeld(ctx(t), "job", "h", l.Token(), force); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Done():
		case <-time.After(15 * time.Second):
			t.Fatalf("force=%v: the lease was not ended within 15s of the release (its next renewal is a minute away)", force)
		}
		if !errors.Is(l.Err(), lease.ErrReleasedByOperator) {
			t.Errorf("force=%v: lease ended with %v, want ErrReleasedByOperator", force, l.Err())
		}
		t.Logf("force=%v: ended %s after the release", force, time.Since(asked).Round(time.Millisecond))
		_ = l.Release(ctx(t), nil)
	}
}
