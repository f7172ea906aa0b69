package lease_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/stall"
	"github.com/redbite/leasewrap/lease"
)

// tracer records every round trip a pool's connections make (a statement,
// or a pipeline of them), including those of a connection hijacked from it
// to LISTEN: a count of real calls to the real server.
type tracer struct {
	mu    sync.Mutex
	trips []trip
}

type trip struct {
	at  time.Time
	pid uint32   // the server process it went to
	sql []string // one for a statement, several for a pipeline
}

func (tr *tracer) add(conn *pgx.Conn, sql ...string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.trips = append(tr.trips, trip{at: time.Now(), pid: conn.PgConn().PID(), sql: sql})
}

func (tr *tracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	tr.add(conn, d.SQL)
	return ctx
}
func (tr *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (tr *tracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var sql []string
	for _, q := range d.Batch.QueuedQueries {
		sql = append(sql, q.SQL)
	}
	tr.add(conn, sql...)
	return ctx
}
func (tr *tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (tr *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// since returns the round trips from index i on.
func (tr *tracer) since(i int) []trip {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]trip(nil), tr.trips[min(i, len(tr.trips)):]...)
}

func (tr *tracer) len() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.trips)
}

// tracedPool connects to url like lease.Connect does (exec mode), with tr
// watching every connection.
func tracedPool(t *testing.T, url string, tr *tracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// hotCall matches a call of the lease table's function named with suffix
// (before the hash that ends its name).
func hotCall(suffix string) *regexp.Regexp {
	return regexp.MustCompile(`_` + suffix + `_[0-9a-f]{8}"\(`)
}

// What a trip is, by the statements leasewrap sends.
func isLook(tr trip) bool {
	return len(tr.sql) == 1 && (strings.HasPrefix(tr.sql[0], "SELECT holder,") || hotCall("look").MatchString(tr.sql[0]))
}
func isTake(tr trip) bool { return strings.Contains(tr.sql[len(tr.sql)-1], "taken AS (\nINSERT INTO") }

// isListen is the pipeline that LISTENs, checking the server process in
// the same transaction (listenAlone); its COMMIT is the next trip.
func isListen(tr trip) bool {
	return len(tr.sql) == 3 && tr.sql[0] == "BEGIN" && strings.HasPrefix(tr.sql[1], "LISTEN ")
}
func countTrips(trips []trip, is func(trip) bool) int {
	n := 0
	for _, tr := range trips {
		if is(tr) {
			n++
		}
	}
	return n
}
func isEnter(tr trip) bool {
	return len(tr.sql) == 1 && (strings.Contains(tr.sql[0], "SET queue =") || hotCall("enter").MatchString(tr.sql[0]))
}
func isAdopt(tr trip) bool {
	return len(tr.sql) == 1 && strings.Contains(tr.sql[0], "RETURNING fencing_token AS token, coalesce(slot, 1) AS slot")
}
func isProbe(tr trip) bool {
	return len(tr.sql) == 1 && strings.HasPrefix(tr.sql[0], "SELECT pg_notify(@channel, @payload)")
}

// A cron run's acquire on a complete table is one round trip: no catalog
// query of its own (the shape check rides in the acquire's pipeline); its
// release, with the run's history row, is one statement. The
// wrong tables it must still refuse are in schema_test.go (testRefused runs
// a first acquire on each).
func TestFirstAcquireIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	if _, err := newStore(t, pool, table, "setup").Migrate(ctx(t)); err != nil {
		t.Fatal(err)
	}
	var tr tracer
	traced := tracedPool(t, pgtest.URL(), &tr)
	// Renewals far apart: on a loaded machine one could fall between the
	// take and the release and be counted with them.
	l := mustAcquire(t, newStore(t, traced, table, "a", lease.WithTTL(30*time.Second), lease.WithRenewInterval(10*time.Second)), "job")
	trips := tr.since(0)
	if len(trips) != 1 || !isTake(trips[0]) {
		t.Errorf("first acquire made %d round trips, want 1 (the take): %v", len(trips), trips)
	}
	code := 0
	if err := l.Release(ctx(t), &code); err != nil {
		t.Fatal(err)
	}
	// The release and its history row are one statement.
	if trips = tr.since(1); len(trips) != 1 || len(trips[0].sql) != 1 {
		t.Errorf("release made round trips %v, want one of one statement", trips)
	}
	runs, err := lwtest.Reader(t, pool, table).History(ctx(t), inspect.HistoryQuery{Job: "job"})
	if err != nil || len(runs) != 1 || runs[0].Outcome != lease.OutcomeExited {
		t.Errorf("history after the release: %+v, %v; want the one run, exited", runs, err)
	}
	// A table made on the first run goes through the catalog, once.
	fresh := pgtest.Table(t, pool)
	s := newStore(t, traced, fresh, "b")
	for range 2 {
		if err := mustAcquire(t, s, "job").Release(ctx(t), nil); err != nil {
			t.Fatal(err)
		}
	}
	var tables int
	if err := pool.QueryRow(ctx(t), `SELECT count(*) FROM pg_class WHERE relname = $1`, fresh).Scan(&tables); err != nil || tables != 1 {
		t.Errorf("fresh table: %d, %v; want it created", tables, err)
	}
}

