package command

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// binary is the leasewrap built once for all tests of this package.
var binary string

func TestMain(m *testing.M) { lwtest.Main(m, &binary) }

// lw starts the leasewrap under test.
func lw(t *testing.T, env []string, args ...string) *lwtest.Proc {
	t.Helper()
	return lwtest.Start(t, binary, env, args...)
}

var (
	child       = lwtest.Child
	self        = lwtest.Self
	readHistory = lwtest.ReadHistory
	waitGone    = lwtest.WaitGone
	readPid     = lwtest.ReadPid
)

// db is a test's database and lease table, with leasewrap's common flags.
type db struct {
	pool  *pgxpool.Pool
	table string
}

func newDB(t *testing.T) db {
	pool := pgtest.Pool(t)
	return db{pool: pool, table: pgtest.Table(t, pool)}
}

// args returns leasewrap's arguments for this table with JSON logs, fast
// timings (renew 300ms, grace 500ms, retry 100ms) and a TTL of 6s, then
// extra. The TTL leaves a take 5.2s to answer, which a loaded machine
// needs: a take that cannot answer within its budget rightly refuses to run
// the command.
func (d db) args(extra ...string) []string { return d.argsTTL("6s", extra...) }

// expiringArgs is args with a TTL of 2s, for the tests that wait for a
// lease to run out.
func (d db) expiringArgs(extra ...string) []string { return d.argsTTL("2s", extra...) }

func (d db) argsTTL(ttl string, extra ...string) []string {
	return append([]string{"--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json",
		"--ttl", ttl, "--renew-interval", "300ms", "--grace", "500ms", "--retry-interval", "100ms"}, extra...)
}

func (d db) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	sql = strings.ReplaceAll(sql, "TABLE", pgx.Identifier{d.table}.Sanitize())
	if _, err := d.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// expiresIn reads how long the database still considers the job's lease live.
func (d db) expiresIn(t *testing.T, job string) time.Duration {
	t.Helper()
	var micros int64
	err := d.pool.QueryRow(context.Background(), `SELECT (extract(epoch FROM expires_at - now()) * 1000000)::bigint FROM `+
		pgx.Identifier{d.table}.Sanitize()+` WHERE job_name = $1`, job).Scan(&micros)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(micros) * time.Microsecond
}

func (d db) holder(t *testing.T, job string) string {
	t.Helper()
	var h string
	err := d.pool.QueryRow(context.Background(), `SELECT holder FROM `+pgx.Identifier{d.table}.Sanitize()+
		` WHERE job_name = $1`, job).Scan(&h)
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return "" // no row, or no table yet
	}
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// takeover reads, on the database clock, when the lease of holder's run
// expired (the take that followed closed the run as lost at that expiry)
// and when the job's current holder took it.
func (d db) takeover(t *testing.T, job, holder string) (expired, taken time.Time) {
	t.Helper()
	err := d.pool.QueryRow(context.Background(), `SELECT h.finished_at, l.acquired_at FROM `+
		pgx.Identifier{d.table + lease.HistorySuffix}.Sanitize()+` h, `+pgx.Identifier{d.table}.Sanitize()+` l
WHERE h.job_name = $1 AND h.holder = $2 AND h.outcome = $3 AND l.job_name = $1`, job, holder, lease.OutcomeLost).Scan(&expired, &taken)
	if err != nil {
		t.Fatalf("%s's run closed as lost, and its successor's take: %v", holder, err)
	}
	return expired, taken
}

// logTime is when leasewrap wrote a JSON log entry (see lwtest.EntryTime).
func logTime(t *testing.T, e map[string]any) time.Time { return lwtest.EntryTime(t, e) }
