package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// fast are timings short enough for tests: renew 200ms, grace 300ms. The
// TTL is long (10s) because a take's budget is the TTL less grace and margin,
// and a loaded machine can outrun a short one; a test that waits for an
// expiry sets a short TTL of its own.
var fast = []lease.Option{
	lease.WithTTL(10 * time.Second),
	lease.WithRenewInterval(200 * time.Millisecond),
	lease.WithRetryInterval(50 * time.Millisecond),
	lease.WithGrace(300 * time.Millisecond),
}

// threeSeconds is a TTL a test can outlast, with a second of grace for a
// renewal a loaded machine delays: for a test that only renewals can pass.
var threeSeconds = []lease.Option{
	lease.WithTTL(3 * time.Second),
	lease.WithRenewInterval(300 * time.Millisecond),
	lease.WithGrace(time.Second),
}

func newStore(t *testing.T, db lease.DB, table, holder string, opts ...lease.Option) *lease.Store {
	t.Helper()
	opts = append(append([]lease.Option{lease.WithTable(table), lease.WithHolder(holder)}, fast...), opts...)
	s, err := lease.New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

type row struct {
	holder  string
	token   int64
	expired bool
	exit    *int
}

func readRow(t *testing.T, pool *pgxpool.Pool, table, job string) row {
	t.Helper()
	var r row
	err := pool.QueryRow(ctx(t), `SELECT holder, fencing_token, expires_at <= now(), last_exit_code FROM `+
		pgx.Identifier{table}.Sanitize()+` WHERE job_name = $1`, job).Scan(&r.holder, &r.token, &r.expired, &r.exit)
	if err != nil {
		t.Fatalf("read lease row: %v", err)
	}
	return r
}

func TestAcquireIsExclusiveAndTokensRise(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	a := newStore(t, pool, table, "a")
	b := newStore(t, pool, table, "b")

	la := mustAcquire(t, a, "job")
	// A first token is the database clock in microseconds.
	if since := time.Since(time.UnixMicro(la.Token())); since < 0 || since > time.Minute {
		t.Errorf("first token = %d, want the database clock in microseconds (%s ago)", la.Token(), since)
	}
	_, err := b.TryAcquire(ctx(t), "job")
	var held *lease.HeldError
	if !errors.As(err, &held) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second acquire: got %v, want a *HeldError", err)
	}
	if held.Holder != "a" || held.Token != la.Token() || held.ExpiresIn <= 0 || held.ExpiresIn > 10*time.Second {
		t.Errorf("held = %+v, want holder a, token %d, expiry within the 10s TTL", held, la.Token())
	}
	// Even the same holder id may not take a live lease twice.
	if _, err := a.TryAcquire(ctx(t), "job"); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("re-acquire by the same id: got %v, want ErrHeld", err)
	}

	code := 7
	if err := la.Release(ctx(t), &code); err != nil {
		t.Fatalf("release: %v", err)
	}
	r := readRow(t, pool, table, "job")
	if !r.expired || r.token != la.Token() || r.exit == nil || *r.exit != 7 {
		t.Errorf("after release: %+v, want the row kept, expired, token %d, exit 7", r, la.Token())
	}
	lb, err := b.TryAcquire(ctx(t), "job")
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if lb.Token() <= la.Token() {
		t.Errorf("token after change of hands = %d, want more than %d", lb.Token(), la.Token())
	}
	defer lb.Release(ctx(t), nil)
	if r := readRow(t, pool, table, "job"); r.holder != "b" || r.expired || r.exit != nil {
		t.Errorf("after takeover: %+v, want live lease of b with no exit code yet", r)
	}
}

func TestReleaseHoldsForAtLeastHoldFor(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	a := newStore(t, pool, table, "a", lease.WithHoldFor(time.Hour))
	l := mustAcquire(t, a, "job")
	if err := l.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := newStore(t, pool, table, "b").TryAcquire(ctx(t), "job"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("acquire within hold-for: got %v, want ErrHeld", err)
	}
}

