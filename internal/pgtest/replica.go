package pgtest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/tcpproxy"
)

// Pair is a primary and a streaming hot standby, two throwaway clusters on
// loopback ports that stay the same through failovers, so that one
// multi-host connection string (DSN) names both for the pair's whole life.
// The standby streams through a TCP proxy, so that a test can hold
// replication back (HoldBack) and make the standby lag.
//
// A synchronous pair runs with synchronous_standby_names = '*' while its
// standby streams: a commit is acknowledged once the standby has flushed
// it. Between a promotion and the old primary's return as a standby the new
// primary commits alone (as Patroni's non-strict synchronous mode does),
// until Rejoin makes it synchronous again.
type Pair struct {
	Sync    bool
	nodes   [2]*Cluster
	primary int
	link    *tcpproxy.Proxy
}

// serverTimeout bounds the pair's own waits for its servers (streaming,
// catching up): infrastructure, not the timings under test.
const serverTimeout = 60 * time.Second

// StartPair starts a primary and a standby of it; both are stopped and
// removed when the test ends. Without PostgreSQL's server binaries the test
// fails under CI=true and skips elsewhere.
func StartPair(t testing.TB, sync bool) *Pair {
	t.Helper()
	p := &Pair{Sync: sync}
	p.nodes[0] = StartCluster(t)
	p.nodes[1] = newCluster(t)
	// A promotion requested just as the standby's walreceiver fails can wait
	// wal_retrieve_retry_interval (5 s by default) before it happens (seen
	// on PostgreSQL 15, one promotion in about thirty): longer than a
	// leader's renewal budget in the failover scenarios. Every base backup
	// carries this setting to the next standby.
	conn := p.Conn(t)
	for _, q := range []string{`ALTER SYSTEM SET wal_retrieve_retry_interval = '100ms'`, `SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close(context.Background())
	p.Rejoin(t)
	return p
}

// Primary is the node that takes writes.
func (p *Pair) Primary() *Cluster { return p.nodes[p.primary] }

// Standby is the other node (stopped between a failover and Rejoin).
func (p *Pair) Standby() *Cluster { return p.nodes[1-p.primary] }

// DSN is a key=value connection string naming both nodes, always in the
// same order, that connects to whichever accepts writes.
func (p *Pair) DSN() string {
	return fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=postgres sslmode=disable connect_timeout=1 target_session_attrs=read-write",
		p.nodes[0].Port, p.nodes[1].Port)
}

// HoldBack stops replication without telling either server: WAL the primary
// writes from now on does not reach the standby (a lagging standby, or a
// replication link that stalled), until the next failover or Rejoin. On a
// synchronous pair commits then wait.
func (p *Pair) HoldBack() { p.link.Blackhole() }

// Resume lets replication through again after HoldBack: the held-back
// connection is closed, the standby connects again, and Resume returns
// once it streams and has flushed everything the primary had written.
func (p *Pair) Resume(t testing.TB) {
	t.Helper()
	p.link.Restore()
	conn := p.Conn(t)
	defer conn.Close(context.Background())
	poll(t, "standby streaming again", func() (bool, error) {
		var n int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&n)
		return n == 1, err
	})
	p.WaitCaughtUp(t)
}

// LoseStandby stops the standby like a power cut and cuts its link, and
// waits until the primary lists no standby in pg_stat_replication: the
// primary streams to no one until Rejoin (on a synchronous pair, commits
// wait until then).
func (p *Pair) LoseStandby(t testing.TB) {
	t.Helper()
	p.Standby().Crash(t)
	p.link.Cut()
	conn := p.Conn(t)
	defer conn.Close(context.Background())
	poll(t, "primary without standby", func() (bool, error) {
		var n int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_replication`).Scan(&n)
		return n == 0, err
	})
}

// Failover crashes the primary and promotes the standby (Crash, then
// Promote), and returns the new primary's clock when it was promoted.
func (p *Pair) Failover(t testing.TB) time.Time {
	t.Helper()
	p.Crash(t)
	return p.Promote(t)
}

// Crash stops the primary with an immediate shutdown, as a power cut would:
// WAL it had not sent is lost to the standby.
func (p *Pair) Crash(t testing.TB) {
	t.Helper()
	p.Primary().Crash(t)
	p.link.Cut()
}

// Promote ends the standby's recovery, makes it the primary and waits until
// it accepts writes. It returns the new primary's clock then.
func (p *Pair) Promote(t testing.TB) time.Time {
	t.Helper()
	p.primary = 1 - p.primary
	p.Primary().Promote(t)
	conn := p.Conn(t)
	defer conn.Close(context.Background())
	var promoted time.Time
	if err := conn.QueryRow(context.Background(), `SELECT now()`).Scan(&promoted); err != nil {
		t.Fatal(err)
	}
	return promoted
}

// Rejoin makes the standby node a fresh standby of the primary: a new base
// backup (its old data, with writes the new primary never saw, is thrown
// away), streaming through a new proxy. It returns once the standby streams
// and, for a synchronous pair, is the synchronous standby, and has flushed
// everything the primary wrote before.
func (p *Pair) Rejoin(t testing.TB) {
	t.Helper()
	standby := p.Standby()
	if standby.Running() {
		standby.Crash(t)
	}
	if p.link != nil {
		p.link.Close()
	}
	// Started after the clusters, the proxy is closed before they stop.
	p.link = tcpproxy.Start(t, p.Primary().Addr())
	_, port, _ := net.SplitHostPort(p.link.Addr())
	linkPort, _ := strconv.Atoi(port)
	// The backup carries the primary's postgresql.auto.conf, where
	// synchronous_standby_names is still empty: a standby promoted later
	// starts out committing alone.
	standby.rebuildFrom(t, "127.0.0.1", linkPort)
	ctx := context.Background()
	want := "async"
	if p.Sync {
		want = "sync"
		conn := p.Conn(t)
		for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = '*'`, `SELECT pg_reload_conf()`} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		conn.Close(ctx)
	}
	poll(t, "standby streaming ("+want+")", func() (bool, error) {
		// A new session each time, which has read the reloaded configuration.
		conn := p.Conn(t)
		defer conn.Close(ctx)
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1`, want).Scan(&n)
		return n == 1, err
	})
	p.WaitCaughtUp(t)
}

// WaitCaughtUp waits until the standby has flushed all WAL the primary had
// written when it was called.
func (p *Pair) WaitCaughtUp(t testing.TB) {
	t.Helper()
	conn := p.Conn(t)
	defer conn.Close(context.Background())
	var lsn string
	if err := conn.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	poll(t, "standby flushed "+lsn, func() (bool, error) {
		var ok bool
		err := conn.QueryRow(context.Background(),
			`SELECT coalesce(bool_and(flush_lsn >= $1::pg_lsn), false) FROM pg_stat_replication`, lsn).Scan(&ok)
		return ok, err
	})
}

// Conn connects to the primary; the caller closes it.
func (p *Pair) Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	c := p.Primary()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatalf("connect to the server on port %d: %v", c.Port, err)
	}
	return conn
}

// poll calls done every few milliseconds until it reports true, failing the
// test on an error or after serverTimeout.
func poll(t testing.TB, what string, done func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(serverTimeout)
	for {
		ok, err := done()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, serverTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
