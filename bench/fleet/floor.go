package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/lease"
)

// floorResult is what -floor reports: the least that polling at the
// fleet's rate can cost, measured on the same servers as the fleet.
type floorResult struct {
	Floor   bool    `json:"floor"`
	Pollers int     `json:"pollers"`
	Seconds float64 `json:"seconds"`
	// RetrySeconds is the default retry interval; EverySeconds, how often
	// each poller sends SELECT 1: the retry interval, or pollers ÷ Rate
	// when -rate set Rate (0: not set).
	RetrySeconds float64 `json:"retry_s"`
	Rate         float64 `json:"rate_per_s"`
	EverySeconds float64 `json:"every_s"`
	DBCPU        float64 `json:"db_cpu_per_s"`
	BouncerCPU   float64 `json:"pgbouncer_cpu_per_s"`
	Statements   float64 `json:"statements_per_s"`
}

// pollFloor is the reference for a fleet of standbys that poll: as many
// connections as the fleet has standbys, each sending `SELECT 1` (the
// least a round trip to the database can ask) once per default retry
// interval, or together -rate a second, at a random phase, and nothing
// else. What the database spends on that is spent on every statement
// whatever it asks, so a fleet can be judged by what it costs above the
// floor at its own statement rate.
func pollFloor(ctx context.Context, c config) (*floorResult, error) {
	stats, err := adminPool(ctx, c.adminURL, "postgres")
	if err != nil {
		return nil, err
	}
	defer stats.Close()
	n := c.jobs * (c.perJob - 1)
	every := lease.DefaultRetryInterval
	if c.rate > 0 {
		every = time.Duration(float64(n) / c.rate * float64(time.Second))
	}
	if every < time.Millisecond {
		return nil, fmt.Errorf("-rate %g over %d connections would send each a statement more often than every millisecond: lower it, or raise -jobs", c.rate, n)
	}
	logf("floor: connecting %d pollers of SELECT 1 every %s at %d a second", n, every, c.startRate)
	cfg, err := pgx.ParseConfig(c.url)
	if err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	var polls, failures atomic.Int64
	pace := time.NewTicker(time.Second / time.Duration(c.startRate))
	defer pace.Stop()
	for range n {
		<-pace.C
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
		wg.Go(func() { pollOne(pctx, conn, every, &polls, &failures) })
	}
	sleep(ctx, every+time.Second)
	measure := func() (s snapshot, polled int64, err error) {
		s, err = sample(ctx, c, stats, cfg.Database)
		return s, polls.Load(), err
	}
	before, p0, err := measure()
	if err != nil {
		return nil, err
	}
	logf("floor: measuring for %s", c.duration)
	sleep(ctx, c.duration)
	after, p1, err := measure()
	if err != nil {
		return nil, err
	}
	if f := failures.Load(); f > 0 {
		return nil, fmt.Errorf("floor: %d pollers failed", f)
	}
	return floorFigures(c, n, every, before, after, p1-p0), nil
}

// pollOne is one poller of the floor: SELECT 1 once per interval, at a
// random phase, until ctx ends; a failure before then is counted.
func pollOne(ctx context.Context, conn *pgx.Conn, every time.Duration, polls, failures *atomic.Int64) {
	defer conn.Close(context.Background())
	if !sleep(ctx, rand.N(every)) {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		var one int
		if err := conn.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
			if ctx.Err() == nil {
				failures.Add(1)
			}
			return
		}
		polls.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// floorFigures turns two samples around the measured span into the
// floor's figures; a server the run cannot see (no pid given) is -1.
func floorFigures(c config, pollers int, every time.Duration, before, after snapshot, polled int64) *floorResult {
	secs := after.at.Sub(before.at).Seconds()
	r := &floorResult{Floor: true, Pollers: pollers, Seconds: secs, RetrySeconds: lease.DefaultRetryInterval.Seconds(),
		Rate: c.rate, EverySeconds: every.Seconds(), DBCPU: -1, BouncerCPU: -1, Statements: float64(polled) / secs}
	if c.postmaster > 0 {
		r.DBCPU = float64(after.dbTicks-before.dbTicks) / userHZ / secs
	}
	if c.pgbouncer > 0 {
		r.BouncerCPU = float64(after.pgbTicks-before.pgbTicks) / userHZ / secs
	}
	return r
}
