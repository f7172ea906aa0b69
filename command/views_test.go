package command

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/command/check"
	"github.com/redbite/leasewrap/command/history"
	"github.com/redbite/leasewrap/command/status"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schema"
)

// output runs leasewrap and returns its exit status and stdout.
func output(t *testing.T, args ...string) (int, string) {
	t.Helper()
	p := lw(t, nil, args...)
	var out strings.Builder
	for line := range p.Lines {
		out.WriteString(line + "\n")
	}
	return p.Wait(t, 15*time.Second), out.String()
}

// A job whose schedulers all stopped, with its due time neither run nor
// recorded missed, is overdue in every view: check, status (table and
// JSON), history, the exporter's leasewrap_job_state and the web page's
// index and job page, none of which calls it healthy.
func TestOverdueJobIsOverdueInEveryView(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	sched := lw(t, nil, d.args("--job", "misser", "--schedule", "@every 2s", "--", "true")...)
	sched.WaitLog(t, "released")
	_, addr := d.exporter(t, pgtest.URL())
	_ = sched.Cmd.Process.Signal(syscall.SIGTERM)
	sched.Wait(t, 15*time.Second)

	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out := output(t, append([]string{"check", "--job", "misser"}, store...)...)
		if code == 2 && strings.Contains(out, "was not run, and no instance recorded it missed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("check kept answering %d %q, want CRITICAL: not run", code, out)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Each view in turn: the next due time, nobody's either, keeps the
	// job overdue, but a view read just as one comes due may still judge
	// the one before; each is polled with a deadline.
	eventually := func(what string, ok func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			good, got := ok()
			if good {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: %s", what, got)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	eventually("check --json, want state overdue", func() (bool, string) {
		_, out := output(t, append([]string{"check", "--job", "misser", "--json"}, store...)...)
		var res check.Result
		return json.Unmarshal([]byte(out), &res) == nil && res.State == "overdue", out
	})
	eventually("status --json, want health overdue and why", func() (bool, string) {
		_, out := output(t, append([]string{"status", "--json"}, store...)...)
		var jobs []status.JobJSON
		return json.Unmarshal([]byte(out), &jobs) == nil && len(jobs) == 1 && jobs[0].Health == "overdue" &&
			strings.Contains(jobs[0].HealthReason, "was not run"), out
	})
	eventually("status, want the job overdue", func() (bool, string) {
		_, out := output(t, append([]string{"status"}, store...)...)
		return strings.Contains(out, " overdue "), out
	})
	for _, args := range [][]string{{"history", "--job", "misser"}, {"history"}, {"history", "--job", "misser", "--timeline"}} {
		eventually(fmt.Sprint(args, ", want the job's health overdue"), func() (bool, string) {
			_, out := output(t, append(args, store...)...)
			return strings.Contains(out, "health: overdue: misser: the time due at"), out
		})
	}
	eventually("leasewrap_job_state, want overdue 1 and healthy 0", func() (bool, string) {
		series := scrape(t, addr)
		o, h := series[`leasewrap_job_state{lease="misser",state="overdue"}`], series[`leasewrap_job_state{lease="misser",state="healthy"}`]
		return o == "1" && h == "0", "overdue " + o + ", healthy " + h
	})
	eventually("/, want misser among the jobs to act on, overdue", func() (bool, string) {
		code, page := get(t, addr, "/")
		return code == 200 && strings.Contains(page, `<tr class="job failing" data-job="misser">`) && strings.Contains(page, `data-health="overdue"`), page
	})
	eventually("/jobs/misser, want the job overdue", func() (bool, string) {
		code, page := get(t, addr, "/jobs/misser")
		return code == 200 && strings.Contains(page, `data-health="overdue"`) && strings.Contains(page, "was not run, and no instance recorded it missed"), page
	})
}

// Every run says how it came to be, the same in history, history --json,
// the web page and the exporter: on schedule, late (catch-up), by hand
// (trigger) or without a schedule (plain). Only the claims table records
// which; the views read it.
func TestRunsSayHowTheyCameToBe(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	lw(t, nil, d.args("--job", "plain", "--", "true")...).Wait(t, 15*time.Second)
	sched := lw(t, nil, d.args("--job", "j", "--schedule", farSchedule, "--", "true")...)
	sched.WaitLog(t, "scheduler started")
	// Two earlier scheduled times of j: one run on time, one a day late.
	historyTable, claims := pgx.Identifier{d.table + "_history"}.Sanitize(), schema.ClaimsTable(pgx.Identifier{d.table}).Sanitize()
	now := time.Now().Truncate(time.Second)
	for _, row := range []struct {
		token    int64
		at, late time.Duration
	}{{11, 3 * 24 * time.Hour, time.Second}, {12, 2 * 24 * time.Hour, 24 * time.Hour}} {
		at := now.Add(-row.at)
		d.exec(t, `INSERT INTO `+historyTable+` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome, scheduled_at)
VALUES ('j', 'h', $1, $2, $3, 0, 'exited', $4)`, row.token, at.Add(row.late), at.Add(row.late+time.Second), at)
		d.exec(t, `INSERT INTO `+claims+` (job_name, scheduled_at, outcome, holder, fencing_token, claimed_at)
VALUES ('j', $2, 'run', 'h', $1, $3)`, row.token, at, at.Add(row.late))
	}
	if code, out := d.trigger(t, "--job", "j"); code != 0 {
		t.Fatalf("trigger exited %d: %s", code, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	var runs []history.RunJSON
	for len(runs) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("history of j: %+v, want the manual run too", runs)
		}
		time.Sleep(100 * time.Millisecond)
		_, out := output(t, append([]string{"history", "--job", "j", "--json"}, store...)...)
		if err := json.Unmarshal([]byte(out), &runs); err != nil {
			t.Fatalf("history --json: %v in %q", err, out)
		}
	}
	want := map[int64]string{11: "schedule", 12: "catch-up"}
	for _, r := range runs {
		w, ok := want[r.FencingToken]
		if !ok {
			w = "manual"
		}
		if r.Origin == nil || *r.Origin != w {
			t.Errorf("history --json: run %d has origin %v, want %s", r.FencingToken, r.Origin, w)
		}
	}
	_, out := output(t, append([]string{"history", "--json", "--job", "plain"}, store...)...)
	if !strings.Contains(out, `"origin": "plain"`) {
		t.Errorf("history --json of a job without a schedule: %s, want origin plain", out)
	}
	_, out = output(t, append([]string{"history"}, store...)...)
	for _, w := range []string{" ORIGIN", " manual\n", " catch-up\n", " schedule\n", " plain\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("history: %q lacks %q", out, w)
		}
	}

	_, addr := d.exporter(t, pgtest.URL())
	series := scrape(t, addr)
	for _, s := range []string{`leasewrap_job_last_run_origin{lease="j",origin="manual"}`, `leasewrap_job_last_run_origin{lease="plain",origin="plain"}`} {
		if series[s] != "1" {
			t.Errorf("%s = %q, want 1", s, series[s])
		}
	}
	_, page := get(t, addr, "/jobs/j?since=7d")
	for _, o := range []string{"schedule", "catch-up", "manual"} {
		if !strings.Contains(page, `data-origin="`+o+`"`) {
			t.Errorf("/jobs/j has no run of origin %s", o)
		}
	}
	if _, page = get(t, addr, "/"); !strings.Contains(page, `data-origin="plain"`) || !strings.Contains(page, `data-origin="manual"`) {
		t.Errorf("/ does not say how the newest runs came to be")
	}
}

