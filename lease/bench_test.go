package lease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// The statements a wrapper runs, one round trip each, against the real test
// database. `go test -run '^$' -bench . ./lease` prints benchstat input.

func benchStore(b *testing.B) *Store {
	b.Helper()
	pgtest.Pool(b) // fails or skips when the database is unreachable
	// The product's pool: statements as a wrapper sends them (exec mode,
	// planned every time), not prepared once.
	pool, err := Connect(context.Background(), pgtest.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	s, err := New(pool, WithTable(pgtest.Table(b, pool)), WithHolder("bench"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

// reportServerCPU reports the CPU time that conn's PostgreSQL backend spent
// per op while f ran b.N times, as server-µs/op, when the server runs on
// this machine (its /proc/PID/schedstat is readable); only f then.
func reportServerCPU(b *testing.B, conn *pgxpool.Conn, f func()) {
	pid := conn.Conn().PgConn().PID()
	cpu := func() (time.Duration, bool) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			return 0, false
		}
		ns, err := strconv.ParseInt(strings.Fields(string(stat))[0], 10, 64)
		return time.Duration(ns), err == nil
	}
	before, local := cpu()
	for b.Loop() {
		f()
	}
	if after, ok := cpu(); local && ok {
		b.ReportMetric(float64((after-before).Microseconds())/float64(b.N), "server-µs/op")
	}
}

// BenchmarkConnect is a new connection: what every wrapper start pays.
func BenchmarkConnect(b *testing.B) {
	for b.Loop() {
		conn, err := pgx.Connect(context.Background(), pgtest.URL())
		if err != nil {
			b.Fatal(err)
		}
		conn.Close(context.Background())
	}
}

// BenchmarkSchemaCheck is the catalog look-up at start on a complete table.
func BenchmarkSchemaCheck(b *testing.B) {
	s := benchStore(b)
	for b.Loop() {
		if _, err := s.objects.Read(context.Background(), s.db); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireRelease is one cron-style run of the lease: take it, give
// it back (with its NOTIFY).
func BenchmarkAcquireRelease(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	for b.Loop() {
		l, err := s.TryAcquire(ctx, "job")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirstAcquireRelease is a cron run's lease on a fresh Store: the
// acquire with its shape check in one pipeline (no catalog query), then the
// release.
func BenchmarkFirstAcquireRelease(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	for b.Loop() {
		fresh, err := New(s.db, WithTable(s.cfg.table), WithHolder("bench"))
		if err != nil {
			b.Fatal(err)
		}
		l, err := fresh.TryAcquire(ctx, "job")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLook is a standby's look at a held lease: a plain SELECT, and
// with PostgreSQL on this machine, the backend's CPU time for it.
func BenchmarkLook(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	l, err := s.TryAcquire(ctx, "job")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release(ctx, nil)
	other, err := New(s.db, WithTable(s.cfg.table), WithHolder("other"))
	if err != nil {
		b.Fatal(err)
	}
	conn, err := s.db.(*pgxpool.Pool).Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	reportServerCPU(b, conn, func() {
		if err := other.look(ctx, conn, "job"); err == nil {
			b.Fatal("a held lease looked free")
		}
	})
}

// BenchmarkAcquireHeld is the take that finds the lease held (what a
// standby's poll was before it looked first).
func BenchmarkAcquireHeld(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	l, err := s.TryAcquire(ctx, "job")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release(ctx, nil)
	other, err := New(s.db, WithTable(s.cfg.table), WithHolder("other"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := other.TryAcquire(ctx, "job"); err == nil {
			b.Fatal("acquired a held lease")
		}
	}
}

// BenchmarkRenew is the leader's renewal statement.
func BenchmarkRenew(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	l, err := s.TryAcquire(ctx, "job")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release(ctx, nil)
	for b.Loop() {
		if err := l.renew(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdTakeChecked is a cron run's first take on a connection of
// its own, as a wrapper's is: a new backend, whose catalog caches are cold,
// runs the shape checks and the take in one pipeline; then the release.
// Against BenchmarkColdTakePlain it is what the shape checks cost.
func BenchmarkColdTakeChecked(b *testing.B) { benchColdTake(b, false) }

// BenchmarkColdTakePlain is BenchmarkColdTakeChecked with the take alone,
// as if the tables were known to be right.
func BenchmarkColdTakePlain(b *testing.B) { benchColdTake(b, true) }

func benchColdTake(b *testing.B, plain bool) {
	s := benchStore(b)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		conn, err := pgx.Connect(ctx, pgtest.URL())
		if err != nil {
			b.Fatal(err)
		}
		fresh, err := New(conn, WithTable(s.cfg.table), WithHolder("bench"))
		if err != nil {
			b.Fatal(err)
		}
		if plain {
			fresh.checked.Store(&tablesChecked{hist: fresh.recording(true)})
		}
		b.StartTimer()
		l, err := fresh.TryAcquire(ctx, "job")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		conn.Close(ctx)
		b.StartTimer()
	}
}

// BenchmarkPooled is what the statements a fleet sends most cost the
// database through PgBouncer in transaction mode, where no statement can
// be prepared: each sent in full (inline, parsed and planned at every
// execution) and as a call of the lease table's function (function), on a
// table of a thousand jobs with queues of nine, and SELECT 1 and the
// plainest UPDATE of a row (the round trip itself, and a commit). With PostgreSQL on this machine it reports the CPU time
// of the server backends that served them, per statement.
func BenchmarkPooled(b *testing.B) {
	pool := pgtest.Pool(b)
	cfg := pool.Config().ConnConfig
	bouncer := pgtest.StartPgBouncer(b, fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	pooled, err := Connect(context.Background(), fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, bouncer, cfg.Database))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pooled.Close)
	ctx := context.Background()
	table := pgtest.Table(b, pool)
	s, err := New(pooled, WithTable(table), WithHolder("standby"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{table}.Sanitize()+` (job_name, holder, expires_at, fencing_token, queue)
SELECT 'job-' || g, 'leader', now() + interval '1 hour', g, (SELECT jsonb_agg(jsonb_build_object('id', g || '-' || i,
  'holder', 'standby-' || g || '-' || i, 'priority', 0, 'since', i, 'until', 1896000000000000, 'every', 8000000))
  FROM generate_series(1, 9) AS i)
FROM generate_series(1, 1000) AS g`); err != nil {
		b.Fatal(err)
	}
	leader, err := New(pooled, WithTable(table), WithHolder("leader"), WithTTL(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	l, err := leader.TryAcquire(ctx, "job")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release(ctx, nil)
	q := &queueEntry{sb: &standby{listener: s.newListener("job")}, id: "bench"}
	q.enter(ctx)
	statements := []struct {
		name string
		run  func() error
	}{
		{"select1", func() error { _, err := pooled.Exec(ctx, "SELECT 1"); return err }},
		{"update1", func() error {
			_, err := pooled.Exec(ctx, `UPDATE `+pgx.Identifier{table}.Sanitize()+` SET renewed_at = now() WHERE job_name = 'job-1'`)
			return err
		}},
		{"look", func() error {
			var held *HeldError
			if _, _, err := q.look(ctx); !errors.As(err, &held) {
				return fmt.Errorf("look at a held lease: %w", err)
			}
			return nil
		}},
		{"renew", func() error { return l.renew(ctx) }},
		{"enter", func() error { q.enter(ctx); return nil }},
	}
	for _, st := range statements {
		for _, function := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/function=%v", st.name, function), func(b *testing.B) {
				for _, store := range []*Store{s, leader} {
					store.checked.Store(&tablesChecked{functions: function})
				}
				reportPooledCPU(b, pooled, st.run)
			})
		}
	}
}

// reportPooledCPU runs f b.N times and reports the CPU time of the server
// backends PgBouncer served pool's statements on, per op (server-µs/op),
// when the server runs on this machine.
func reportPooledCPU(b *testing.B, pool *pgxpool.Pool, f func() error) {
	ctx := context.Background()
	// One client at a time: PgBouncer lends it the same server, or one of
	// a few; each is asked for its pid before and after.
	pids := map[int]bool{}
	sample := func() {
		for range 4 {
			var pid int
			if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				b.Fatal(err)
			}
			pids[pid] = true
		}
	}
	cpu := func() (total time.Duration, ok bool) {
		for pid := range pids {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
			if err != nil {
				return 0, false
			}
			ns, err := strconv.ParseInt(strings.Fields(string(stat))[0], 10, 64)
			if err != nil {
				return 0, false
			}
			total += time.Duration(ns)
		}
		return total, true
	}
	// Warm the server's plans and caches up, as a fleet's have.
	for range 20 {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	sample()
	before, local := cpu()
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	after, ok := cpu()
	seen := len(pids)
	sample()
	if local && ok && len(pids) == seen {
		b.ReportMetric(float64((after-before).Microseconds())/float64(b.N), "server-µs/op")
	}
}
