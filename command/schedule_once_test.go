package command

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// untilDB waits until the database's clock reads at least at.
func (d db) untilDB(t *testing.T, at time.Time) {
	t.Helper()
	if wait := at.Sub(d.dbNow(t)); wait > 0 {
		time.Sleep(wait)
	}
	pgtest.Eventually(t, 10*time.Second, "the database's clock", func() bool { return !d.dbNow(t).Before(at) })
}

// Crontab lines (--once) started four seconds before each time of
// "@every 10s" on the database's clock, as cron on a host whose clock is a
// little ahead fires them: each waits for its time and runs it, within
// the five seconds' tolerance. Before, each found nothing due ("nothing
// to run") and the times were all recorded missed. A line that a starved
// machine starts after its time is another case (a late line), so it
// ends its round; a round that judged no early line is tried again.
func TestOnceALittleEarlyRunsTheTimeAboutToComeDue(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for round := 1; round <= 3; round++ {
		if early := onceLinesALittleEarly(t, d, round); early > 0 {
			return
		}
		t.Logf("round %d: every line started after its time (a loaded machine); trying again", round)
	}
	t.Fatal("in three rounds every line started after its time: the test proved nothing")
}

// onceLinesALittleEarly starts up to three --once lines of job "jN" (N
// the round), each four seconds before its time, and asserts that every
// line started before its time ran that time. It returns how many lines
// the scheduler started before their time.
func onceLinesALittleEarly(t *testing.T, d db, round int) (early int) {
	t.Helper()
	const period = 10 * time.Second
	job := fmt.Sprintf("j%d", round)
	times := []time.Time{d.dbNow(t).Truncate(period).Add(2 * period)}
	for range 2 {
		times = append(times, times[len(times)-1].Add(period))
	}
	for i, at := range times {
		d.untilDB(t, at.Add(-4*time.Second))
		p := lw(t, []string{child("env")}, d.args("--job", job, "--schedule", "@every 10s", "--catch-up", "none", "--once", "--", self())...)
		ran := false
		for line := range p.Lines {
			if line == "LEASEWRAP_SCHEDULED_AT="+at.UTC().Format(time.RFC3339) {
				ran = true
			}
		}
		if code := p.Wait(t, 30*time.Second); code != 0 {
			t.Fatalf("the line for %s exited %d, want 0", at.Format("15:04:05"), code)
		}
		started := p.WaitLog(t, "scheduler started")
		if late := logTime(t, started).Sub(at); late > 0 {
			// The lines from here on prove nothing about this one.
			t.Logf("the line for %s started %s after it; judging the %d before it", at.Format("15:04:05"), late, i)
			times = times[:i]
			break
		}
		if !ran {
			t.Errorf("the line started before %s did not run it", at.Format("15:04:05"))
		}
		if due, err := time.Parse(time.RFC3339Nano, fmt.Sprint(started["due"])); err != nil || !due.Equal(at) {
			t.Errorf("the line started before %s says it is for %v", at.Format("15:04:05"), started["due"])
		}
		if through, err := time.Parse(time.RFC3339Nano, fmt.Sprint(started["accounted_through"])); err == nil && through.Before(at) {
			early++
		}
	}
	got := d.outcomes(t, job)
	for _, at := range times {
		if got[at.UTC()] != "run" {
			t.Errorf("%s: %q, want run; all: %v", at.Format("15:04:05"), got[at.UTC()], got)
		}
	}
	return early
}

// A --once run that outlasts the next time leaves that time to the next
// crontab line: it records nothing for it (before, it recorded it
// skipped, and the next line found it accounted for).
func TestOnceLeavesTheNextTimeToTheNextLine(t *testing.T) {
	t.Parallel()
	const period = 4 * time.Second
	d := newDB(t)
	at := d.dbNow(t).Truncate(period).Add(period)
	d.untilDB(t, at)
	p := lw(t, []string{child("sleep:5s")}, d.args("--job", "j", "--schedule", "@every 4s", "--once", "--", self())...)
	if code := p.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("--once exited %d, want 0", code)
	}
	got := d.outcomes(t, "j")
	if len(got) == 0 {
		t.Fatal("--once ran nothing")
	}
	for c, outcome := range got {
		if outcome != "run" {
			t.Errorf("--once recorded %s %s; want only its own run", c.Format("15:04:05"), outcome)
		}
	}
	if n := len(got); n != 1 {
		t.Errorf("%d claims, want 1 (the run): %v", n, got)
	}
}

