package command

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/check"
	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/command/status"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// Instances that disagree on a job's schedule: a crontab line (--once)
// with another schedule is refused with 64, saying which the job has and
// how to change it; a scheduler with another one stands by, running
// nothing, with no crash loop.
func TestScheduleMismatchIsRefused(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	first := lw(t, nil, d.args("--job", "j", "--schedule", "0 3 * * *", "--timezone", "Europe/Berlin", "--", "true")...)
	first.WaitLog(t, "scheduler started")
	second := lw(t, nil, d.args("--job", "j", "--schedule", "0 3 * * *", "--timezone", "UTC", "--once", "--", "true")...)
	if code := second.Wait(t, 15*time.Second); code != cmdutil.ExitUsage {
		t.Fatalf("second instance exited %d, want 64", code)
	}
	if !strings.Contains(second.Logs.String(), `runs on schedule \"CRON_TZ=Europe/Berlin 0 3 * * *\"`) &&
		!strings.Contains(second.Logs.String(), `runs on schedule "CRON_TZ=Europe/Berlin 0 3 * * *"`) {
		t.Errorf("the refusal does not name the recorded schedule: %s", second.Logs)
	}
	if !strings.Contains(second.Logs.String(), "leasewrap reschedule --job j --schedule '0 3 * * *'") {
		t.Errorf("the refusal does not say how to change the schedule: %s", second.Logs)
	}
	third := lw(t, nil, d.args("--job", "j", "--schedule", "0 3 * * *", "--", "true")...)
	third.WaitLog(t, "standing by: the job runs on another schedule; this instance runs nothing until the job's is its own")
	for _, p := range []*lwtest.Proc{first, third} {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		if code := p.Wait(t, 15*time.Second); code != 0 {
			t.Errorf("a scheduler stopped between runs exited %d, want 0", code)
		}
	}
}