func TestStolenLeaseClosesDone(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	l := mustAcquire(t, newStore(t, pool, table, "a"), "job")
	defer l.Release(ctx(t), nil)
	if _, err := pool.Exec(ctx(t), `UPDATE `+pgx.Identifier{table}.Sanitize()+
		` SET holder = 'thief', fencing_token = fencing_token + 1`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the lease was taken over")
	}
	if !errors.Is(l.Err(), lease.ErrLost) {
		t.Errorf("Err = %v, want ErrLost", l.Err())
	}
	// Releasing a lost lease must not touch the thief's row.
	if err := l.Release(ctx(t), nil); !errors.Is(err, lease.ErrLost) {
		t.Errorf("release of a lost lease: %v, want ErrLost", err)
	}
	if r := readRow(t, pool, table, "job"); r.holder != "thief" || r.expired {
		t.Errorf("thief's row changed: %+v", r)
	}
}

func TestRenewalsKeepTheLease(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	l := mustAcquire(t, newStore(t, pool, table, "a", threeSeconds...), "job")
	defer l.Release(ctx(t), nil)
	// Three TTLs later the lease is still held, so it was renewed.
	end := time.After(9 * time.Second)
	for done := false; !done; {
		select {
		case <-l.Done():
			t.Fatalf("lease ended while renewals should hold it: %v", l.Err())
		case <-end:
			done = true
		}
	}
	if r := readRow(t, pool, table, "job"); r.expired || r.token != l.Token() {
		t.Errorf("row after renewals: %+v, want live with token %d", r, l.Token())
	}
}

// A database that stops answering must end the lease locally, with the
// grace still left, before the database considers it expired.
func TestUnreachableDatabaseEndsLeaseBeforeExpiry(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	proxy, url := pgtest.Proxied(t, pool)
	viaProxy, err := pgxpool.New(ctx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer viaProxy.Close()
	s := newStore(t, viaProxy, table, "a", lease.WithTTL(time.Second))
	l := mustAcquire(t, s, "job")
	defer l.Release(ctx(t), nil)
	proxy.Blackhole()
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed while the database was unreachable")
	}
	// Done is due with grace (300ms) + margin (50ms) left; half the grace is
	// the least that leaves work time to stop on a loaded machine.
	if rem := l.Remaining(); rem < 150*time.Millisecond {
		t.Errorf("Done closed with %s left, want most of the 300ms grace", rem)
	}
	if r := readRow(t, pool, table, "job"); r.expired {
		t.Error("the database already saw the lease expired when Done closed")
	}
	proxy.Restore()
}

func TestMigrateCreatesOnceUnderAConcurrentColdStart(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	const n = 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		won     int
		errs    []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx(t), pgtest.URL())
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			defer conn.Close(context.Background())
			s := newStore(t, conn, table, fmt.Sprint("w", i))
			<-start
			changes, err := s.Migrate(ctx(t))
			var l *lease.Lease
			if err == nil {
				l, err = s.TryAcquire(ctx(t), "job")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(changes) > 0 {
				created++
			}
			switch {
			case err == nil:
				won++
				l.Release(ctx(t), nil)
			case !errors.Is(err, lease.ErrHeld):
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d instances failed, first: %v", len(errs), n, errs[0])
	}
	if created != 1 {
		t.Errorf("%d instances changed the schema, want exactly 1", created)
	}
	if won < 1 {
		t.Errorf("no instance acquired the lease")
	}
}

