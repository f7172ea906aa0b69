package scheduler

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/monitor"
	"github.com/redbite/leasewrap/schedule"
	"github.com/redbite/leasewrap/schema"
)

// testTable is a lease table of the test's own.
type testTable struct {
	pool  *pgxpool.Pool
	table string
}

// fakeClock is a scheduler's planning clock, moved by the test only.
type fakeClock struct{ at time.Time }

func (c *fakeClock) set(time.Time)  {}
func (c *fakeClock) now() time.Time { return c.at }

// testHost runs no command: each run calls run, which hands the lease
// back as a command that exited 0 would. A child of the test process
// would need a supervisor, whose reaping would take other tests'
// children. Signals are not watched, and the database is not waited for.
type testHost struct {
	run func(*lease.Lease) error
}

// finish hands l back as a run that exited 0.
func finish(l *lease.Lease) error {
	code := 0
	return l.Finish(context.Background(), lease.End{ExitCode: &code, Outcome: lease.OutcomeExited})
}

func (h *testHost) RunLease(l *lease.Lease) (os.Signal, error) { return nil, h.run(l) }

func (h *testHost) WatchSignals(ctx context.Context, fn func(context.Context) error) (os.Signal, error) {
	return nil, fn(ctx)
}

func (h *testHost) Reach(_ context.Context, err error) error { return err }

func (h *testHost) Abandon(l *lease.Lease, _ os.Signal, _ zerolog.Logger) {
	_ = l.Abandon(context.Background())
}

func (h *testHost) Advised(err error) error { return err }

func (h *testHost) Reschedule(job, spec string) string { return "reschedule " + job + " " + spec }

// testConfig is the Config of a scheduler of spec for job over a fresh
// table of pool, its host running nothing.
func testConfig(t *testing.T, pool *pgxpool.Pool, table, job, holder string, s *schedule.Schedule, catchUp schedule.CatchUp) Config {
	t.Helper()
	timings := lease.TimingsFor(3*time.Second, nil)
	store, err := lease.New(pool, lease.WithTable(table), lease.WithHolder(holder), lease.WithTimings(timings))
	if err != nil {
		t.Fatal(err)
	}
	return Config{Store: store, Job: job, Schedule: s, CatchUp: catchUp, Timings: timings,
		Signals: make(chan os.Signal), Log: zerolog.Nop(), Monitor: monitor.New(job, holder, timings, false),
		Host: &testHost{run: finish}}
}

// testScheduler is a real scheduler of spec over a real table, planning
// on an injected clock (the database's own clock is years later, so every
// time is due to it); its runs run nothing and succeed.
func testScheduler(t *testing.T, spec, zone string, catchUp schedule.CatchUp, once bool, from time.Time) (*scheduler, *fakeClock, testTable) {
	t.Helper()
	pool := pgtest.Pool(t)
	d := testTable{pool: pool, table: pgtest.Table(t, pool)}
	s, err := schedule.Parse(spec, zone)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, pool, d.table, "dst", "h", s, catchUp)
	cfg.Once = once
	if _, err := cfg.Store.Register(context.Background(), cfg.Job, s.Spec(), s.ZoneRules); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{at: from}
	sc := newScheduler(cfg, clock)
	sc.last, sc.until = from, from
	if once {
		sc.onceAt(from)
	}
	return sc, clock, d
}

// runScheduler drives a scheduler of spec over [from, to]: each step's
// wait moves the clock. It returns the times run, oldest first.
func runScheduler(t *testing.T, spec, zone string, from, to time.Time) []time.Time {
	t.Helper()
	sc, clock, d := testScheduler(t, spec, zone, schedule.CatchUp{Policy: schedule.CatchUpAll, Window: 48 * time.Hour}, false, from)
	stepUntil(t, sc, clock, to, 1000)
	return d.runTimes(t)
}

