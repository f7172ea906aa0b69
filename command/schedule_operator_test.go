package command

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// An operator empties the claims table just after a time ran; a crontab
// line fired a moment later, still within that time's grace, must not
// run it again: the lease row's mark still accounts for it.
func TestEmptiedClaimsDoNotRunTheTimeThatJustRan(t *testing.T) {
	t.Parallel()
	for _, empty := range []string{"TRUNCATE ", "DELETE FROM "} {
		t.Run(empty, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			records := filepath.Join(t.TempDir(), "records")
			// @every 20s: a grace of ten seconds, roomy on a busy machine.
			args := d.args("--job", "j", "--schedule", "@every 20s", "--", self())
			first := lw(t, []string{child("trap record:" + records + " exit:0")}, args...)
			first.WaitLog(t, "released")
			_ = first.Cmd.Process.Signal(syscall.SIGTERM)
			first.Wait(t, 15*time.Second)
			d.exec(t, empty+pgx.Identifier{d.table + "_schedule"}.Sanitize())
			// A crontab line fired now: it decides, and exits.
			again := lw(t, []string{child("trap record:" + records + " exit:0")},
				d.args("--job", "j", "--schedule", "@every 20s", "--once", "--", self())...)
			if code := again.Wait(t, 15*time.Second); code != 0 {
				t.Fatalf("the --once line exited %d", code)
			}
			if runs := readHistory(t, records); len(runs) != 1 {
				t.Fatalf("%d runs, want the time run once", len(runs))
			}
		})
	}
}

// A rolling change of a job's schedule: instances with the new one stand
// by (no crash loop) until an operator switches the job with reschedule;
// then they run the new schedule's times, the old ones stand by, and no
// scheduled time runs twice.
func TestRollingScheduleChange(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	records := filepath.Join(t.TempDir(), "records")
	env := []string{child("trap record:" + records + " exit:0")}
	old := lw(t, env, d.args("--job", "j", "--schedule", "@every 2s", "--", self())...)
	old.WaitLog(t, "released")
	fresh := lw(t, env, d.args("--job", "j", "--schedule", "@every 3s", "--", self())...)
	fresh.WaitLog(t, "standing by: the job runs on another schedule; this instance runs nothing until the job's is its own")

	code, out := output(t, append([]string{"reschedule", "--job", "j", "--schedule", "@every 3s"}, store...)...)
	if code != 0 || !strings.Contains(out, `job j runs on "@every 3s" from now on (was "@every 2s")`) {
		t.Fatalf("reschedule exited %d: %q", code, out)
	}
	fresh.WaitLog(t, "the job's schedule is this instance's: scheduling")
	old.WaitLog(t, "standing by: the job runs on another schedule; this instance runs nothing until the job's is its own")
	// The new schedule's instance runs a time of its own.
	pgtest.Eventually(t, 20*time.Second, "a run of the new schedule", func() bool {
		for _, r := range readHistory(t, records) {
			if r.ScheduledAt.Unix()%3 == 0 && r.ScheduledAt.Unix()%2 != 0 {
				return true
			}
		}
		return false
	})
	for _, p := range []*lwtest.Proc{old, fresh} {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		if code := p.Wait(t, 15*time.Second); code != 0 {
			t.Errorf("a scheduler stopped between runs exited %d, want 0", code)
		}
	}
	seen := map[time.Time]int{}
	for _, r := range readHistory(t, records) {
		if seen[r.ScheduledAt.UTC()]++; seen[r.ScheduledAt.UTC()] > 1 {
			t.Errorf("%s ran twice", r.ScheduledAt.UTC().Format(time.TimeOnly))
		}
	}
	if code, out := output(t, append([]string{"reschedule", "--job", "nope", "--schedule", "@every 3s"}, store...)...); code != 1 {
		t.Errorf("reschedule of a job without a row exited %d: %q, want 1", code, out)
	}
}