func TestMigrateUpgradesTheThreeColumnTable(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	ident := pgx.Identifier{table}.Sanitize()
	if _, err := pool.Exec(ctx(t), `CREATE TABLE `+ident+` (job_name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);
INSERT INTO `+ident+` VALUES ('old', 'someone', now() - interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, pool, table, "a")
	changes, err := s.Migrate(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) == 0 || !strings.HasPrefix(changes[0], "upgraded table") {
		t.Fatalf("changes = %q, want an upgrade", changes)
	}
	l, err := s.TryAcquire(ctx(t), "old")
	if err != nil {
		t.Fatalf("acquire the three-column table's expired row: %v", err)
	}
	defer l.Release(ctx(t), nil)
	if l.Token() <= 0 {
		t.Errorf("token = %d, want a new positive token (0 before)", l.Token())
	}
	if again, err := s.Migrate(ctx(t)); err != nil || len(again) != 0 {
		t.Errorf("second migrate: %q, %v; want no changes", again, err)
	}
}

// DDL before a first take is no part of the take's budget: a table that
// needs an upgrade while a reader holds it (the ALTER waits for its lock)
// is taken once the reader lets go, even with a TTL whose take budget (about
// 0.6s with a 1s TTL, tried twice) is far shorter than the wait.
func TestATakeWaitsForItsTablesOutsideItsBudget(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	ident := pgx.Identifier{table}.Sanitize()
	if _, err := pool.Exec(ctx(t), `CREATE TABLE `+ident+` (job_name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	reader, err := pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback(context.Background())
	if _, err := reader.Exec(ctx(t), `LOCK TABLE `+ident+` IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		l   *lease.Lease
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		l, err := newStore(t, pool, table, "a", lease.WithTTL(time.Second)).TryAcquire(ctx(t), "job")
		answered <- answer{l, err}
	}()
	pgtest.Eventually(t, 10*time.Second, "the upgrade waiting for the reader's lock", func() bool {
		var waiting bool
		err := pool.QueryRow(ctx(t), `SELECT EXISTS (SELECT FROM pg_locks WHERE relation = $1::regclass AND NOT granted)`, ident).Scan(&waiting)
		return err == nil && waiting
	})
	select {
	case a := <-answered:
		t.Fatalf("the take answered while the upgrade waited (lease %v, error %v); want it to wait for its tables", a.l != nil, a.err)
	case <-time.After(1500 * time.Millisecond): // past both tries' budgets
	}
	if err := reader.Rollback(ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatalf("take after the upgrade: %v", a.err)
		}
		_ = a.l.Release(ctx(t), nil)
	case <-time.After(20 * time.Second):
		t.Fatal("no answer 20s after the reader let go")
	}
}

// An up-to-date table must not be locked at start: a reader holding ACCESS
// SHARE (any open SELECT) would block an ALTER, and the ALTER every reader.
func TestStartupTakesNoLockOnACompleteTable(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	if _, err := newStore(t, pool, table, "a").Migrate(ctx(t)); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx(t), `LOCK TABLE `+pgx.Identifier{table}.Sanitize()+` IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	fresh := newStore(t, pool, table, "b")
	if changes, err := fresh.Migrate(short); err != nil || len(changes) != 0 {
		t.Fatalf("migrate of a complete table while it is share-locked: %q, %v", changes, err)
	}
}

func TestDoCancelsWorkWhenTheLeaseIsLost(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	// The loss is found by the first renewal, 200ms in.
	s := newStore(t, pool, table, "a")
	err := s.Do(ctx(t), "job", func(ctx context.Context, l *lease.Lease) error {
		if _, err := pool.Exec(ctx, `UPDATE `+pgx.Identifier{table}.Sanitize()+` SET holder = 'thief'`); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, lease.ErrLost) || !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v, want ErrLost joined with the work's context.Canceled", err)
	}
}

func TestAcquireWaitsForRelease(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	first := mustAcquire(t, newStore(t, pool, table, "a"), "job")
	got := make(chan *lease.Lease)
	go func() {
		l, err := newStore(t, pool, table, "b").Acquire(ctx(t), "job")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("standby acquired a live lease")
	case <-time.After(300 * time.Millisecond):
	}
	if err := first.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l.Token() <= first.Token() {
			t.Errorf("standby's token = %d, want more than %d", l.Token(), first.Token())
		}
		l.Release(ctx(t), nil)
	case <-time.After(5 * time.Second):
		t.Fatal("standby did not take the released lease")
	}
}

func TestNewRejectsUnsafeSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []lease.Option
	}{
		{"renew plus grace beyond TTL", []lease.Option{lease.WithTTL(10 * time.Second), lease.WithRenewInterval(5 * time.Second), lease.WithGrace(5 * time.Second)}},
		{"zero TTL", []lease.Option{lease.WithTTL(0)}},
		{"negative retry", []lease.Option{lease.WithRetryInterval(-time.Second)}},
		{"three-part table", []lease.Option{lease.WithTable("a.b.c")}},
		{"empty table", []lease.Option{lease.WithTable("")}},
		{"negative hold-for", []lease.Option{lease.WithHoldFor(-time.Second)}},
		{"retry too slow to retry", []lease.Option{lease.WithRetryInterval(20 * time.Second)}},
		{"renewals too frequent to work", []lease.Option{lease.WithRenewInterval(5 * time.Millisecond)}},
	} {
		if _, err := lease.New(nil, tc.opts...); err == nil {
			t.Errorf("%s: New accepted it", tc.name)
		}
	}
	if _, err := lease.New(nil); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

func TestTableNamesAreQuoted(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	odd := pgtest.Table(t, pool) + `"; DROP TABLE x; --`
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+pgx.Identifier{odd}.Sanitize()) })
	mustAcquire(t, newStore(t, pool, odd, "a"), "job").Release(ctx(t), nil)
}

