package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schema"
)

// settle is how long the fleet runs after every job has a leader and
// before it is measured: the last standbys to start finish their first
// look and start listening, and every backend has reported its start-up
// statements to the statistics (an idle backend does so within 10 s).
const settle = 15 * time.Second

// adminApp names the fleet's own connections, which are left out of the
// connection counts.
const adminApp = "fleet-admin"

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fleet: "+format+"\n", args...)
}

// run starts the fleet, measures it for the duration, stops it and checks
// the history.
func run(ctx context.Context, c config) (*result, error) {
	admin, err := adminPool(ctx, c.adminURL, "")
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	// The counts are read from another database, so that reading them
	// adds nothing to the fleet database's.
	stats, err := adminPool(ctx, c.adminURL, "postgres")
	if err != nil {
		return nil, err
	}
	defer stats.Close()
	if err := prepare(ctx, admin, c.table); err != nil {
		return nil, err
	}
	f := newFleet(c, admin, stats)
	fctx, stopFleet := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopFleet(); wg.Wait() }()
	logf("starting %d participants over %d jobs at %d a second (listen=%v)", c.jobs*c.perJob, c.jobs, c.startRate, c.listen)
	if err := f.start(fctx, &wg); err != nil {
		return nil, err
	}
	sleep(ctx, settle)
	before, err := f.sample(ctx)
	if err != nil {
		return nil, err
	}
	f.measuring.Store(true)
	logf("every job has a leader; measuring for %s", c.duration)
	go f.schedule(fctx, before.at)
	conns := f.watch(ctx, before.at.Add(c.duration))
	after, err := f.sample(ctx)
	if err != nil {
		return nil, err
	}
	f.measuring.Store(false)
	if c.postmaster > 0 {
		after.memKiB, after.procs = clusterMemory(c.postmaster)
	}
	logf("stopping the fleet")
	stopFleet()
	wg.Wait()
	runs, overlaps, err := f.overlaps(ctx)
	if err != nil {
		return nil, err
	}
	return f.result(before, after, conns, runs, overlaps), nil
}

// adminPool connects to PostgreSQL itself for setting up, sampling and
// checking, under an application name that the counts leave out; to
// database instead of the URL's when it is not empty. It does not ping
// (a ping is a transaction too).
func adminPool(ctx context.Context, url, database string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("-admin-url: %w", err)
	}
	if database != "" {
		cfg.ConnConfig.Database = database
	}
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.ConnConfig.RuntimeParams["application_name"] = adminApp
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Connected now, before the participants: a server that reaches
	// max_connections under them cannot then lock the measurement out.
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// prepare creates or upgrades the lease table and its history, and removes
// what an earlier run of the fleet left in them.
func prepare(ctx context.Context, admin *pgxpool.Pool, table string) error {
	store, err := lease.New(admin, lease.WithTable(table))
	if err != nil {
		return err
	}
	if _, err := store.Migrate(ctx); err != nil {
		return err
	}
	t, _ := lease.ParseTable(table)
	for _, name := range []string{t.Sanitize(), schema.HistoryTable(t).Sanitize()} {
		if _, err := admin.Exec(ctx, `DELETE FROM `+name+` WHERE job_name LIKE 'fleet-%'`); err != nil {
			return err
		}
	}
	return nil
}

// tableSQL is the lease table's name, quoted for SQL.
func (f *fleet) tableSQL() string {
	t, _ := lease.ParseTable(f.cfg.table)
	return t.Sanitize()
}

// connCounts are the most connections seen during the measurement.
type connCounts struct {
	Backends  int `json:"backends_max"`
	PoolConns int `json:"pool_conns_max"` // the participants' connections
}

// watch counts connections to the fleet's database every few seconds
// until the end of the measurement, and logs how the fleet is doing.
func (f *fleet) watch(ctx context.Context, end time.Time) connCounts {
	var max connCounts
	for n := 0; time.Now().Before(end); n++ {
		var backends int
		err := f.stats.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND datname = $1 AND application_name <> $2`, f.dbname, adminApp).Scan(&backends)
		if err == nil {
			max.Backends = maxOf(max.Backends, backends)
		}
		max.PoolConns = maxOf(max.PoolConns, f.poolConns())
		if n%6 == 0 {
			f.mu.Lock()
			h := len(f.handoffs)
			f.mu.Unlock()
			logf("%s left: %d backends, %d connections held, %d handoffs begun, %d violations, %d leases lost",
				time.Until(end).Round(time.Second), backends, f.poolConns(), h, f.violations.Load(), f.lost.Load())
		}
		if !sleep(ctx, min(5*time.Second, time.Until(end))) {
			break
		}
	}
	return max
}

func maxOf(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// overlaps checks the history, once the fleet has stopped: how many runs of
// the fleet's jobs it holds (with the runs a crashed leader left open in the
// lease row, until their expiry), and how many pairs of them, of one job
// and different tokens, overlap in time.
func (f *fleet) overlaps(ctx context.Context) (runs, overlaps int64, err error) {
	t, _ := lease.ParseTable(f.cfg.table)
	err = f.admin.QueryRow(ctx, `WITH runs AS (
  SELECT job_name, fencing_token, started_at, finished_at FROM `+schema.HistoryTable(t).Sanitize()+` WHERE job_name LIKE 'fleet-%'
  UNION ALL
  SELECT job_name, fencing_token, last_started_at, expires_at FROM `+t.Sanitize()+`
  WHERE job_name LIKE 'fleet-%' AND last_started_at IS NOT NULL AND last_finished_at IS NULL)
SELECT (SELECT count(*) FROM runs),
  (SELECT count(*) FROM runs a JOIN runs b ON a.job_name = b.job_name AND a.fencing_token < b.fencing_token
    AND a.started_at < b.finished_at AND b.started_at < a.finished_at)`).Scan(&runs, &overlaps)
	return runs, overlaps, err
}