// Four jobs in four situations, each read in every view at one moment:
// status --json, history --json, check --json, /metrics, the web page's
// index and the job's page say the same lease state, health, newest
// outcome and exit status, in the same words. A --max-runtime timeout is
// 124 everywhere (the status leasewrap exits with), not the 143 of the
// SIGTERM that stopped it.
func TestEveryViewSaysTheSame(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	type want struct {
		state, health, outcome, kind string
		exit                         *int
		held                         bool
	}
	three, timedOut, zero := 3, 124, 0
	jobs := map[string]want{
		"v-failed":  {state: "released", health: "failing", outcome: "exited", kind: "failed", exit: &three},
		"v-timeout": {state: "released", health: "failing", outcome: "timed_out", kind: "timed_out", exit: &timedOut},
		"v-kept":    {state: "kept", health: "healthy", outcome: "exited", kind: "succeeded", exit: &zero, held: true},
		"v-held":    {state: "held", health: "healthy", held: true},
	}
	lw(t, nil, d.args("--job", "v-failed", "--", "sh", "-c", "exit 3")...).Wait(t, 15*time.Second)
	lw(t, nil, d.args("--job", "v-timeout", "--max-runtime", "200ms", "--", "sleep", "30")...).Wait(t, 15*time.Second)
	lw(t, nil, d.args("--job", "v-kept", "--hold-for", "10m", "--", "true")...).Wait(t, 15*time.Second)
	lw(t, nil, d.args("--job", "v-held", "--", "sleep", "60")...).WaitLog(t, "child started")
	_, addr := d.exporter(t, pgtest.URL())

	var statuses []status.JobJSON
	if _, out := output(t, append([]string{"status", "--json"}, store...)...); json.Unmarshal([]byte(out), &statuses) != nil {
		t.Fatalf("status --json: %q", out)
	}
	series := scrape(t, addr)
	_, index := get(t, addr, "/")
	for _, st := range statuses {
		job, w := st.Job, jobs[st.Job]
		t.Run(job, func(t *testing.T) {
			if st.State != w.state || st.Health != w.health || !sameExit(st.LastExitCode, w.exit) {
				t.Errorf("status --json: state %s, health %s, exit %v; want %s, %s, %v", st.State, st.Health, show(st.LastExitCode), w.state, w.health, show(w.exit))
			}
			var runs []history.RunJSON
			_, out := output(t, append([]string{"history", "--json", "--job", job}, store...)...)
			if err := json.Unmarshal([]byte(out), &runs); err != nil {
				t.Fatalf("history --json: %v in %q", err, out)
			}
			if w.outcome == "" && len(runs) != 0 || w.outcome != "" && (len(runs) != 1 || runs[0].Outcome != w.outcome || !sameExit(runs[0].ExitCode, w.exit)) {
				t.Errorf("history --json: %+v; want one run, %s, exit %v", runs, w.outcome, show(w.exit))
			}
			var res check.Result
			_, out = output(t, append([]string{"check", "--job", job, "--json", "--max-age", "1h"}, store...)...)
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("check --json: %v in %q", err, out)
			}
			if res.State != w.health || !sameExit(res.LastExitCode, w.exit) || w.outcome != "" && (res.LastRunOutcome == nil || *res.LastRunOutcome != w.outcome) {
				t.Errorf("check --json: state %s, exit %v, outcome %v; want %s, %v, %s", res.State, show(res.LastExitCode), show(res.LastRunOutcome), w.health, show(w.exit), w.outcome)
			}
			metricExit := "-1"
			if w.exit != nil {
				metricExit = fmt.Sprint(*w.exit)
			}
			label := `{lease="` + job + `"}`
			if series["leasewrap_job_last_exit_code"+label] != metricExit || series[`leasewrap_job_state{lease="`+job+`",state="`+w.health+`"}`] != "1" ||
				series["leasewrap_job_lease_held"+label] != fmt.Sprint(map[bool]int{true: 1}[w.held]) {
				t.Errorf("/metrics: exit %s, %s 1?, held %s; want %s, 1, %v", series["leasewrap_job_last_exit_code"+label],
					w.health, series["leasewrap_job_lease_held"+label], metricExit, w.held)
			}
			if w.outcome != "" && series[`leasewrap_job_runs{lease="`+job+`",outcome="`+w.outcome+`"}`] != "1" {
				t.Errorf("/metrics: leasewrap_job_runs of %s = %q, want 1", w.outcome, series[`leasewrap_job_runs{lease="`+job+`",outcome="`+w.outcome+`"}`])
			}
			row := index[strings.Index(index, `data-job="`+job+`"`):]
			row = row[:strings.Index(row, "</tr>")]
			for _, s := range []string{`data-state="` + w.state + `"`, `data-health="` + w.health + `"`} {
				if !strings.Contains(row, s) {
					t.Errorf("/: the row of %s lacks %s: %s", job, s, row)
				}
			}
			if w.outcome != "" && (!strings.Contains(row, `class="outcome k-`+w.kind+`"`) || !strings.Contains(row, "<td>"+metricExit+"</td>")) {
				t.Errorf("/: the row of %s does not say %s, exit %s: %s", job, w.kind, metricExit, row)
			}
			_, page := get(t, addr, "/jobs/"+job)
			if !strings.Contains(page, `data-state="`+w.state+`"`) || !strings.Contains(page, `data-health="`+w.health+`"`) {
				t.Errorf("/jobs/%s does not say %s and %s", job, w.state, w.health)
			}
		})
	}
	if len(statuses) != len(jobs) {
		t.Errorf("status --json shows %d jobs, want %d", len(statuses), len(jobs))
	}
}