func TestOperatorReleaseEndsTheHoldersLease(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s := newStore(t, pool, table, "a")
	l := mustAcquire(t, s, "job")
	defer l.Release(ctx(t), nil)
	for _, force := range []bool{false, true} {
		if _, _, err := s.ReleaseHeld(ctx(t), "job", "someone-else", 0, force); !errors.Is(err, lease.ErrNoJob) {
			t.Errorf("release of another id's lease (force %v): %v, want ErrNoJob", force, err)
		}
	}
	if _, _, err := s.ReleaseHeld(ctx(t), "job", "", l.Token()-1, true); !errors.Is(err, lease.ErrNoJob) {
		t.Errorf("release under an older token: %v, want ErrNoJob", err)
	}
	holder, token, err := s.ReleaseHeld(ctx(t), "job", "", l.Token(), true)
	if err != nil || holder != "a" || token != l.Token() {
		t.Fatalf("forced release = %q, %d, %v; want a, %d", holder, token, err, l.Token())
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the holder kept renewing a lease an operator released")
	}
	if r := readRow(t, pool, table, "job"); !r.expired || r.token != l.Token() {
		t.Errorf("after forced release: %+v, want expired with the token kept", r)
	}
	jobs, err := lwtest.Reader(t, pool, table).Status(ctx(t), "job")
	if err != nil || len(jobs) != 1 || jobs[0].State != lease.StateReleased {
		t.Errorf("status = %+v, %v; want one released job", jobs, err)
	}
}

func TestStatusStates(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s := newStore(t, pool, table, "a")
	if _, err := lwtest.Reader(t, pool, table).Status(ctx(t), "held"); !errors.Is(err, inspect.ErrNoTable) {
		t.Errorf("status before the table exists: %v, want ErrNoTable", err)
	}
	held := mustAcquire(t, s, "held")
	defer held.Release(ctx(t), nil)
	done := mustAcquire(t, s, "done")
	code := 3
	if err := done.Release(ctx(t), &code); err != nil {
		t.Fatal(err)
	}
	// A holder whose keeper renews only after the test: its row, expired
	// by hand, stays expired.
	stale := mustAcquire(t, newStore(t, pool, table, "a", lease.WithTimings(hourLong)), "stale")
	pool.Exec(ctx(t), `UPDATE `+pgx.Identifier{table}.Sanitize()+` SET expires_at = now() - interval '1 second' WHERE job_name = 'stale'`)
	defer stale.Release(ctx(t), nil)

	jobs, err := lwtest.Reader(t, pool, table).Status(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]inspect.JobStatus{}
	for _, j := range jobs {
		got[j.Job] = j
	}
	if j := got["held"]; j.State != lease.StateHeld || j.ExpiresIn <= 0 || j.Holder != "a" {
		t.Errorf("held: %+v", j)
	}
	if j := got["done"]; j.State != lease.StateReleased || j.LastExitCode == nil || *j.LastExitCode != 3 || j.LastFinished == nil {
		t.Errorf("done: %+v", j)
	}
	if j := got["stale"]; j.State != lease.StateExpired {
		t.Errorf("stale: %+v", j)
	}
}

