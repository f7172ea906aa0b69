package command

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/command/status"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// An operator pauses a job fleet-wide: a cron instance skips it with the
// skip status and says why, a running command goes on, every scheduled
// time due meanwhile is recorded paused once, and every view shows the
// pause with who and why (check: WARNING). Resuming lets it run again.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	long := lw(t, []string{child("ready block")}, d.args("--job", "j", "--", self())...)
	long.Expect(t, "ready")

	code, out := output(t, append([]string{"pause", "--job", "j", "--reason", "disk full on db2", "--id", "alice"}, store...)...)
	if code != 0 || !strings.Contains(out, "paused j (by alice: disk full on db2) until leasewrap resume --job j") ||
		!strings.Contains(out, "goes on to its end") {
		t.Fatalf("pause exited %d: %q", code, out)
	}
	// The running command was not stopped by the pause.
	select {
	case <-long.Exited:
		t.Fatal("the pause stopped the running command")
	default:
	}
	_ = long.Cmd.Process.Signal(syscall.SIGTERM)
	long.Wait(t, 15*time.Second)

	cron := lw(t, nil, d.args("--job", "j", "--skip-exit-code", "3", "--", "echo", "RAN")...)
	if code := cron.Wait(t, 15*time.Second); code != 3 {
		t.Fatalf("a cron instance of the paused job exited %d, want the skip status 3", code)
	}
	skip := cron.WaitLog(t, "skipped: the job is paused (leasewrap resume ends it)")
	if skip["paused_by"] != "alice" || skip["reason"] != "disk full on db2" {
		t.Errorf("the skip does not say who paused it and why: %v", skip)
	}

	// A scheduler: its times are recorded paused, not run.
	sched := lw(t, nil, d.args("--job", "s", "--schedule", "@every 1s", "--", "echo", "RAN")...)
	sched.WaitLog(t, "scheduler started")
	if code, out := output(t, append([]string{"pause", "--job", "s"}, store...)...); code != 0 {
		t.Fatalf("pause of s exited %d: %s", code, out)
	}
	sched.WaitLog(t, "skipped: the job is paused (leasewrap resume ends it)")
	paused := func() (claims, rows int) {
		t.Helper()
		if err := d.pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM `+pgx.Identifier{d.table + "_schedule"}.Sanitize()+
			` WHERE outcome = 'paused'), (SELECT count(*) FROM `+pgx.Identifier{d.table + "_history"}.Sanitize()+
			` WHERE outcome = 'paused')`).Scan(&claims, &rows); err != nil {
			t.Fatal(err)
		}
		return claims, rows
	}
	pgtest.Eventually(t, 15*time.Second, "two times recorded paused", func() bool {
		claims, _ := paused()
		return claims >= 2
	})

	code, out = output(t, append([]string{"check", "--job", "j", "--max-age", "1h"}, store...)...)
	if code != 1 || !strings.HasPrefix(out, "WARNING: j is paused by alice since ") || !strings.Contains(out, "disk full on db2") {
		t.Errorf("check of a paused job exited %d: %q, want WARNING (1) saying who paused it and why", code, out)
	}
	if code, out := output(t, append([]string{"check", "--job", "s"}, store...)...); code != 1 {
		t.Errorf("check of a paused scheduled job exited %d: %q, want WARNING (1)", code, out)
	}
	_, out = output(t, append([]string{"status", "--json"}, store...)...)
	var jobs []status.JobJSON
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Health != "paused" || !strings.Contains(j.HealthReason, " is paused by ") {
			t.Errorf("status --json: %s is %q (%q), want paused, and by whom", j.Job, j.Health, j.HealthReason)
		}
	}
	if _, out = output(t, append([]string{"status"}, store...)...); !strings.Contains(out, "j is paused by alice since") {
		t.Errorf("status does not say who paused j and why:\n%s", out)
	}
	_, addr := d.exporter(t, pgtest.URL())
	series := scrape(t, addr)
	if series[`leasewrap_job_paused_info{lease="j",paused_by="alice",reason="disk full on db2"}`] != "1" ||
		series[`leasewrap_job_state{lease="j",state="paused"}`] != "1" {
		t.Errorf("the exporter does not show the pause: %v", series)
	}
	if _, page := get(t, addr, "/jobs/j"); !strings.Contains(page, "paused by alice") {
		t.Errorf("the job page does not show the pause")
	}

	// Resume: the job runs again, and the scheduler's next time runs.
	code, out = output(t, append([]string{"resume", "--job", "s"}, store...)...)
	if code != 0 || !strings.Contains(out, "resumed s (paused by ") {
		t.Fatalf("resume exited %d: %q", code, out)
	}
	sched.WaitLog(t, "child started")
	_ = sched.Cmd.Process.Signal(syscall.SIGTERM)
	sched.Wait(t, 15*time.Second)
	if code, out := output(t, append([]string{"resume", "--job", "j"}, store...)...); code != 0 {
		t.Fatalf("resume of j exited %d: %q", code, out)
	}
	if code := lw(t, nil, d.args("--job", "j", "--", "true")...).Wait(t, 15*time.Second); code != 0 {
		t.Errorf("after resume, a run exited %d", code)
	}
	// Each paused time of s has one claim and one history row, paused.
	if claims, rows := paused(); claims < 2 || claims != rows {
		t.Errorf("%d times claimed paused, %d history rows: want two or more, one row each", claims, rows)
	}
}

// Bad input to pause: one line, status 64.
func TestPauseRefusesBadInput(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--job", "j", "--until", "soon"}, `invalid --until "soon": want a duration such as 2h or a time such as 2026-12-24T06:00:00Z`},
		{[]string{"--job", "j", "--until", "-1h"}, "must be in the future"},
		{[]string{"--until", "1h"}, "--job"},
	} {
		p := lw(t, nil, append(append([]string{"pause"}, tc.args...), store...)...)
		if code := p.Wait(t, 15*time.Second); code != cmdutil.ExitUsage || !strings.Contains(p.Logs.String(), tc.want) {
			t.Errorf("pause %q: exit %d, logs %s; want 64 and %q", tc.args, code, p.Logs, tc.want)
		}
	}
}
