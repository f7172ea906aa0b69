package command

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/command/history"
	"github.com/redbite/leasewrap/command/status"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/schema"
)

// everyViewSays asserts that every view judges job as health, with
// reason in its words: check (its exit status and line), status (table
// and JSON), history's health line, the exporter's leasewrap_job_state
// and the web page's index and job page.
func everyViewSays(t *testing.T, d db, addr, job, health, reason string, checkCode int) {
	t.Helper()
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	if code, out := output(t, append([]string{"check", "--job", job}, store...)...); code != checkCode || !strings.Contains(out, reason) {
		t.Errorf("check exited %d: %q; want %d and %q", code, out, checkCode, reason)
	}
	var jobs []status.JobJSON
	if _, out := output(t, append([]string{"status", "--json", "--job", job}, store...)...); json.Unmarshal([]byte(out), &jobs) != nil ||
		len(jobs) != 1 || jobs[0].Health != health || !strings.Contains(jobs[0].HealthReason, reason) {
		t.Errorf("status --json: %s; want health %s, %q", out, health, reason)
	}
	if _, out := output(t, append([]string{"status"}, store...)...); !strings.Contains(out, job+"  "+health+" ") {
		t.Errorf("status: %s; want %s %s", out, job, health)
	}
	if _, out := output(t, append([]string{"history", "--job", job}, store...)...); !strings.Contains(out, "health: "+health+": ") ||
		!strings.Contains(out, reason) {
		t.Errorf("history: %s; want health: %s: %q", out, health, reason)
	}
	series := scrape(t, addr)
	for _, state := range []string{"healthy", "paused", "failing", "overdue", "missed"} {
		want := map[bool]string{true: "1", false: "0"}[state == health]
		if got := series[`leasewrap_job_state{lease="`+job+`",state="`+state+`"}`]; got != want {
			t.Errorf("leasewrap_job_state{state=%q} = %q, want %s", state, got, want)
		}
	}
	_, index := get(t, addr, "/")
	if i := strings.Index(index, `data-job="`+job+`"`); i < 0 || !strings.Contains(index[i:i+strings.Index(index[i:], "</tr>")], `data-health="`+health+`"`) {
		t.Errorf("/: the row of %s does not say %s", job, health)
	}
	if _, page := get(t, addr, "/jobs/"+job); !strings.Contains(page, `data-health="`+health+`"`) {
		t.Errorf("/jobs/%s does not say %s", job, health)
	}
}