// fencedTx begins a transaction that calls leasewrap_check for job and token.
func fencedTx(t *testing.T, pool *pgxpool.Pool, table, job string, token int64) (pgx.Tx, error) {
	t.Helper()
	tx, err := pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx(t), `SELECT leasewrap_check($1, $2, $3)`, job, token, pgx.Identifier{table}.Sanitize())
	return tx, err
}

func TestCheckFunctionRejectsAStaleToken(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	old := mustAcquire(t, newStore(t, pool, table, "a"), "job")
	old.Release(ctx(t), nil)
	current := mustAcquire(t, newStore(t, pool, table, "b"), "job")
	defer current.Release(ctx(t), nil)

	_, err := fencedTx(t, pool, table, "job", old.Token())
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != lease.ErrCodeFenced {
		t.Fatalf("check with the old token: %v, want SQLSTATE %s", err, lease.ErrCodeFenced)
	}
	tx, err := fencedTx(t, pool, table, "job", current.Token())
	if err != nil {
		t.Fatalf("check with the current token: %v", err)
	}
	if _, err := tx.Exec(ctx(t), `CREATE TEMP TABLE fenced_write (x int); INSERT INTO fenced_write VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx(t)); err != nil {
		t.Errorf("commit of the current holder's fenced transaction: %v", err)
	}
}

// A fenced transaction holds the row FOR KEY SHARE: the holder's renewals go
// on, but a takeover waits until the transaction ends.
func TestCheckFunctionHoldsOffATakeoverButNotRenewals(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	// A TTL a loaded machine cannot outrun: renewals that stop are ones that
	// wait (TestRenewalsNeverWaitBehindAFencedTransaction says on what).
	l := mustAcquire(t, newStore(t, pool, table, "a", lease.WithTTL(30*time.Second)), "job")
	tx, err := fencedTx(t, pool, table, "job", l.Token())
	if err != nil {
		t.Fatal(err)
	}
	// Renewals (every 200ms) keep succeeding while the transaction is open.
	renewed := readRenewedAt(t, pool, table)
	pgtest.Eventually(t, 20*time.Second, "a renewal while the fenced transaction runs", func() bool {
		select {
		case <-l.Done():
			t.Fatalf("lease lost while the fenced transaction ran: %v", l.Err())
		default:
		}
		return !readRenewedAt(t, pool, table).Equal(renewed)
	})
	// Expire the lease without touching the key; then a takeover must wait.
	if _, err := pool.Exec(ctx(t), `UPDATE `+pgx.Identifier{table}.Sanitize()+` SET expires_at = now() - interval '1 second', holder = 'gone'`); err != nil {
		t.Fatal(err)
	}
	taken := make(chan error, 1)
	go func() {
		_, err := newStore(t, pool, table, "b").TryAcquire(ctx(t), "job")
		taken <- err
	}()
	waitForLockWait(t, pool, table)
	select {
	case err := <-taken:
		t.Fatalf("takeover did not wait for the fenced transaction: %v", err)
	default:
	}
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-taken:
		if err != nil {
			t.Errorf("takeover after the fenced transaction ended: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("takeover still blocked after commit")
	}
	l.Release(ctx(t), nil)
}

func readRenewedAt(t *testing.T, pool *pgxpool.Pool, table string) time.Time {
	t.Helper()
	var at time.Time
	if err := pool.QueryRow(ctx(t), `SELECT renewed_at FROM `+pgx.Identifier{table}.Sanitize()).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// waitForLockWait polls until some backend of this test database waits on a
// lock: the takeover statement, blocked by the fenced transaction.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var waiting bool
		err := pool.QueryRow(ctx(t), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND position('INSERT INTO ' || $1 in query) > 0)`, pgx.Identifier{table}.Sanitize()).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no takeover waiting on the row lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestReleaseActsOnce(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	l := mustAcquire(t, newStore(t, pool, table, "a"), "job")
	code := 5
	if err := l.Release(ctx(t), &code); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx(t), nil); err != nil {
		t.Errorf("second release: %v, want the first's result", err)
	}
	if r := readRow(t, pool, table, "job"); r.exit == nil || *r.exit != 5 {
		t.Errorf("recorded exit %v after a second release, want 5 kept", r.exit)
	}
}