// stepUntil steps sc until clock reaches to, each step's wait moving the
// clock, in at most steps steps.
func stepUntil(t *testing.T, sc *scheduler, clock *fakeClock, to time.Time, steps int) {
	t.Helper()
	for n := 0; clock.at.Before(to); n++ {
		if n > steps {
			t.Fatal("the scheduler does not move on")
		}
		wait, err := sc.step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		clock.at = clock.at.Add(max(wait, time.Millisecond))
	}
}

// outcomes is each scheduled time of job recorded in the claims table,
// with its outcome.
func (d testTable) outcomes(t *testing.T, job string) map[time.Time]string {
	t.Helper()
	rows, err := d.pool.Query(context.Background(), `SELECT scheduled_at, outcome FROM `+
		schema.ClaimsTable(pgx.Identifier{d.table}).Sanitize()+` WHERE job_name = $1`, job)
	if err != nil {
		t.Fatal(err)
	}
	out := map[time.Time]string{}
	for rows.Next() {
		var (
			at      time.Time
			outcome string
		)
		if err := rows.Scan(&at, &outcome); err != nil {
			t.Fatal(err)
		}
		out[at.UTC()] = outcome
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// runTimes lists the scheduled times recorded as run, oldest first.
func (d testTable) runTimes(t *testing.T) []time.Time {
	t.Helper()
	rows, err := d.pool.Query(context.Background(), `SELECT scheduled_at FROM "`+d.table+`_schedule" WHERE outcome = 'run' ORDER BY scheduled_at`)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		out = append(out, at.UTC())
	}
	return out
}

func utcTimes(s ...string) []time.Time {
	out := make([]time.Time, len(s))
	for i, v := range s {
		out[i], _ = time.Parse(time.RFC3339, v)
	}
	return out
}

// Across daylight saving transitions, the scheduler claims each scheduled
// instant once: a fixed time that a fall-back repeats runs once (its first
// occurrence), one that a spring-forward skips runs once after the gap,
// and a schedule that follows the wall clock ("30 * * * *") runs in both
// occurrences of the repeated hour, each its own claim.
func TestSchedulerAcrossDaylightSavingTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spec, zone string
		from, to         string
		want             []time.Time
	}{
		{"fall back, fixed time", "30 1 * * *", "America/New_York", "2025-11-01T12:00:00Z", "2025-11-03T12:00:00Z",
			utcTimes("2025-11-02T05:30:00Z", "2025-11-03T06:30:00Z")},
		{"fall back, wall clock", "30 * * * *", "America/New_York", "2025-11-02T04:00:00Z", "2025-11-02T07:00:00Z",
			utcTimes("2025-11-02T04:30:00Z", "2025-11-02T05:30:00Z", "2025-11-02T06:30:00Z")},
		{"spring forward, fixed time", "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-30T12:00:00Z",
			utcTimes("2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			from, to := utcTimes(tc.from, tc.to)[0], utcTimes(tc.from, tc.to)[1]
			got := runScheduler(t, tc.spec, tc.zone, from, to)
			if len(got) != len(tc.want) {
				t.Fatalf("claimed %v, want %v", got, tc.want)
			}
			for i := range got {
				if !got[i].Equal(tc.want[i]) {
					t.Errorf("claimed %v, want %v", got, tc.want)
					break
				}
			}
		})
	}
}

// stepOnce steps sc as Run does with --once: until it is done.
func stepOnce(t *testing.T, sc *scheduler, clock *fakeClock) {
	t.Helper()
	for steps := 0; ; steps++ {
		if steps > 10 {
			t.Fatal("--once does not stop")
		}
		wait, err := sc.step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if sc.onceDone(wait) {
			return
		}
		clock.at = clock.at.Add(wait)
	}
}