// A scheduled time that came due while the job was paused is no failure:
// every view says the job is paused (WARNING) while the pause is in
// force, and healthy once resumed, saying who paused that time, until
// its next time. The paused time has no holder in history (table, JSON,
// timeline) or on the web page: they say who paused it.
func TestAPausedTimeIsNoFailure(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	// A job scheduled once a year, whose latest time (1 January) came due
	// while it was paused: its row as its scheduler registered it, and
	// the claim and history row a take that found it paused writes.
	sched := lw(t, nil, d.args("--job", "tick", "--schedule", farSchedule, "--", "true")...)
	sched.WaitLog(t, "scheduler started")
	_ = sched.Cmd.Process.Signal(syscall.SIGTERM)
	sched.Wait(t, 15*time.Second)
	if code, out := output(t, append([]string{"pause", "--job", "tick", "--id", "root@vm"}, store...)...); code != 0 {
		t.Fatalf("pause exited %d: %s", code, out)
	}
	due := time.Date(time.Now().UTC().Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	historyTable, claims := pgx.Identifier{d.table + "_history"}.Sanitize(), schema.ClaimsTable(pgx.Identifier{d.table}).Sanitize()
	d.exec(t, `UPDATE TABLE SET scheduled_since = $1::timestamptz - interval '30 days', accounted_through = $1 WHERE job_name = 'tick'`, due)
	d.exec(t, `INSERT INTO `+claims+` (job_name, scheduled_at, outcome, holder, fencing_token, claimed_at) VALUES ('tick', $1, 'paused', 'root@vm', 0, $1)`, due)
	d.exec(t, `INSERT INTO `+historyTable+` (job_name, holder, fencing_token, started_at, finished_at, outcome, scheduled_at)
VALUES ('tick', 'root@vm', 0, $1, $1, 'paused', $1)`, due)
	_, addr := d.exporter(t, pgtest.URL())

	everyViewSays(t, d, addr, "tick", "paused", "tick is paused by root@vm since", 1)
	if code, out := output(t, append([]string{"resume", "--job", "tick"}, store...)...); code != 0 {
		t.Fatalf("resume exited %d: %s", code, out)
	}
	when := due.Format("2006-01-02 15:04:05Z")
	everyViewSays(t, d, addr, "tick", "healthy", "tick: the time due at "+when+" was paused by root@vm; nothing was owed", 0)

	_, out := output(t, append([]string{"history", "--job", "tick"}, store...)...)
	lines := strings.Split(out, "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], " OUTCOME  BY ") || !strings.HasPrefix(lines[1], "tick ") ||
		!strings.Contains(lines[1], " due "+when+" ") || !strings.Contains(lines[1], " paused   root@vm ") || strings.Index(lines[1], "root@vm") < strings.Index(lines[1], "paused") {
		t.Errorf("history: %s; want the paused time with no holder, by root@vm", out)
	}
	var runs []history.RunJSON
	if _, out := output(t, append([]string{"history", "--job", "tick", "--json"}, store...)...); json.Unmarshal([]byte(out), &runs) != nil ||
		len(runs) != 1 || runs[0].Holder != "" || runs[0].By == nil || *runs[0].By != "root@vm" || runs[0].Outcome != "paused" {
		t.Errorf("history --json: %s; want the paused time, holder \"\", by root@vm", out)
	}
	_, out = output(t, append([]string{"history", "--job", "tick", "--timeline", "--since", "8760h"}, store...)...)
	if lanes, _, _ := strings.Cut(out, "\nhealth: "); strings.Contains(lanes, "root@vm") || !strings.Contains(lanes, "not run") {
		t.Errorf("history --timeline: %s; want the paused time in the not run lane, and no lane of root@vm", out)
	}
	_, page := get(t, addr, "/jobs/tick?since=8760h")
	row := page[strings.Index(page, `<tr class="not-run" data-outcome="paused">`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `; by <span class="by">root@vm</span>`) || strings.Contains(row, `<td class="holder">`) {
		t.Errorf("/jobs/tick: the paused time's row %s; want by root@vm, no holder", row)
	}
}

// A job owes nothing from before its schedule was set: a job just
// scheduled once a year, whose latest time came before it existed, is
// healthy in every view, and so is one rescheduled to a schedule whose
// latest time came before the reschedule. Once its schedulers are all
// stopped and a time of its schedule comes due, it is overdue
// (TestOverdueJobIsOverdueInEveryView).
func TestANewScheduleOwesNothingFromBeforeIt(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	sched := lw(t, nil, d.args("--job", "daily1", "--schedule", farSchedule, "--", "true")...)
	sched.WaitLog(t, "scheduler started")
	_, addr := d.exporter(t, pgtest.URL())
	everyViewSays(t, d, addr, "daily1", "healthy", "daily1 has no scheduled time due since it was scheduled at ", 0)
	_ = sched.Cmd.Process.Signal(syscall.SIGTERM)
	sched.Wait(t, 15*time.Second)
	// Stopped, with no time of its schedule due since: nothing is owed.
	everyViewSays(t, d, addr, "daily1", "healthy", "daily1 has no scheduled time due since it was scheduled at ", 0)

	// Rescheduled to the first of each month: the 1st of this month came
	// before the reschedule. The old schedule's record of being set is
	// moved back a year, as a job scheduled long ago.
	d.exec(t, `UPDATE TABLE SET scheduled_since = scheduled_since - interval '1 year' WHERE job_name = 'daily1'`)
	if code, out := output(t, append([]string{"reschedule", "--job", "daily1", "--schedule", "0 0 1 * *"}, store...)...); code != 0 {
		t.Fatalf("reschedule exited %d: %s", code, out)
	}
	everyViewSays(t, d, addr, "daily1", "healthy", "daily1 has no scheduled time due since it was scheduled at ", 0)
}