func TestAbandonSkipsHoldFor(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	l := mustAcquire(t, newStore(t, pool, table, "a", lease.WithHoldFor(time.Hour)), "job")
	if err := l.Abandon(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if r := readRow(t, pool, table, "job"); !r.expired {
		t.Error("an abandoned lease is still held for hold-for")
	}
}

func TestHostsNamesServersOnly(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://u:hunter2@db.example:5433/app")
	if err != nil {
		t.Fatal(err)
	}
	if hosts := lease.Hosts(&cfg.ConnConfig.Config); hosts != "db.example:5433" {
		t.Errorf("Hosts = %q", hosts)
	}
}

func TestConnectSaysWhatIsWrongWithoutThePassword(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:hunter2@db:99999/app":             "port",
		"postgres://u:hunter2@db/app?sslmode=sometimes": "sslmode",
		"mysql://u:hunter2@db/app":                      "mysql",
	} {
		_, err := lease.Connect(ctx(t), dsn)
		if !errors.Is(err, lease.ErrBadDatabaseURL) || !strings.Contains(err.Error(), want) {
			t.Errorf("Connect(%q) = %v, want ErrBadDatabaseURL naming %s", dsn, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Connect(%q) echoed the password: %v", dsn, err)
		}
	}
}

// A standby is told of a release at once (LISTEN/NOTIFY): it takes the lease
// long before its 10s poll or the 20s expiry would let it.
func TestStandbyIsNotifiedOfARelease(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	slow := []lease.Option{lease.WithTTL(20 * time.Second), lease.WithRenewInterval(time.Second),
		lease.WithGrace(time.Second), lease.WithRetryInterval(10 * time.Second)}
	first := mustAcquire(t, newStore(t, pool, table, "a", slow...), "job")
	// The standby logs that it stands by once it listens.
	logs := make(chan string, 16)
	standby := newStore(t, pool, table, "b", append(slow, lease.WithLogger(zerolog.New(lineWriter(logs))))...)
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := standby.Acquire(ctx(t), "job")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	for line := range logs {
		if strings.Contains(line, "standing by") {
			break
		}
	}
	go func() {
		for range logs { // keep the standby's logger from blocking
		}
	}()
	released := time.Now()
	if err := first.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if took := time.Since(released); took > 2*time.Second {
			t.Errorf("standby took %s to take a released lease", took)
		}
		l.Release(ctx(t), nil)
	case <-time.After(8 * time.Second):
		t.Fatal("standby was not woken by the release")
	}
}

// lineWriter sends each write (one zerolog line) to lines.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// mustAcquire takes the lease on job or fails the test.
func mustAcquire(t *testing.T, s *lease.Store, job string) *lease.Lease {
	t.Helper()
	l, err := s.TryAcquire(ctx(t), job)
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || errors.Is(err, lease.ErrTakeInDoubt) {
		// A short TTL leaves a take little time (1s leaves 650ms: TTL
		// less grace and margin), which a loaded machine can outrun (the
		// take times out, or answers too late to be used): then wait for
		// the lease as a standby would, which also covers a take that
		// committed after we gave up on it.
		t.Logf("acquire %q timed out (%v): waiting for the lease", job, err)
		l, err = s.Acquire(ctx(t), job)
	}
	if err != nil {
		t.Fatalf("acquire %q: %v", job, err)
	}
	return l
}

// A token must not come back when the row that remembered it is gone.
func TestTokensNeverRepeatAfterTheRowIsGone(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	quoted := pgx.Identifier{table}.Sanitize()
	for _, wipe := range []string{`DELETE FROM ` + quoted, `TRUNCATE ` + quoted} {
		first := mustAcquire(t, newStore(t, pool, table, "a"), "job")
		if _, err := pool.Exec(ctx(t), wipe); err != nil {
			t.Fatal(err)
		}
		second := mustAcquire(t, newStore(t, pool, table, "b"), "job")
		if second.Token() <= first.Token() {
			t.Errorf("after %s: token %d, want more than the running holder's %d", wipe, second.Token(), first.Token())
		}
		first.Release(ctx(t), nil)
		second.Release(ctx(t), nil)
	}
}
