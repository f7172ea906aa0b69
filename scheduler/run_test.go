package scheduler

import (
	"context"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
)

// ranTime is one run a scheduler's host was handed.
type ranTime struct {
	at     time.Time
	token  int64
	holder string
}

// ranTimes records the runs of every scheduler of a test.
type ranTimes struct {
	mu   sync.Mutex
	runs []ranTime
}

// host is a Host for holder that records each run, then hands the lease
// back as a command that exited 0 would.
func (r *ranTimes) host(holder string) *testHost {
	return &testHost{run: func(l *lease.Lease) error {
		r.mu.Lock()
		r.runs = append(r.runs, ranTime{at: l.ScheduledAt().UTC(), token: l.Token(), holder: holder})
		r.mu.Unlock()
		return finish(l)
	}}
}

func (r *ranTimes) all() []ranTime {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs)
}

// historyRuns lists job's runs in the history table of table: each
// scheduled time with the fencing token it ran under, oldest first.
func historyRuns(t *testing.T, pool *pgxpool.Pool, table, job string) []ranTime {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT scheduled_at, fencing_token FROM `+
		pgx.Identifier{table + "_history"}.Sanitize()+` WHERE job_name = $1 AND outcome = $2 ORDER BY scheduled_at, fencing_token`,
		job, lease.OutcomeExited)
	if err != nil {
		t.Fatal(err)
	}
	var out []ranTime
	for rows.Next() {
		var r ranTime
		if err := rows.Scan(&r.at, &r.token); err != nil {
			t.Fatal(err)
		}
		r.at = r.at.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Two schedulers of one job, each with its own connections, run the
// loop in process on the real clock: every scheduled time they run is run
// by one of them only, under a fencing token above the previous time's,
// and the history and the claims table record each run once. A signal to
// end leasewrap stops both between runs, with nothing to report.
func TestEachScheduledTimeRunsOnceAcrossSchedulers(t *testing.T) {
	t.Parallel()
	table := pgtest.Table(t, pgtest.Pool(t))
	s, err := schedule.Parse("@every 1s", "")
	if err != nil {
		t.Fatal(err)
	}
	ran := &ranTimes{}
	type instance struct {
		sigs    chan os.Signal
		err     error
		stopped chan struct{} // closed once Run returned err
	}
	var instances []*instance
	for _, holder := range []string{"a", "b"} {
		cfg := testConfig(t, pgtest.Pool(t), table, "every", holder, s, schedule.CatchUp{Policy: schedule.CatchUpLatest, Window: time.Hour})
		in := &instance{sigs: make(chan os.Signal, 1), stopped: make(chan struct{})}
		cfg.Signals, cfg.Host = in.sigs, ran.host(holder)
		cfg.Log = zerolog.New(zerolog.NewTestWriter(t)).With().Str("holder", holder).Logger()
		go func() {
			defer close(in.stopped)
			in.err = Run(context.Background(), cfg)
		}()
		// A test that fails early still stops its schedulers before its
		// log and its tables go.
		t.Cleanup(func() {
			select {
			case in.sigs <- syscall.SIGTERM:
			default:
			}
			<-in.stopped
		})
		instances = append(instances, in)
	}
	pgtest.Eventually(t, 30*time.Second, "four scheduled times run", func() bool { return len(ran.all()) >= 4 })
	for _, in := range instances {
		in.sigs <- syscall.SIGTERM
	}
	for _, in := range instances {
		select {
		case <-in.stopped:
			if in.err != nil {
				t.Errorf("a scheduler stopped by SIGTERM between runs ended with %v, want nil", in.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a scheduler did not stop on SIGTERM")
		}
	}

	runs := ran.all()
	slices.SortFunc(runs, func(a, b ranTime) int { return a.at.Compare(b.at) })
	for i := 1; i < len(runs); i++ {
		prev, r := runs[i-1], runs[i]
		if r.at.Equal(prev.at) {
			t.Errorf("%v ran twice: by %s (token %d) and by %s (token %d)", r.at, prev.holder, prev.token, r.holder, r.token)
		} else if r.token <= prev.token {
			t.Errorf("%v ran under token %d, not above %d of %v before it", r.at, r.token, prev.token, prev.at)
		}
	}
	pool := pgtest.Pool(t)
	history := historyRuns(t, pool, table, "every")
	if len(history) != len(runs) {
		t.Errorf("the history records %d runs, want the %d that ran: %v", len(history), len(runs), history)
	}
	for i := range min(len(history), len(runs)) {
		if !history[i].at.Equal(runs[i].at) || history[i].token != runs[i].token {
			t.Errorf("history run %d is %v (token %d), want %v (token %d)", i, history[i].at, history[i].token, runs[i].at, runs[i].token)
		}
	}
	d := testTable{pool: pool, table: table}
	if got := d.runTimes(t); !slices.EqualFunc(got, runs, func(at time.Time, r ranTime) bool { return at.Equal(r.at) }) {
		t.Errorf("the claims table records %v run, want the times that ran: %v", got, runs)
	}
}
