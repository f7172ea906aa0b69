package web_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schema"
	"github.com/redbite/leasewrap/web"
)

// fleet is a lease table whose history is made by real leases taken and
// released on the real database, as instances of leasewrap would.
type fleet struct {
	t       testing.TB
	pool    *pgxpool.Pool
	table   string
	history string // quoted
	start   time.Time
}

func newFleet(t testing.TB) *fleet {
	t.Helper()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	s, err := lease.New(pool, lease.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &fleet{t: t, pool: pool, table: table, history: schema.HistoryTable(pgx.Identifier{table}).Sanitize(),
		start: time.Now().Add(-time.Second)}
}

// store is one instance of the fleet, holder id holder.
func (f *fleet) store(holder string, opts ...lease.Option) *lease.Store {
	f.t.Helper()
	s, err := lease.New(f.pool, append([]lease.Option{lease.WithTable(f.table), lease.WithHolder(holder)}, opts...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// take takes job's lease for s, which must get it.
func (f *fleet) take(s *lease.Store, job string) *lease.Lease {
	f.t.Helper()
	l, err := s.TryAcquire(context.Background(), job)
	if err != nil {
		f.t.Fatalf("take %q: %v", job, err)
	}
	return l
}

// run takes job's lease for s and ends the run as end says; hold, when
// set, is run while the lease is held (the command's work).
func (f *fleet) run(s *lease.Store, job string, end lease.End, hold func()) lease.End {
	f.t.Helper()
	l := f.take(s, job)
	if hold != nil {
		hold()
	}
	if err := l.Finish(context.Background(), end); err != nil {
		f.t.Fatalf("finish %q: %v", job, err)
	}
	return end
}

// lose makes s's run of job lost: after hold (when set) its holder stops
// renewing, as a crashed instance does, the lease expires, and next takes
// it, which closes the run as lost at its expiry.
func (f *fleet) lose(s, next *lease.Store, job string, hold func()) {
	f.t.Helper()
	ctx := context.Background()
	l := f.take(s, job)
	if hold != nil {
		hold()
	}
	if _, err := f.pool.Exec(ctx, `UPDATE `+pgx.Identifier{f.table}.Sanitize()+
		` SET expires_at = now() WHERE job_name = $1`, job); err != nil {
		f.t.Fatal(err)
	}
	taken := f.take(next, job)
	if err := l.Release(ctx, nil); !errors.Is(err, lease.ErrLost) {
		f.t.Fatalf("release of a lease taken over: %v, want ErrLost", err)
	}
	code := 0
	if err := taken.Release(ctx, &code); err != nil {
		f.t.Fatal(err)
	}
}

// keepOutput stores output as the kept output of job's newest run, as
// --keep-output records it.
func (f *fleet) keepOutput(job string, output string) {
	f.t.Helper()
	tag, err := f.pool.Exec(context.Background(), `UPDATE `+f.history+` SET output = $2::bytea
WHERE (job_name, finished_at) = (SELECT job_name, max(finished_at) FROM `+f.history+` WHERE job_name = $1 GROUP BY job_name)`, job, []byte(output))
	if err != nil || tag.RowsAffected() != 1 {
		f.t.Fatalf("keep output of %q: %v (%d rows)", job, err, tag.RowsAffected())
	}
}

// reader reads the fleet's table through db.
func (f *fleet) reader(db inspect.DB) *inspect.Reader {
	f.t.Helper()
	r, err := inspect.Open(db, f.table)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// serve serves the fleet's pages on a local address.
func (f *fleet) serve(db inspect.DB, opts ...web.Option) *httptest.Server {
	f.t.Helper()
	srv := httptest.NewServer(web.New(f.reader(db), zerolog.Nop(), opts...).Handler())
	f.t.Cleanup(srv.Close)
	return srv
}

func code(n int) *int { return &n }

// Jobs of the standard history.
const (
	jobReport  = "nightly_report"
	jobPool    = "thumbnails"
	jobHostile = `<img src=x onerror=alert(1)><script>alert(2)</script>`
	// jobEscapes holds what lease.CheckNewJob refuses and an older
	// version or psql could still write: ESC, a direction override.
	jobEscapes    = "evil\x1b[2J\u202etxt.exe"
	holderHostile = `"><script>alert(3)</script>`
	reportOutput  = "line one\n<b>not bold</b>\x1b[31m\n"
)

// standardHistory makes the history the page tests read, from real
// leases: on jobReport, holder a succeeds, fails, then succeeds again
// (keeping output) after taking over from b, whose runs succeed, time out
// and are lost; jobPool has
// two slots held at once by c and d; jobHostile has a run by a hostile
// holder id; jobEscapes a row written by hand.
func (f *fleet) standardHistory() {
	f.t.Helper()
	a, b := f.store("host-a"), f.store("host-b")
	f.run(a, jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	f.run(b, jobReport, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)
	f.run(a, jobReport, lease.End{ExitCode: code(1), Outcome: lease.OutcomeExited}, nil)
	f.run(b, jobReport, lease.End{ExitCode: code(124), Outcome: lease.OutcomeTimedOut}, nil)
	f.lose(b, a, jobReport, nil) // a takes over, and succeeds
	f.keepOutput(jobReport, reportOutput)

	// Both slots held at once, for a while: the work of two instances.
	c, d := f.store("host-c", lease.WithSlots(2)), f.store("host-d", lease.WithSlots(2))
	lc, ld := f.take(c, jobPool), f.take(d, jobPool)
	time.Sleep(100 * time.Millisecond)
	for _, l := range []*lease.Lease{lc, ld} {
		if err := l.Finish(context.Background(), lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}); err != nil {
			f.t.Fatal(err)
		}
	}

	f.run(f.store(holderHostile), jobHostile, lease.End{ExitCode: code(0), Outcome: lease.OutcomeExited}, nil)

	if _, err := f.pool.Exec(context.Background(), `INSERT INTO `+pgx.Identifier{f.table}.Sanitize()+
		` (job_name, holder, expires_at, fencing_token) VALUES ($1, $2, now() - interval '1 minute', 1)`, jobEscapes, "\u202ehost"); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO `+f.history+
		` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome) VALUES ($1, $2, 1, now() - interval '2 second', now() - interval '1 second', 2, 'exited')`,
		jobEscapes, "\u202ehost"); err != nil {
		f.t.Fatal(err)
	}
}