// A standby that polls (no LISTEN) looks with a SELECT: many looks, no
// transaction id. On a cluster of its own, so no one else moves the counter.
func TestStandbyLookTakesNoTransactionID(t *testing.T) {
	t.Parallel()
	cluster := pgtest.StartCluster(t)
	admin, err := pgxpool.New(ctx(t), cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	// Long renewals: the leader writes nothing while the standby is watched.
	slow := []lease.Option{lease.WithTTL(30 * time.Second), lease.WithRenewInterval(20 * time.Second),
		lease.WithGrace(time.Second), lease.WithRetryInterval(20 * time.Millisecond)}
	leader := mustAcquire(t, newStore(t, admin, "lease", "leader", slow...), "job")
	defer leader.Release(context.Background(), nil)

	var tr tracer
	standby := newStore(t, tracedPool(t, cluster.URL(), &tr), "lease", "standby",
		append(slow, lease.WithListen(false))...)
	sctx, cancel := context.WithCancel(ctx(t))
	done := make(chan error, 1)
	go func() {
		_, err := standby.Acquire(sctx, "job")
		done <- err
	}()
	looks := func() (n int) {
		for _, trip := range tr.since(0) {
			if isLook(trip) || isTake(trip) { // a take: what a look replaced
				n++
			}
		}
		return n
	}
	// Its entry into the queue, once, is a write: measure from the look
	// after it.
	pgtest.Eventually(t, 10*time.Second, "standby's entry into the queue and a look after it", func() bool {
		trips := tr.since(0)
		for i, trip := range trips {
			if isEnter(trip) {
				return countTrips(trips[i+1:], isLook) >= 1
			}
		}
		return false
	})
	nextXID := func() (x int64) {
		if err := admin.QueryRow(ctx(t), `SELECT txid_snapshot_xmax(txid_current_snapshot())`).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before, looked := nextXID(), looks()
	pgtest.Eventually(t, 10*time.Second, "20 more looks", func() bool { return looks() >= looked+20 })
	after := nextXID()
	cancel()
	<-done
	if after != before {
		t.Errorf("%d attempts took %d transaction ids, want none", looks()-looked, after-before)
	}
	for _, trip := range tr.since(0) {
		if isTake(trip) {
			t.Errorf("standby tried to take a live lease: %v", trip.sql)
		}
	}
}

// A listening standby is quiet between notifications: after its LISTEN,
// its entry into the queue, one look and the probe that proves it hears
// (see probe) it sends no statement while the leader renews (its pings
// are no statements, see TestStandbyPingIsNoStatement), not even a
// keepalive look every renew interval, until the expiry it saw; the
// release hands it the lease, and its next statement adopts it, with no
// look in front.
func TestListeningStandbyOnlyKeepsAlive(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	timings := []lease.Option{lease.WithTTL(20 * time.Second), lease.WithRenewInterval(time.Second),
		lease.WithGrace(time.Second), lease.WithRetryInterval(20 * time.Millisecond)}
	obs := &renewals{}
	leader := mustAcquire(t, newStore(t, pool, table, "leader", append(timings, lease.WithObserver(obs))...), "job")

	var tr tracer
	standby := newStore(t, tracedPool(t, pgtest.URL(), &tr), table, "standby", timings...)
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := standby.Acquire(ctx(t), "job")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	listened := -1
	pgtest.Eventually(t, 10*time.Second, "standby listens, probes and looks", func() bool {
		for i, trip := range tr.since(0) {
			if isListen(trip) {
				listened = i + 1 // its COMMIT
			}
		}
		return listened >= 0 && len(tr.since(listened+1)) >= 3
	})
	// Four renewals of the leader: a standby that kept alive with a look
	// every renew interval would have sent three or more by then; the
	// expiry it saw is 19 s or more away.
	renewed, _ := obs.counts()
	pgtest.Eventually(t, 20*time.Second, "four renewals", func() bool { ok, _ := obs.counts(); return ok >= renewed+4 })
	// Its entry into the queue names its listening connection's backend:
	// when the LISTEN took longer than its budget, it entered polling
	// before it, and enters again after.
	if trips := tr.since(listened + 1); len(trips) != 3 || countTrips(trips, isEnter) != 1 || countTrips(trips, isLook) != 1 || countTrips(trips, isProbe) != 1 {
		t.Fatalf("standing by through four renewals, the standby sent %d statements after its LISTEN (trip %d of %d), want its entry into the queue, one look and its probe: %v", len(trips), listened, tr.len(), trips)
	}
	n := tr.len()
	if err := leader.Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		defer l.Release(ctx(t), nil)
	case <-time.After(10 * time.Second):
		t.Fatal("standby was not woken by the release")
	}
	if after := tr.since(n); len(after) == 0 || !isAdopt(after[0]) {
		t.Errorf("after the release the standby sent %v, want the adoption of the lease handed to it first", after)
	}
}

// A crashed leader renews no more; a listening standby, which no longer
// polls, still tries just after the expiry it saw, measured on the
// database's clock (within 500ms, and what the machine stalled this
// process meanwhile).
func TestListeningStandbyTakesJustAfterTheExpiryItSaw(t *testing.T) {
	t.Parallel()
	stall.Watch()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	quoted := pgx.Identifier{table}.Sanitize()
	slow := []lease.Option{lease.WithTTL(30 * time.Second), lease.WithRenewInterval(20 * time.Second),
		lease.WithGrace(time.Second), lease.WithRetryInterval(20 * time.Millisecond)}
	if err := mustAcquire(t, newStore(t, pool, table, "setup", slow...), "job").Release(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	// A leader that died a moment ago: 1.5 s left, nobody renewing.
	mustExec(t, pool, `UPDATE `+quoted+` SET holder = 'dead', released_at = NULL, expires_at = now() + interval '1.5 seconds'`)
	var expiry time.Time
	if err := pool.QueryRow(ctx(t), `SELECT expires_at FROM `+quoted).Scan(&expiry); err != nil {
		t.Fatal(err)
	}
	waited := time.Now()
	l, err := newStore(t, pool, table, "standby", slow...).Acquire(ctx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx(t), nil)
	var acquired time.Time
	if err := pool.QueryRow(ctx(t), `SELECT acquired_at FROM `+quoted).Scan(&acquired); err != nil {
		t.Fatal(err)
	}
	// The server, starved on a busy machine too, answers late by what
	// this process's stalls do not show: half a second is still far
	// sooner than a listening standby looks without the expiry it saw.
	if late, stalled := acquired.Sub(expiry), stall.Since(waited); late < 0 || late > 500*time.Millisecond+stalled {
		t.Errorf("standby took the lease %s after it expired, want within 500ms (+%s stalled)", late, stalled)
	}
}

// Idle connections are not pinged before use (a ping is a transaction to
// PostgreSQL, one per renewal); a renewal whose idle connection was cut is
// retried at once on a fresh one, so the cut costs no failed renewal.
func TestRenewalSurvivesACutIdleConnection(t *testing.T) {
	t.Parallel()
	admin := pgtest.Pool(t)
	table := pgtest.Table(t, admin)
	app := "lw_renew_" + strings.TrimPrefix(table, "lw_")
	if len(app) > 63 {
		app = app[:63]
	}
	pool, err := lease.Connect(ctx(t), pgtest.URL()+"&application_name="+app)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// nil is pgxpool's default: ping after a second idle.
	if ping := pool.Config().ShouldPing; ping == nil || ping(ctx(t), pgxpool.ShouldPingParams{IdleDuration: time.Hour}) {
		t.Error("Connect's pool pings connections idle for an hour before use")
	}
	obs := &renewals{}
	l := mustAcquire(t, newStore(t, pool, table, "a", lease.WithObserver(obs)), "job")
	defer l.Release(ctx(t), nil)
	pgtest.Eventually(t, 15*time.Second, "a first renewal", func() bool { ok, _ := obs.counts(); return ok >= 1 })
	mustExec(t, admin, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '`+app+`'`)
	ok0, _ := obs.counts()
	pgtest.Eventually(t, 15*time.Second, "three renewals after the cut", func() bool { ok, _ := obs.counts(); return ok >= ok0+3 })
	if _, failed := obs.counts(); failed != 0 {
		t.Errorf("%d renewals failed after an idle connection was cut, want none", failed)
	}
}

// renewals counts a lease's renewal attempts and keeps their errors.
type renewals struct {
	mu         sync.Mutex
	ok, failed int
	errs       []error
}

func (r *renewals) Contacted()   {}
func (r *renewals) Reached()     {}
func (r *renewals) Failed(error) {}
func (r *renewals) Lost(error)   {}
func (r *renewals) Renewed(_ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.failed++
		r.errs = append(r.errs, err)
	} else {
		r.ok++
	}
}

func (r *renewals) counts() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok, r.failed
}

func (r *renewals) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// Tables the acquire itself would write to without complaint, since
// PostgreSQL converts a timestamp without time zone to and from one with:
// the first acquire must refuse them as the catalog check does, before it
// writes. The fencing function is in place, so the table alone is at fault.
func TestFirstAcquireRefusesATableItCouldWriteTo(t *testing.T) {
	t.Parallel()
	withoutTZ := func(col string) string {
		return `CREATE TABLE {{table}} (` + strings.Replace(full, col+" timestamptz", col+" timestamp", 1) + `, PRIMARY KEY (job_name));
CREATE FUNCTION {{schema}}.` + lease.CheckFunction + `(job text, token bigint, lease_table text DEFAULT 'leader_lease')
  RETURNS void LANGUAGE sql AS ''`
	}
	for _, c := range []refusedCase{
		{name: "expires_at", create: withoutTZ("expires_at"), rows: `('job', 'someone', now() - interval '1 hour')`,
			column: "expires_at", found: "timestamp without time zone", want: "timestamp with time zone"},
		{name: "renewed_at", create: withoutTZ("renewed_at"), rows: `('job', 'someone', now() - interval '1 hour')`,
			column: "renewed_at", found: "timestamp without time zone", want: "timestamp with time zone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testRefused(t, c)
		})
	}
}