// --once runs only the time just due, however long it takes: a time that
// comes due meanwhile is the next crontab line's, and it records nothing
// for it (neither run nor skipped). Its run here outlasts two periods, and
// --once still runs the one time; the late times before it are missed.
func TestOnceRunsOnlyTheTimesDueAtItsStart(t *testing.T) {
	t.Parallel()
	from := utcTimes("2025-06-01T00:03:10Z")[0]
	sc, clock, d := testScheduler(t, "* * * * *", "UTC", schedule.CatchUp{Policy: schedule.CatchUpLatest, Window: time.Hour}, true, from)
	sc.last = utcTimes("2025-06-01T00:00:00Z")[0] // 00:01 and 00:02 are late
	sc.cfg.Host = &testHost{run: func(l *lease.Lease) error {
		clock.at = clock.at.Add(2 * time.Minute)
		return finish(l)
	}}
	stepOnce(t, sc, clock)
	if got, want := d.runTimes(t), utcTimes("2025-06-01T00:03:00Z"); !slices.Equal(got, want) {
		t.Errorf("--once ran %v, want only %v", got, want)
	}
	want := map[time.Time]string{}
	for _, at := range utcTimes("2025-06-01T00:01:00Z", "2025-06-01T00:02:00Z") {
		want[at] = "missed"
	}
	want[utcTimes("2025-06-01T00:03:00Z")[0]] = "run"
	if got := d.outcomes(t, "dst"); !maps.Equal(got, want) {
		t.Errorf("--once recorded %v, want %v (nothing for 00:04 and 00:05, which came due during its run)", got, want)
	}
}

// --once started a little before a time (a host's clock ahead of the
// database's, cron firing on the minute) waits for that time and runs it;
// started further ahead, or past the grace after the latest time, it runs
// nothing.
func TestOnceStartedALittleEarlyWaitsForTheTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		from string
		want []time.Time
	}{
		{"2025-06-01T00:03:57Z", utcTimes("2025-06-01T00:04:00Z")},
		{"2025-06-01T00:03:55Z", utcTimes("2025-06-01T00:04:00Z")},
		{"2025-06-01T00:03:54Z", nil},
		{"2025-06-01T00:03:29Z", utcTimes("2025-06-01T00:03:00Z")},
		{"2025-06-01T00:03:31Z", nil},
	} {
		t.Run(tc.from, func(t *testing.T) {
			t.Parallel()
			from := utcTimes(tc.from)[0]
			sc, clock, d := testScheduler(t, "* * * * *", "UTC", schedule.CatchUp{Policy: schedule.CatchUpLatest, Window: time.Hour}, true, from)
			sc.last = utcTimes("2025-06-01T00:02:00Z")[0]
			stepOnce(t, sc, clock)
			if got := d.runTimes(t); !slices.Equal(got, tc.want) {
				t.Errorf("--once started at %s ran %v, want %v", tc.from, got, tc.want)
			}
		})
	}
}

// After an outage, --catch-up all runs every late time in order, even
// when a catch-up run outlasts the next due time: that time is late too,
// not skipped, and recording it must not move the scheduler past the late
// times still owed (which would leave them neither run nor missed).
func TestCatchUpRunsEveryLateTimeWhenARunOutlastsTheNextTime(t *testing.T) {
	t.Parallel()
	from := utcTimes("2025-06-01T00:04:45Z")[0]
	sc, clock, d := testScheduler(t, "* * * * *", "UTC", schedule.CatchUp{Policy: schedule.CatchUpAll, Window: time.Hour}, false, from)
	sc.last = utcTimes("2025-06-01T00:00:00Z")[0] // 00:01 to 00:04 are late
	sc.cfg.Host = &testHost{run: func(l *lease.Lease) error {
		clock.at = clock.at.Add(20 * time.Second) // the first run ends after 00:05 came due
		return finish(l)
	}}
	stepUntil(t, sc, clock, utcTimes("2025-06-01T00:06:30Z")[0], 100)
	want := utcTimes("2025-06-01T00:01:00Z", "2025-06-01T00:02:00Z", "2025-06-01T00:03:00Z", "2025-06-01T00:04:00Z",
		"2025-06-01T00:05:00Z", "2025-06-01T00:06:00Z")
	if got := d.runTimes(t); !slices.Equal(got, want) {
		t.Errorf("--catch-up all ran %v, want every time from 00:01 to 00:06", got)
	}
}