// sameExit reports whether two exit statuses, nil for none, are the same.
func sameExit(a, b *int) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// show is what p points to, or nil.
func show[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// status shows a job's queue in the order a release hands the lease on
// (pinned, then by priority, then first come), each standby marked by
// what sets it apart, and leaves a standby that stopped looking out; its
// JSON says the same with every field.
func TestStatusShowsTheQueueInOrder(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	s, err := lease.New(d.pool, lease.WithTable(d.table), lease.WithHolder("a"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.TryAcquire(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background(), nil)
	// A listening standby's entry lives as long as its backend: this
	// connection's, held until the test ends.
	conn, err := d.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	since := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	pgtest.MixedQueue(t, conn, d.table, "job", "c", since)

	code, out := output(t, append([]string{"status"}, store...)...)
	if want := "\njob queue: b (pinned, polling), c (priority 1), d (polling), e (polling)\n"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("status exited %d: %q, want the line %q", code, out, want)
	}
	var jobs []status.JobJSON
	if _, out := output(t, append([]string{"status", "--json"}, store...)...); json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) != 1 {
		t.Fatalf("status --json: %q", out)
	}
	want := []status.StandbyJSON{
		{Holder: "b", Pinned: true, Since: since.Add(5 * time.Second)},
		{Holder: "c", Priority: 1, Listening: true, Since: since.Add(4 * time.Second)},
		{Holder: "d", Since: since.Add(time.Second)},
		{Holder: "e", Since: since.Add(2 * time.Second)},
	}
	if !slices.EqualFunc(jobs[0].Queue, want, func(a, b status.StandbyJSON) bool {
		return a.Holder == b.Holder && a.Priority == b.Priority && a.Pinned == b.Pinned && a.Listening == b.Listening && a.Since.Equal(b.Since)
	}) {
		t.Errorf("status --json: queue %+v, want %+v", jobs[0].Queue, want)
	}
}