// A crontab line that is not the schedule's "just due" (run by hand, or
// fired 13 hours after its time) runs nothing: cron runs no time it did
// not fire for. A new job owes nothing; a job that has run records the
// time nobody ran as missed. Before, --once ran the 13-hour-old time.
func TestOnceDoesNotRunATimeLongPast(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	slot := d.dbNow(t).UTC().Truncate(time.Minute).Add(-13 * time.Hour)
	spec := fmt.Sprintf("%d %d * * *", slot.Minute(), slot.Hour())
	line := func() {
		t.Helper()
		p := lw(t, []string{child("ready")}, d.args("--job", "j", "--schedule", spec, "--timezone", "UTC", "--once", "--", self())...)
		for l := range p.Lines {
			t.Errorf("the command ran 13 hours after its time: %q", l)
		}
		if code := p.Wait(t, 30*time.Second); code != 0 {
			t.Fatalf("exit %d, want 0 (nothing to run)", code)
		}
		if !strings.Contains(p.Logs.String(), "nothing to run: no scheduled time is just due") {
			t.Errorf("no line saying no time is just due: %s", p.Logs)
		}
	}
	line()
	if got := d.outcomes(t, "j"); len(got) != 0 {
		t.Errorf("a new job's line recorded %v, want nothing (it owes nothing from before it started)", got)
	}
	// The job ran the day before.
	d.exec(t, `INSERT INTO "`+d.table+`_schedule" (job_name, scheduled_at, outcome, holder, fencing_token) VALUES ('j', $1, 'run', 'yesterday', 1)`,
		slot.Add(-24*time.Hour))
	line()
	if got := d.outcomes(t, "j"); got[slot] != "missed" {
		t.Errorf("the time 13 hours ago: %q, want missed; all: %v", got[slot], got)
	}
}

// With --once, cron fires the line in the host's zone: a cron spec read in
// UTC by default on a host in Europe/Berlin would run the previous day's
// time every day. leasewrap refuses it with one line naming the zone to
// add; a named zone (even UTC), a CRON_TZ= prefix, @every, or a host in
// UTC are fine. --catch-up all is refused with --once.
func TestOnceRefusesAZoneCronDoesNotReadItIn(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for i, tc := range []struct {
		tz   string
		args []string
		code int
		want string
	}{
		{"Europe/Berlin", []string{"--schedule", "0 2 * * *"}, cmdutil.ExitUsage, "add --timezone Europe/Berlin"},
		{":Europe/Berlin", []string{"--schedule", "@daily"}, cmdutil.ExitUsage, "add --timezone Europe/Berlin"},
		{"Europe/Berlin", []string{"--schedule", "0 2 * * *", "--timezone", "Europe/Berlin"}, 0, ""},
		{"Europe/Berlin", []string{"--schedule", "CRON_TZ=Europe/Berlin 0 2 * * *"}, 0, ""},
		{"Europe/Berlin", []string{"--schedule", "0 2 * * *", "--timezone", "UTC"}, 0, ""},
		{"Europe/Berlin", []string{"--schedule", "@every 1h"}, 0, ""},
		{"UTC", []string{"--schedule", "0 2 * * *"}, 0, ""},
		{"UTC", []string{"--schedule", "0 2 * * *", "--catch-up", "all"}, cmdutil.ExitUsage, "--catch-up all cannot be combined with --once"},
	} {
		job := fmt.Sprintf("j%d", i)
		p := lw(t, []string{"TZ=" + tc.tz}, d.args(append(append([]string{"--job", job}, tc.args...), "--once", "--", "true")...)...)
		code := p.Wait(t, 30*time.Second)
		logs := strings.TrimSpace(p.Logs.String())
		if code != tc.code || tc.want != "" && (!strings.Contains(logs, tc.want) || strings.Contains(logs, "\n")) {
			t.Errorf("TZ=%s %q: exit %d %s; want %d with one line containing %q", tc.tz, tc.args, code, logs, tc.code, tc.want)
		}
	}
}
