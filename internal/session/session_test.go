package session_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/session"
)

var seq atomic.Int64

// open returns a session on the test database named by an
// application_name of its own (returned), closed when the test ends.
func open(t *testing.T) (*session.Conn, string) {
	t.Helper()
	name := fmt.Sprintf("lws%d_%d", os.Getpid(), seq.Add(1))
	cfg, err := pgx.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = name
	c := session.New(session.Config{ConnConfig: cfg})
	t.Cleanup(c.Close)
	return c, name
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// backends counts the server processes of application_name name.
func backends(t *testing.T, pool *pgxpool.Pool, name string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx(t), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func pid(t *testing.T, c *session.Conn) int {
	t.Helper()
	var p int
	if err := c.QueryRow(ctx(t), `SELECT pg_backend_pid()`).Scan(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func notify(t *testing.T, pool *pgxpool.Pool, channel, payload string) {
	t.Helper()
	if _, err := pool.Exec(ctx(t), `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		t.Fatal(err)
	}
}

// next waits for s's next notification, failing the test after a while.
func next(t *testing.T, s *session.Subscription) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	p, err := s.Wait(c)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return p
}

// A statement ends the wait for notifications and runs; the wait then
// resumes, and a notification sent after the statement is delivered
// without another statement to fetch it.
func TestAStatementInterruptsTheWaitWhichResumes(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	c, _ := open(t)
	sub, err := c.Listen(ctx(t), "a")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		// The waiter holds the connection between statements: each
		// statement has to take it back, and does.
		if _, err := c.Exec(ctx(t), `SELECT 1`); err != nil {
			t.Fatalf("statement %d while listening: %v", i, err)
		}
		payload := fmt.Sprint("after statement ", i)
		notify(t, pool, "a", payload)
		if got := next(t, sub); got != payload {
			t.Fatalf("heard %q, want %q", got, payload)
		}
	}
}

// A notification that arrives while a statement runs, the listener's own
// (the probe's case) or another session's, is kept and delivered after
// it, and to every subscription of its channel: none is lost.
func TestANotificationDuringAStatementIsDelivered(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	c, _ := open(t)
	a, err := c.Listen(ctx(t), "ch")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Listen(ctx(t), "ch")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx(t), `SELECT pg_notify('ch', 'own')`); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		// While the session sleeps in its statement: PostgreSQL hands the
		// notification over just before the statement's end.
		time.Sleep(100 * time.Millisecond)
		_, err := pool.Exec(context.Background(), `SELECT pg_notify('ch', 'other')`)
		sent <- err
	}()
	if _, err := c.Exec(ctx(t), `SELECT pg_sleep(0.5)`); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	for _, s := range []*session.Subscription{a, b} {
		if got := []string{next(t, s), next(t, s)}; got[0] != "own" || got[1] != "other" {
			t.Errorf("heard %q, want own then other", got)
		}
	}
}

// Statements, rows, transactions and pipelines of many goroutines at
// once, while the connection listens, take turns on one backend.
func TestConcurrentUsersShareOneBackend(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	c, name := open(t)
	sub, err := c.Listen(ctx(t), "busy")
	if err != nil {
		t.Fatal(err)
	}
	own := pid(t, c)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		pids = map[int]bool{}
	)
	saw := func(p int) {
		mu.Lock()
		pids[p] = true
		mu.Unlock()
	}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				var p int
				var err error
				switch (g + i) % 4 {
				case 0:
					_, err = c.Exec(ctx(t), `SELECT pg_notify('busy', $1)`, fmt.Sprint(g, "-", i))
					p = own
				case 1:
					err = c.QueryRow(ctx(t), `SELECT pg_backend_pid()`).Scan(&p)
				case 2:
					var tx pgx.Tx
					if tx, err = c.Begin(ctx(t)); err == nil {
						err = tx.QueryRow(ctx(t), `SELECT pg_backend_pid()`).Scan(&p)
						if cerr := tx.Commit(ctx(t)); err == nil {
							err = cerr
						}
					}
				case 3:
					var rows pgx.Rows
					if rows, err = c.Query(ctx(t), `SELECT pg_backend_pid() FROM generate_series(1, 3)`); err == nil {
						var ps []int
						ps, err = pgx.CollectRows(rows, pgx.RowTo[int])
						if err == nil {
							p = ps[0]
						}
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				saw(p)
			}
		}()
	}
	wg.Wait()
	if len(pids) != 1 || !pids[own] {
		t.Errorf("statements ran on backends %v, want %d alone", pids, own)
	}
	if n := backends(t, pool, name); n != 1 {
		t.Errorf("the session holds %d backends, want 1", n)
	}
	// Every notification of the 40 statements that sent one came through.
	for range 40 {
		next(t, sub)
	}
}

// A connection ended by the server tells its subscriptions (a
// notification may have been missed), and the next statement connects
// anew; a Pinned view of the old connection fails rather than move to the
// new one.
func TestABrokenConnectionIsLostAndReplaced(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	c, name := open(t)
	sub, err := c.Listen(ctx(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	pinned := c.Pin()
	if _, err := pinned.Exec(ctx(t), `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	before := pid(t, c)
	if _, err := pool.Exec(ctx(t), `SELECT pg_terminate_backend($1)`, before); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Wait(ctx(t)); !errors.Is(err, session.ErrLost) {
		t.Fatalf("subscription after the backend was terminated: %v, want ErrLost", err)
	}
	after := pid(t, c)
	if after == before {
		t.Errorf("the statement after the break ran on the terminated backend %d", before)
	}
	if n := backends(t, pool, name); n != 1 {
		t.Errorf("the session holds %d backends after reconnecting, want 1", n)
	}
	if _, err := pinned.Exec(ctx(t), `SELECT 1`); !errors.Is(err, session.ErrReplaced) {
		t.Errorf("pinned statement after the reconnection: %v, want ErrReplaced", err)
	}
	// Listening again works on the new connection.
	again, err := c.Listen(ctx(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	notify(t, pool, "x", "back")
	if got := next(t, again); got != "back" {
		t.Errorf("heard %q after listening again, want back", got)
	}
}

// The last subscription of a channel to close UNLISTENs; an earlier one
// leaves the channel listened for the others.
func TestTheLastSubscriptionUnlistens(t *testing.T) {
	t.Parallel()
	c, _ := open(t)
	channels := func() []string {
		rows, err := c.Query(ctx(t), `SELECT pg_listening_channels()`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, err := c.Listen(ctx(t), "shared")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Listen(ctx(t), "shared")
	if err != nil {
		t.Fatal(err)
	}
	a.Close(ctx(t))
	if got := channels(); len(got) != 1 || got[0] != "shared" {
		t.Errorf("one of two subscriptions closed: listening on %v, want [shared]", got)
	}
	b.Close(ctx(t))
	if got := channels(); len(got) != 0 {
		t.Errorf("both closed: listening on %v, want none", got)
	}
}

// Sync proves the connection there is and never connects one.
func TestSyncDoesNotConnect(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	c, name := open(t)
	if err := c.Sync(ctx(t)); !errors.Is(err, session.ErrLost) {
		t.Errorf("Sync without a connection: %v, want ErrLost", err)
	}
	if n := backends(t, pool, name); n != 0 {
		t.Errorf("Sync connected: %d backends", n)
	}
	pid(t, c)
	if err := c.Sync(ctx(t)); err != nil {
		t.Errorf("Sync on a connection: %v", err)
	}
}

// Without a subscription nothing reads an idle connection: the first
// statement after the server ended it fails (as on a pool that does not
// ping), and the one after connects anew.
func TestAnIdleBrokenConnectionIsReplacedAfterOneFailure(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	c, name := open(t)
	before := pid(t, c)
	if _, err := pool.Exec(ctx(t), `SELECT pg_terminate_backend($1)`, before); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, 10*time.Second, "the backend gone", func() bool { return backends(t, pool, name) == 0 })
	if _, err := c.Exec(ctx(t), `SELECT 1`); err == nil {
		t.Fatal("a statement on the terminated backend succeeded")
	}
	if after := pid(t, c); after == before {
		t.Errorf("the statement after the failure ran on the terminated backend %d", before)
	}
}

// sessionGoroutines returns the stacks of the goroutines that run in a
// Conn or a Subscription.
func sessionGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "session.(*Conn)") || strings.Contains(g, "session.(*Subscription)") {
			out = append(out, g)
		}
	}
	return out
}

// Close while the waiter waits for notifications ends that wait: it
// returns at once, and no goroutine of the Conn is left. Not parallel: it
// reads every goroutine of the process, and the parallel tests are held
// until it ends.
func TestCloseWhileWaitingReturnsAndLeavesNoGoroutine(t *testing.T) {
	c, _ := open(t)
	sub, err := c.Listen(ctx(t), "closing")
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, 10*time.Second, "the waiter waiting for notifications", func() bool {
		for _, g := range sessionGoroutines() {
			if strings.Contains(g, "WaitForNotification") {
				return true
			}
		}
		return false
	})
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("Close did not return within 5s while the waiter waited:\n%s", strings.Join(sessionGoroutines(), "\n\n"))
	}
	if _, err := sub.Wait(ctx(t)); !errors.Is(err, session.ErrLost) {
		t.Errorf("subscription after Close: %v, want ErrLost", err)
	}
	var left []string
	defer func() {
		if t.Failed() {
			t.Logf("left:\n%s", strings.Join(left, "\n\n"))
		}
	}()
	pgtest.Eventually(t, 5*time.Second, "no goroutine of the Conn left", func() bool {
		left = sessionGoroutines()
		return len(left) == 0
	})
}

// A statement whose ctx ends while it waits for its turn returns ctx's
// error at once and gives up its place: the statements waiting with it
// run once the turn comes, and the waiter, which waits only while no
// statement wants the turn, waits again and delivers notifications.
func TestATakeCancelledWhileOthersWaitLeavesThemTheirTurn(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	c, _ := open(t)
	sub, err := c.Listen(ctx(t), "turns")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx(t)) // holds the turn until it commits
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	cancelled, other := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := c.Exec(cctx, `SELECT 1`)
		cancelled <- err
	}()
	go func() {
		_, err := c.Exec(ctx(t), `SELECT 2`)
		other <- err
	}()
	pgtest.Eventually(t, 10*time.Second, "both statements waiting for the turn", func() bool { return c.Users() == 3 })
	cancel()
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled statement returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled statement did not return while the turn was held")
	}
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-other:
		if err != nil {
			t.Errorf("the other statement: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other statement did not run once the turn was given back")
	}
	pgtest.Eventually(t, 10*time.Second, "no statement left wanting the turn", func() bool { return c.Users() == 0 })
	notify(t, pool, "turns", "after")
	if got := next(t, sub); got != "after" {
		t.Errorf("heard %q, want after", got)
	}
}