// A scheduled job as operators see it: status shows its schedule and next
// time, the exporter the next time, and check without --max-age judges
// its latest due time: OK once it ran and succeeded, CRITICAL when no
// scheduler ran it (all down) or its run failed.
func TestScheduledJobStatusCheckAndMetrics(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	runCheck := func() (int, string) {
		t.Helper()
		p := lw(t, nil, "check", "--database-url", pgtest.URL(), "--table", d.table, "--job", "nightly")
		var out strings.Builder
		for line := range p.Lines {
			out.WriteString(line + "\n")
		}
		return p.Wait(t, 10*time.Second), out.String()
	}
	waitCheck := func(wantCode int, wantPart string) {
		t.Helper()
		// Long enough for a loaded machine to start many check processes:
		// only a check that never answers so fails.
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, out := runCheck()
			if code == wantCode && strings.Contains(out, wantPart) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("check kept answering %d %q, want %d with %q", code, out, wantCode, wantPart)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	sched := lw(t, nil, d.args("--job", "nightly", "--schedule", "@every 2s", "--", "true")...)
	sched.WaitLog(t, "released")
	waitCheck(0, "ran and succeeded")
	// --json gives the newest success and run, as monitoring.md says.
	code, js, _ := runInProcess(t, nil, "check", "--database-url", pgtest.URL(), "--table", d.table, "--job", "nightly", "--json")
	var res check.Result
	if err := json.Unmarshal([]byte(js), &res); err != nil || code != 0 || res.LastSuccessAt == nil || res.LastRunAt == nil ||
		res.LastSuccessAgeSeconds == nil || *res.LastSuccessAgeSeconds < 0 || res.LastSuccessAt.After(*res.LastRunAt) {
		t.Errorf("check --json exited %d: %s, want the newest success and run", code, js)
	}

	// The next time is "within 2s" of when status read it, some time
	// between its start and its end, however slow the machine made those.
	before := time.Now()
	p := lw(t, nil, "status", "--database-url", pgtest.URL(), "--table", d.table, "--json")
	var out strings.Builder
	for line := range p.Lines {
		out.WriteString(line)
	}
	p.Wait(t, 10*time.Second)
	after := time.Now()
	var jobs []status.JobJSON
	if err := json.Unmarshal([]byte(out.String()), &jobs); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(jobs) != 1 || jobs[0].Schedule == nil || *jobs[0].Schedule != "@every 2s" || jobs[0].NextScheduledAt == nil ||
		!jobs[0].NextScheduledAt.After(before) || jobs[0].NextScheduledAt.After(after.Add(2*time.Second)) {
		t.Errorf("status --json between %s and %s: %s, want the schedule and its next time within 2s",
			before.Format(time.TimeOnly+".000"), after.Format(time.TimeOnly+".000"), out.String())
	}
	_, addr := d.exporter(t, pgtest.URL())
	before = time.Now()
	next := scrape(t, addr)[`leasewrap_job_next_scheduled_timestamp_seconds{lease="nightly"}`]
	after = time.Now()
	// Whole seconds: the metric's time may be up to a second before the
	// exact one.
	if at := seconds(t, next); at < float64(before.Unix())-1 || at > float64(after.Unix())+3 {
		t.Errorf("leasewrap_job_next_scheduled_timestamp_seconds = %s between %s and %s, want within 2s of then",
			next, before.Format(time.TimeOnly), after.Format(time.TimeOnly))
	}

	// All schedulers down: the next due time is nobody's.
	_ = sched.Cmd.Process.Signal(syscall.SIGTERM)
	if code := sched.Wait(t, 15*time.Second); code != 0 {
		t.Errorf("scheduler stopped between runs exited %d, want 0", code)
	}
	waitCheck(2, "was not run, and no instance recorded it missed")

	// Back, with a command that fails.
	lw(t, nil, d.args("--job", "nightly", "--schedule", "@every 2s", "--", "false")...)
	waitCheck(2, "failed (exited 1 on")
}

// --once runs only the time just due, however many times nobody ran
// before it: a crontab line is not a catch-up (cron runs no time it did
// not fire for). Under either policy it accepts it records the older ones
// missed; --catch-up all is refused with it.
func TestOnceRecordsTheTimesNobodyRanMissed(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"latest", "none"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			args := d.args("--job", "j", "--schedule", "@every 1s", "--catch-up", policy)
			sched := lw(t, nil, append(args, "--", "true")...)
			sched.WaitLog(t, "released")
			_ = sched.Cmd.Process.Signal(syscall.SIGTERM)
			sched.Wait(t, 15*time.Second)
			var last time.Time
			if err := d.pool.QueryRow(context.Background(), `SELECT max(scheduled_at) FROM "`+d.table+`_schedule"`).Scan(&last); err != nil {
				t.Fatal(err)
			}
			// Four times come due while nothing runs.
			time.Sleep(time.Until(last.Add(4*time.Second + 600*time.Millisecond)))
			once := lw(t, nil, append(args, "--once", "--", "true")...)
			if code := once.Wait(t, 20*time.Second); code != 0 {
				t.Fatalf("--once exited %d", code)
			}
			var runs, missed int
			var lastRun, lastMissed *time.Time
			err := d.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE outcome = 'run'), count(*) FILTER (WHERE outcome = 'missed'),
  max(scheduled_at) FILTER (WHERE outcome = 'run'), max(scheduled_at) FILTER (WHERE outcome = 'missed')
FROM "`+d.table+`_schedule" WHERE scheduled_at > $1`, last).Scan(&runs, &missed, &lastRun, &lastMissed)
			if err != nil {
				t.Fatal(err)
			}
			if runs != 1 || missed < 4 || lastMissed == nil || !lastRun.After(*lastMissed) {
				t.Errorf("--catch-up %s: %d runs and %d missed of the late times, want the one just due run and the others (at least 4) missed", policy, runs, missed)
			}
		})
	}
}

// Between scheduled times a scheduler sends the database nothing: its
// sessions' last statements stay where they were for many renew and retry
// intervals (the next time, 29 February at midnight, is years away).
func TestIdleSchedulerSendsNothing(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	app := "lw-idle-" + d.table
	url := pgtest.URL() + "&application_name=" + app
	args := d.args("--job", "j", "--schedule", "0 0 29 2 *", "--", "true")
	args[1] = url // --database-url
	sched := lw(t, nil, args...)
	sched.WaitLog(t, "scheduler started")
	// lastStatements lists the scheduler's sessions with when each last
	// began a statement.
	lastStatements := func() string {
		var s string
		err := d.pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(pid || '@' || coalesce(query_start::text, '-'), ',' ORDER BY pid), '')
FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := lastStatements()
	if before == "" {
		t.Fatal("the scheduler has no session")
	}
	// Ten renew intervals (300ms) and thirty retry intervals (100ms).
	time.Sleep(3 * time.Second)
	if after := lastStatements(); after != before {
		t.Errorf("an idle scheduler sent statements: sessions went from %s to %s", before, after)
	}
}

// A long outage is recorded as one summary row, but counted as the times
// it stands for: in the scheduler's log line (with the first of them) and
// in leasewrap_job_runs{outcome="missed"}.
func TestMissedTimesAreCountedAsTimes(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	args := d.args("--job", "j", "--schedule", "@every 1s", "--catch-up", "none")
	sched := lw(t, nil, append(args, "--", "true")...)
	sched.WaitLog(t, "released")
	_ = sched.Cmd.Process.Signal(syscall.SIGTERM)
	sched.Wait(t, 15*time.Second)
	// Half an hour of times nobody ran: the job's mark moved back, and
	// what was recorded after it forgotten.
	d.exec(t, `DELETE FROM "`+d.table+`_schedule"`)
	d.exec(t, `DELETE FROM "`+d.table+`_history"`)
	var mark time.Time
	err := d.pool.QueryRow(context.Background(), `UPDATE "`+d.table+`" SET accounted_through = date_trunc('second', now()) - interval '1800 s'
WHERE job_name = 'j' RETURNING accounted_through`).Scan(&mark)
	if err != nil {
		t.Fatal(err)
	}
	again := lw(t, nil, append(args, "--", "true")...)
	e := again.WaitLog(t, "recorded scheduled times nobody ran")
	_ = again.Cmd.Process.Signal(syscall.SIGTERM)
	again.Wait(t, 15*time.Second)
	// The time due when the scheduler starts runs, so at least the 1,799
	// times after the mark and before it were missed; a starved scheduler
	// may miss more and log them in lines of their own.
	times, _ := e["times"].(float64)
	if times < 1799 || e["first"] != mark.Add(time.Second).UTC().Format(cmdutil.LogTimeFormat) {
		t.Fatalf("logged %v, want 1799 times or more, the first at %s", e, mark.Add(time.Second).UTC())
	}
	var logged float64
	for _, entry := range again.LogEntries(t) {
		if entry["message"] == "recorded scheduled times nobody ran" {
			n, _ := entry["times"].(float64)
			logged += n
		}
	}
	_, addr := d.exporter(t, pgtest.URL())
	if got := scrape(t, addr)[`leasewrap_job_runs{lease="j",outcome="missed"}`]; seconds(t, got) != logged {
		t.Errorf(`leasewrap_job_runs{outcome="missed"} = %s, want the %v times logged`, got, logged)
	}
}

// --wait-timeout bounds a scheduler's stand-by for an unreachable
// database only: one that stands by for the job's schedule to become its
// own (a rolling schedule change) is not ended by it, and schedules once
// reschedule makes the job's schedule its own.
func TestWaitTimeoutDoesNotEndAWaitForTheSchedule(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	first := lw(t, nil, d.args("--job", "j", "--schedule", "0 3 * * *", "--", "true")...)
	first.WaitLog(t, "scheduler started")
	second := lw(t, nil, d.args("--job", "j", "--schedule", "0 4 * * *", "--wait-timeout", "500ms", "--", "true")...)
	second.WaitLog(t, "standing by: the job runs on another schedule; this instance runs nothing until the job's is its own")
	// Three times --wait-timeout, by the clock of a machine that may be
	// busy: the stand-by must outlast it.
	window := second.Window()
	for window.Within(1500 * time.Millisecond) {
		select {
		case <-second.Exited:
			t.Fatalf("the scheduler standing by for its schedule exited %d within 1.5s of --wait-timeout 500ms", second.Code())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if code, out := output(t, "reschedule", "--job", "j", "--schedule", "0 4 * * *", "--database-url", pgtest.URL(), "--table", d.table); code != 0 {
		t.Fatalf("reschedule exited %d: %s", code, out)
	}
	second.WaitLog(t, "the job's schedule is this instance's: scheduling")
	for _, p := range []*lwtest.Proc{first, second} {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		p.Wait(t, 15*time.Second)
	}
}
