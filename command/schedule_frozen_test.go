package command

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// dbNow reads the database's clock, which schedules are planned on.
func (d db) dbNow(t *testing.T) time.Time {
	t.Helper()
	var now time.Time
	if err := d.pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// outcomes maps each claimed time of job to its outcome.
func (d db) outcomes(t *testing.T, job string) map[time.Time]string {
	t.Helper()
	out := map[time.Time]string{}
	for _, c := range d.claims(t, job) {
		out[c.at.UTC()] = c.outcome
	}
	return out
}

// A scheduler frozen (SIGSTOP) during a run for longer than its lease:
// the times that came due while its lease was live are skipped, but those
// after the lease ran out found no holder, and are late, not skipped:
// --catch-up all runs each of them once the scheduler is thawed. Before,
// they were all recorded skipped (and would have gone to catch-up had
// the database been out of reach when the run ended).
func TestFrozenSchedulerCatchesUpTheTimesAfterItsLeaseEnded(t *testing.T) {
	t.Parallel()
	const period = 3 * time.Second
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	args := d.argsTTL("3s", "--job", "j", "--schedule", "@every 3s", "--catch-up", "all", "--", self())
	p := lw(t, []string{child("record:" + record + " ready sleep:1s")}, args...)
	p.Expect(t, "ready")
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cmd.Process.Signal(syscall.SIGCONT) })
	var first, expires time.Time
	d.query(t, &first, `SELECT max(scheduled_at) FROM "`+d.table+`_schedule" WHERE outcome = 'run'`)
	d.query(t, &expires, `SELECT expires_at FROM TABLE WHERE job_name = 'j'`)
	// Frozen for three periods after the lease ran out.
	pgtest.Eventually(t, 30*time.Second, "the frozen time", func() bool { return d.dbNow(t).After(expires.Add(3*period + 500*time.Millisecond)) })
	// Read again: a renewal sent just before the stop has landed by now.
	d.query(t, &expires, `SELECT expires_at FROM TABLE WHERE job_name = 'j'`)
	thawed := d.dbNow(t)
	if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	first, expires, thawed = first.UTC(), expires.UTC(), thawed.UTC()
	var after []time.Time // the times after the lease ran out, by the thaw
	for at := first.Add(period); !at.After(thawed); at = at.Add(period) {
		if at.After(expires) {
			after = append(after, at)
		}
	}
	if len(after) < 3 {
		t.Fatalf("only %d times came due after the lease ran out (%s) and before the thaw (%s)", len(after), expires, thawed)
	}
	last := after[len(after)-1]
	pgtest.Eventually(t, 60*time.Second, "every time up to the thaw accounted for", func() bool {
		got := d.outcomes(t, "j")
		for at := first; !at.After(last); at = at.Add(period) {
			if got[at] == "" {
				return false
			}
		}
		return true
	})
	got := d.outcomes(t, "j")
	for _, at := range after {
		if got[at] != "run" {
			t.Errorf("%s came due %s after the lease ran out at %s: %q, want run (--catch-up all)", at.Format("15:04:05"),
				at.Sub(expires).Round(time.Millisecond), expires.Format("15:04:05.000"), got[at])
		}
	}
	for at := first.Add(period); !at.After(last); at = at.Add(period) {
		if got[at] == "skipped" && at.After(expires) {
			t.Errorf("%s recorded skipped, though the lease ran out at %s", at.Format("15:04:05"), expires.Format("15:04:05.000"))
		}
	}
}
