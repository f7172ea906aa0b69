package lease

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// standbyTimings let a test see a standby's pings within a second.
var standbyTimings = []Option{WithTTL(5 * time.Second), WithRenewInterval(200 * time.Millisecond),
	WithGrace(time.Second), WithRetryInterval(500 * time.Millisecond)}

// listeningStandby returns a standby of a new Store on url, listening.
func listeningStandby(t *testing.T, ctx context.Context, url string) *standby {
	t.Helper()
	pool, err := Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := New(pool, append(standbyTimings, WithTable("lease"))...)
	if err != nil {
		t.Fatal(err)
	}
	sb := s.newStandby(ctx, "job")
	// Its first LISTEN has a retry interval's budget, which a loaded
	// machine can miss; a standby tries again on its next wait, as here.
	pgtest.Eventually(t, 30*time.Second, "the standby listening", func() bool { return sb.listening() || sb.listen(ctx) })
	// The probe that listen sent went through the pool: close that
	// connection, leaving the standby's own.
	pool.Reset()
	return sb
}

// A listening standby's ping is a round trip that PostgreSQL counts as no
// transaction: a connection that LISTENs and pings twenty times costs the
// database's xact_commit as much as one that only LISTENs (give or take a
// LISTEN retried on a loaded machine). On a cluster of
// its own, with the standbys in a database of their own, so that nothing
// else moves the count.
func TestStandbyPingIsNoTransaction(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster := pgtest.StartCluster(t)
	admin, err := pgxpool.New(ctx, cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	if _, err := admin.Exec(ctx, `CREATE DATABASE standbys`); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(cluster.URL(), "/postgres?", "/standbys?", 1)
	if url == cluster.URL() {
		t.Fatalf("cannot name database standbys in %s", url)
	}
	// commits reads the database's count once no backend is connected to
	// it: a backend reports its counts when it exits, at the latest.
	commits := func() (n int64) {
		pgtest.Eventually(t, 30*time.Second, "the standby's backend gone", func() bool {
			var left int
			err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = 'standbys'`).Scan(&left)
			return err == nil && left == 0
		})
		if err := admin.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = 'standbys'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	c0 := commits()
	listeningStandby(t, ctx, url).close(ctx)
	c1 := commits()
	sb := listeningStandby(t, ctx, url)
	for i := range 20 {
		if err := sb.ping(ctx); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
	sb.close(ctx)
	c2 := commits()
	// A loaded machine may make either standby LISTEN twice (its first
	// try outran the retry interval): a transaction more or less on either
	// side. Twenty pings that were statements would be twenty more.
	if listen, pinged := c1-c0, c2-c1; pinged > listen+2 {
		t.Errorf("a standby that pinged 20 times committed %d transactions, one that did not %d: want as many (give or take a retried LISTEN)", pinged, listen)
	}
}

// A listening standby whose connection goes silent (a cut cable: no reset,
// no error) finds out at its next ping, not at the end of its wait, and
// stops listening so that its caller looks through the pool.
func TestListeningStandbyNoticesASilentConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proxy, url := pgtest.Proxied(t, pgtest.Pool(t))
	sb := listeningStandby(t, ctx, url)
	defer sb.close(ctx)
	proxy.Blackhole()
	done := make(chan bool, 1)
	go func() {
		payload, err := sb.wait(ctx, time.Hour)
		if err != nil {
			t.Error(err)
		}
		done <- payload != ""
	}()
	select {
	case notified := <-done:
		if notified || sb.listening() {
			t.Errorf("after a silent cut: notified %v, listening %v; want neither", notified, sb.listening())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a standby waiting an hour did not notice its connection went silent (pings every 200ms, each given a look's budget)")
	}
}

// A release is announced on its job's own channel, where the job's
// standbys listen, and on the table's, where those of earlier versions do:
// the name PostgreSQL computes is the one a standby listens on, and a
// listener on job a's channel hears a's releases (the holder's own and an
// operator's --force, which also asks the holder to stop) and never b's.
func TestReleaseIsAnnouncedOnItsJobsChannel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	s, err := New(pool, append(standbyTimings, WithTable(pgtest.Table(t, pool)), WithHolder("h"))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, ch := range []string{jobChannel(s.channel, "a"), s.channel} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	take := func(job string) *Lease {
		l, err := s.TryAcquire(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, job := range []string{"b", "a"} {
		if err := take(job).Release(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	l := take("a")
	if _, _, err := s.ReleaseHeld(ctx, "a", "", 0, true); err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx, nil) // released by the operator already: nothing to do
	heard := map[string][]string{}
	// b and a on the table's channel and a on a's, twice for a; and on
	// a's, the operator's request that its holder stop.
	for range 6 {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("heard %v, then: %v", heard, err)
		}
		heard[n.Channel] = append(heard[n.Channel], n.Payload)
	}
	stop := fmt.Sprintf("stop\n%d\na", l.Token())
	want := map[string][]string{jobChannel(s.channel, "a"): {"a", stop, "a"}, s.channel: {"b", "a", "a"}}
	if fmt.Sprint(heard) != fmt.Sprint(want) {
		t.Errorf("heard %v, want %v", heard, want)
	}
}
