package command

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/command/check"
	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/command/history"
	"github.com/redbite/leasewrap/command/status"
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/schema"
)

// The judgement table is the table of docs/monitoring.md under this
// heading: a row per situation, a column per kind of job.
const (
	judgementDoc     = "../docs/monitoring.md"
	judgementHeading = "### Every situation, every kind of job"
)

// The kinds of job, as the table's columns name them.
const (
	kindService   = "service"
	kindCron      = "cron job"
	kindScheduled = "scheduled job"
)

// judgementCell is one cell of the judgement table: what every view says
// of a job of a kind in a situation.
type judgementCell struct {
	situation, kind string
	// state is the state every view shows, verdict check's answer (OK,
	// WARNING, CRITICAL or UNKNOWN).
	state, verdict string
}

// job is the name of the job the test puts in the cell's situation: the
// kind's and the situation's words, as in svc-exited-0.
func (c judgementCell) job() string {
	slug := strings.Trim(notSlug.ReplaceAllString(strings.ToLower(c.situation), "-"), "-")
	return map[string]string{kindService: "svc", kindCron: "cron", kindScheduled: "sched"}[c.kind] + "-" + slug
}

// notSlug is what a job's name leaves out of a situation's words.
var notSlug = regexp.MustCompile(`[^a-z0-9]+`)

// checkCodes are check's exit statuses, by the answer the table gives.
var checkCodes = map[string]int{"OK": cmdutil.CheckOK, "WARNING": cmdutil.CheckWarning, "CRITICAL": cmdutil.CheckCritical, "UNKNOWN": cmdutil.CheckUnknown}

// judgementCellRE is a cell that judges: the state, then check's answer.
// A cell of a situation that does not arise is a dash.
var judgementCellRE = regexp.MustCompile("^`([a-z]+)` (OK|WARNING|CRITICAL|UNKNOWN)$")

// readJudgementTable reads the judgement table's cells from the doc, in
// the doc's order, failing the test on a table it cannot read.
func readJudgementTable(t *testing.T) []judgementCell {
	t.Helper()
	doc, err := os.ReadFile(judgementDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+judgementHeading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", judgementDoc, judgementHeading)
	}
	var kinds []string
	var cells []judgementCell
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			if kinds != nil {
				break // the table's end
			}
			continue
		}
		row := strings.Split(strings.Trim(line, "|"), "|")
		for i := range row {
			row[i] = strings.TrimSpace(row[i])
		}
		switch {
		case kinds == nil:
			if len(row) != 5 || row[0] != "situation" || row[4] != "why" {
				t.Fatalf("%s: the judgement table's header is %q, want situation, three kinds of job, why", judgementDoc, line)
			}
			kinds = row[1:4]
		case strings.Trim(row[0], "-") == "":
			// the header's rule
		default:
			if len(row) != 5 || row[4] == "" {
				t.Fatalf("%s: the judgement table's row %q does not have five cells and a why", judgementDoc, line)
			}
			for i, kind := range kinds {
				if row[i+1] == "—" {
					continue
				}
				m := judgementCellRE.FindStringSubmatch(row[i+1])
				if m == nil {
					t.Fatalf("%s: the judgement table's cell %q (%s, %s) is neither a dash nor a state and check's answer, as in `healthy` OK",
						judgementDoc, row[i+1], row[0], kind)
				}
				if !slices.Contains(inspect.States, m[1]) {
					t.Fatalf("%s: the judgement table's cell %q (%s, %s) names no state", judgementDoc, row[i+1], row[0], kind)
				}
				cells = append(cells, judgementCell{situation: row[0], kind: kind, state: m[1], verdict: m[2]})
			}
		}
	}
	if !slices.Equal(kinds, []string{kindService, kindCron, kindScheduled}) {
		t.Fatalf("%s: the judgement table's columns are %q, want %q", judgementDoc, kinds, []string{kindService, kindCron, kindScheduled})
	}
	return cells
}

// tableEnv is the one lease table every job of the judgement table is in.
type tableEnv struct {
	t     *testing.T
	d     db
	store []string
	// due is the latest due time of farSchedule, which the scheduled
	// jobs' rows account for.
	due time.Time
	// bad is a command that exists but cannot be executed.
	bad string
	// addr is the exporter's address.
	addr string
}

// run runs leasewrap once for job, waiting for it to exit.
func (e *tableEnv) run(job string, args ...string) {
	e.t.Helper()
	lw(e.t, nil, e.d.args(append([]string{"--job", job}, args...)...)...).Wait(e.t, 15*time.Second)
}

// hold starts leasewrap running a long command for job as holder id
// (with --wait, as a service's instance) and returns once the command
// runs. It renews at the default interval, seldom: it holds the lease
// until the test ends.
func (e *tableEnv) hold(job, id string, wait bool) *lwtest.Proc {
	e.t.Helper()
	return e.holdWith(append(slices.Clone(e.store), "--log-format", "json"), job, id, wait)
}

// holdBriefly is hold for a holder about to be stopped: it renews often,
// so that it hears a release at once.
func (e *tableEnv) holdBriefly(job, id string, wait bool) *lwtest.Proc {
	e.t.Helper()
	return e.holdWith(e.d.args(), job, id, wait)
}

func (e *tableEnv) holdWith(args []string, job, id string, wait bool) *lwtest.Proc {
	e.t.Helper()
	args = append(args, "--job", job, "--id", id)
	if wait {
		args = append(args, "--wait")
	}
	p := lw(e.t, nil, append(args, "--", "sleep", "600")...)
	p.WaitLog(e.t, "child started")
	return p
}

// handover runs job as a service on A, with B standing by, and has A
// stopped by stop (which signals A or releases its lease); it returns B,
// which runs the command then.
func (e *tableEnv) handover(job string, stop func(a *lwtest.Proc)) *lwtest.Proc {
	e.t.Helper()
	a := e.holdBriefly(job, "A", true)
	b := lw(e.t, nil, append(slices.Clone(e.store), "--log-format", "json", "--job", job, "--id", "B", "--wait", "--", "sleep", "600")...)
	b.WaitLog(e.t, "standing by: lease held by another instance")
	stop(a)
	b.WaitLog(e.t, "child started")
	a.Wait(e.t, 30*time.Second)
	return b
}

// sigterm sends SIGTERM to leasewrap, as a rolling restart does.
func sigterm(p *lwtest.Proc) { _ = p.Cmd.Process.Signal(syscall.SIGTERM) }

// agedRun runs job once, the command the shell script script, and moves
// that run back two days: over the views' 24 hours.
func (e *tableEnv) agedRun(job, script string) {
	e.t.Helper()
	e.run(job, "--", "sh", "-c", script)
	e.d.exec(e.t, `UPDATE `+e.history()+` SET started_at = started_at - interval '2 days', finished_at = finished_at - interval '2 days' WHERE job_name = $1`, job)
}

// history and claims are the lease table's history and claims tables.
func (e *tableEnv) history() string { return pgx.Identifier{e.d.table + "_history"}.Sanitize() }
func (e *tableEnv) claims() string {
	return schema.ClaimsTable(pgx.Identifier{e.d.table}).Sanitize()
}

// owed makes job's schedule older than its latest due time, so that the
// time is owed, and accounts for it as outcome in its claim by by ("":
// nobody accounted for it).
func (e *tableEnv) owed(job, outcome, by string) {
	e.t.Helper()
	e.d.exec(e.t, `UPDATE TABLE SET scheduled_since = $2::timestamptz - interval '30 days' WHERE job_name = $1`, job, e.due)
	if outcome != "" {
		e.d.exec(e.t, `INSERT INTO `+e.claims()+` (job_name, scheduled_at, outcome, holder, fencing_token, claimed_at) VALUES ($1, $2, $3, $4, 7, $2)`,
			job, e.due, outcome, by)
	}
}

// ranDue records the run of job's latest due time, as its holder A
// finishes it: with outcome and exit status (nil: none recorded).
func (e *tableEnv) ranDue(job, outcome string, exit *int) {
	e.t.Helper()
	e.owed(job, "run", "A")
	e.d.exec(e.t, `INSERT INTO `+e.history()+` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome, scheduled_at)
VALUES ($1, 'A', 7, $2::timestamptz + interval '1 second', $2::timestamptz + interval '2 seconds', $3, $4, $2)`, job, e.due, exit, outcome)
}

// stoppedDue records the run of job's latest due time as stopped, at
// the ask of by.
func (e *tableEnv) stoppedDue(job, by string) {
	e.t.Helper()
	e.ranDue(job, "stopped", exitOf(143))
	e.d.exec(e.t, `UPDATE `+e.history()+` SET stopped_by = $2 WHERE job_name = $1`, job, by)
}

// notRunDue records job's latest due time as nobody's run: outcome
// (missed, skipped, paused) by by, in its claim and its history row.
func (e *tableEnv) notRunDue(job, outcome, by string) {
	e.t.Helper()
	e.owed(job, outcome, by)
	e.d.exec(e.t, `INSERT INTO `+e.history()+` (job_name, holder, fencing_token, started_at, finished_at, outcome, scheduled_at)
VALUES ($1, $3, 0, $2, $2, $4, $2)`, job, e.due, by, outcome)
}

// pause pauses job as root@vm.
func (e *tableEnv) pause(job string) {
	e.t.Helper()
	if code, out := output(e.t, append([]string{"pause", "--job", job, "--id", "root@vm"}, e.store...)...); code != 0 {
		e.t.Fatalf("pause exited %d: %s", code, out)
	}
}

// judgementSetup puts a job in a cell's situation.
type judgementSetup struct {
	// do puts job in the situation; nil: there is no such job. A job with
	// a schedule is registered first by its scheduler (farSchedule),
	// which then stopped.
	do func(e *tableEnv, job string)
	// newest is the outcome of the job's newest run the situation has in
	// history --json ("": not checked), and by who asked for its stop,
	// for a stopped run ({operator}: the operator's name, as release
	// records it).
	newest, by string
	// refresh keeps the situation true at the moment the views read it
	// (a lease freed just now).
	refresh func(e *tableEnv, job string)
	// noClaims: the situation is the claims table's loss, which the test
	// brings about once every other cell has been read.
	noClaims bool
}

// exitOf is an exit status, recorded.
func exitOf(n int) *int { return &n }

// judgementSetups has a setup for each cell of the judgement table, by
// situation (as the table's first column says it) and kind of job.
var judgementSetups = map[string]map[string]judgementSetup{
	"exited 0": {
		kindService: {do: func(e *tableEnv, job string) {
			e.run(job, "--id", "A", "--", "true")
			e.hold(job, "B", true)
		}, newest: "exited"},
		kindCron:      {do: func(e *tableEnv, job string) { e.run(job, "--", "true") }, newest: "exited"},
		kindScheduled: {do: func(e *tableEnv, job string) { e.ranDue(job, "exited", exitOf(0)) }},
	},
	"exited non-zero": {
		kindService: {do: func(e *tableEnv, job string) {
			e.run(job, "--id", "A", "--", "sh", "-c", "exit 3")
			e.hold(job, "B", true)
		}, newest: "exited"},
		kindCron:      {do: func(e *tableEnv, job string) { e.run(job, "--", "sh", "-c", "exit 3") }, newest: "exited"},
		kindScheduled: {do: func(e *tableEnv, job string) { e.ranDue(job, "exited", exitOf(3)) }},
	},
	"`signalled`": {
		// SIGKILL of the command alone, as the OOM killer sends it.
		kindService: {do: func(e *tableEnv, job string) {
			e.run(job, "--id", "A", "--", "sh", "-c", "kill -KILL $$")
			e.hold(job, "B", true)
		}, newest: "signalled"},
		kindCron:      {do: func(e *tableEnv, job string) { e.run(job, "--", "sh", "-c", "kill -KILL $$") }, newest: "signalled"},
		kindScheduled: {do: func(e *tableEnv, job string) { e.ranDue(job, "signalled", exitOf(137)) }},
	},
	"`timed_out`": {
		kindService: {do: func(e *tableEnv, job string) {
			e.run(job, "--id", "A", "--max-runtime", "200ms", "--", "sleep", "30")
			e.hold(job, "B", true)
		}, newest: "timed_out"},
		kindCron:      {do: func(e *tableEnv, job string) { e.run(job, "--max-runtime", "200ms", "--", "sleep", "30") }, newest: "timed_out"},
		kindScheduled: {do: func(e *tableEnv, job string) { e.ranDue(job, "timed_out", exitOf(124)) }},
	},
	"`lost`": {
		// A's leasewrap killed, its lease left to expire: B's take closes
		// A's run as lost.
		kindService: {do: func(e *tableEnv, job string) {
			a := lw(e.t, nil, e.d.expiringArgs("--job", job, "--id", "A", "--", "sleep", "600")...)
			a.WaitLog(e.t, "child started")
			_ = a.Cmd.Process.Kill()
			a.Wait(e.t, 15*time.Second)
			e.hold(job, "B", true)
		}, newest: "lost"},
		// A cron job's run is closed as lost by the next take, whose run
		// is newer: its history row is written as that take writes it.
		kindCron: {do: func(e *tableEnv, job string) {
			e.run(job, "--", "true")
			e.d.exec(e.t, `UPDATE `+e.history()+` SET outcome = 'lost', exit_code = NULL WHERE job_name = $1`, job)
		}, newest: "lost"},
		kindScheduled: {do: func(e *tableEnv, job string) { e.ranDue(job, "lost", nil) }},
	},
	"`could_not_start`": {
		kindService: {do: func(e *tableEnv, job string) {
			e.run(job, "--id", "A", "--", e.bad)
			e.hold(job, "B", true)
		}, newest: "could_not_start"},
		kindCron:      {do: func(e *tableEnv, job string) { e.run(job, "--", e.bad) }, newest: "could_not_start"},
		kindScheduled: {do: func(e *tableEnv, job string) { e.ranDue(job, "could_not_start", exitOf(127)) }},
	},
	"`stopped` by a signal to leasewrap": {
		kindService: {do: func(e *tableEnv, job string) {
			e.run(job, "--id", "A0", "--", "true")
			e.handover(job, sigterm)
		}, newest: "stopped", by: "SIGTERM to leasewrap"},
		kindCron: {do: func(e *tableEnv, job string) {
			e.run(job, "--", "true")
			p := e.holdBriefly(job, "A", false)
			sigterm(p)
			p.Wait(e.t, 30*time.Second)
		}, newest: "stopped", by: "SIGTERM to leasewrap"},
		kindScheduled: {do: func(e *tableEnv, job string) { e.stoppedDue(job, "SIGTERM to leasewrap") }, by: "SIGTERM to leasewrap"},
	},
	"`stopped` by `release`, `release --to`": {
		kindService: {do: func(e *tableEnv, job string) {
			e.run(job, "--id", "A0", "--", "true")
			e.handover(job, func(*lwtest.Proc) {
				if code, out := output(e.t, append([]string{"release", "--job", job, "--to", "B"}, e.store...)...); code != 0 {
					e.t.Fatalf("release --to B exited %d: %s", code, out)
				}
			})
		}, newest: "stopped", by: "release --to B by {operator}"},
		kindCron: {do: func(e *tableEnv, job string) {
			e.run(job, "--", "true")
			p := e.holdBriefly(job, "A", false)
			if code, out := output(e.t, append([]string{"release", "--job", job, "--id", "A"}, e.store...)...); code != 0 {
				e.t.Fatalf("release --id A exited %d: %s", code, out)
			}
			p.Wait(e.t, 30*time.Second)
		}, newest: "stopped", by: "release by {operator}"},
		kindScheduled: {do: func(e *tableEnv, job string) { e.stoppedDue(job, "release by root@vm") }, by: "release by root@vm"},
	},
	"running, no run finished yet": {
		kindService: {do: func(e *tableEnv, job string) { e.hold(job, "B", true) }},
		kindCron:    {do: func(e *tableEnv, job string) { e.hold(job, "A", false) }},
		// The time's claim, and its holder's lease; no history row yet.
		kindScheduled: {do: func(e *tableEnv, job string) {
			e.owed(job, "run", "A")
			e.d.exec(e.t, `UPDATE TABLE SET holder = 'A', expires_at = now() + interval '1 hour' WHERE job_name = $1`, job)
		}},
	},
	"running, a run failed within 24 h": {
		// The failure, then a run stopped for a handover, which does not
		// count: B runs now.
		kindService: {do: func(e *tableEnv, job string) {
			e.run(job, "--id", "A0", "--", "sh", "-c", "exit 3")
			e.handover(job, sigterm)
		}, newest: "stopped", by: "SIGTERM to leasewrap"},
		kindCron: {do: func(e *tableEnv, job string) {
			e.run(job, "--", "sh", "-c", "exit 3")
			e.hold(job, "A", false)
		}, newest: "exited"},
	},
	"running, a run failed over 24 h ago": {
		kindService: {do: func(e *tableEnv, job string) { e.agedRun(job, "exit 3"); e.hold(job, "B", true) }, newest: "exited"},
		kindCron:    {do: func(e *tableEnv, job string) { e.agedRun(job, "exit 3"); e.hold(job, "A", false) }, newest: "exited"},
	},
	"running, last success over 24 h ago": {
		kindService: {do: func(e *tableEnv, job string) { e.agedRun(job, "exit 0"); e.hold(job, "B", true) }, newest: "exited"},
		kindCron:    {do: func(e *tableEnv, job string) { e.agedRun(job, "exit 0"); e.hold(job, "A", false) }, newest: "exited"},
	},
	"not running, no success within 24 h": {
		kindService: {do: func(e *tableEnv, job string) { e.agedRun(job, "exit 0") }, newest: "exited"},
		kindCron:    {do: func(e *tableEnv, job string) { e.agedRun(job, "exit 0") }, newest: "exited"},
	},
	"no holder, a live standby taking over": {
		// A stopped by a signal to leasewrap, its lease free, with B (a
		// standby that polls) first in the queue, about to take it.
		kindService: {do: func(e *tableEnv, job string) {
			p := e.holdBriefly(job, "A", true)
			sigterm(p)
			p.Wait(e.t, 30*time.Second)
		}, newest: "stopped", by: "SIGTERM to leasewrap", refresh: func(e *tableEnv, job string) {
			e.d.exec(e.t, `WITH t AS (SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now)
UPDATE TABLE SET expires_at = now() - interval '1 second', queue = jsonb_build_array(
  jsonb_build_object('holder', 'B', 'id', 'x1', 'priority', 0, 'since', t.now - 1000000, 'until', t.now + 600000000))
FROM t WHERE job_name = $1`, job)
		}},
	},
	"paused": {
		kindService:   {do: func(e *tableEnv, job string) { e.run(job, "--", "true"); e.pause(job) }},
		kindCron:      {do: func(e *tableEnv, job string) { e.run(job, "--", "true"); e.pause(job) }},
		kindScheduled: {do: func(e *tableEnv, job string) { e.ranDue(job, "exited", exitOf(0)); e.pause(job) }},
	},
	"due time paused, resumed since": {
		kindScheduled: {do: func(e *tableEnv, job string) { e.notRunDue(job, "paused", "root@vm") }},
	},
	"due time `skipped`": {
		kindScheduled: {do: func(e *tableEnv, job string) { e.notRunDue(job, "skipped", "A") }},
	},
	"due time `missed`": {
		kindScheduled: {do: func(e *tableEnv, job string) { e.notRunDue(job, "missed", "A") }},
	},
	"due time before the schedule was set": {
		// As its scheduler left it: scheduled just now.
		kindScheduled: {do: func(*tableEnv, string) {}},
	},
	"due time nobody ran or recorded": {
		kindScheduled: {do: func(e *tableEnv, job string) { e.owed(job, "", "") }},
	},
	"claims table gone or unreadable": {
		kindScheduled: {do: func(e *tableEnv, job string) { e.ranDue(job, "exited", exitOf(0)) }, noClaims: true},
	},
	"no such job": {kindService: {}, kindCron: {}, kindScheduled: {}},
}

// Every cell of the judgement table in docs/monitoring.md, walked
// through every view: a job of that kind is put in that situation (by
// running leasewrap, or by writing the rows a run that takes minutes
// would leave), then check (its exit status and state), status (table
// and --json), history's health line, the exporter's leasewrap_job_state
// and the web page's index row and job page must each say the cell's
// state. The table is read from the doc, so the doc and the test cannot
// drift; a row without a setup here, or a setup without a row, fails.
func TestEveryViewFollowsTheJudgementTable(t *testing.T) {
	t.Parallel()
	cells := readJudgementTable(t)
	for _, c := range cells {
		if _, ok := judgementSetups[c.situation][c.kind]; !ok {
			t.Errorf("%s: the judgement table's row %q has a %s but no setup here", judgementDoc, c.situation, c.kind)
		}
	}
	for situation, kinds := range judgementSetups {
		for kind := range kinds {
			if !slices.ContainsFunc(cells, func(c judgementCell) bool { return c.situation == situation && c.kind == kind }) {
				t.Errorf("%s: the judgement table has no %s in a row %q, which this test sets up", judgementDoc, kind, situation)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	d := newDB(t)
	e := &tableEnv{t: t, d: d, store: []string{"--database-url", pgtest.URL(), "--table", d.table},
		due: time.Date(time.Now().UTC().Year(), 1, 1, 0, 0, 0, 0, time.UTC), bad: filepath.Join(t.TempDir(), "bad")}
	// A script whose interpreter does not exist: found, but not executable.
	if err := os.WriteFile(e.bad, []byte("#!/nonexistent/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Every job with a schedule registered at once by its scheduler, which
	// then stops.
	var schedulers []*lwtest.Proc
	for _, c := range cells {
		if c.kind == kindScheduled && judgementSetups[c.situation][c.kind].do != nil {
			schedulers = append(schedulers, lw(t, nil, d.args("--job", c.job(), "--schedule", farSchedule, "--", "true")...))
		}
	}
	for _, p := range schedulers {
		p.WaitLog(t, "scheduler started")
		sigterm(p)
	}
	for _, p := range schedulers {
		p.Wait(t, 30*time.Second)
	}
	for _, c := range cells {
		if s := judgementSetups[c.situation][c.kind]; s.do != nil {
			s.do(e, c.job())
		}
	}
	_, e.addr = d.exporter(t, pgtest.URL())

	walk := func(t *testing.T, noClaims bool) {
		var cs []judgementCell
		for _, c := range cells {
			if s := judgementSetups[c.situation][c.kind]; s.noClaims == noClaims {
				if s.refresh != nil {
					s.refresh(e, c.job())
				}
				cs = append(cs, c)
			}
		}
		views := readViews(t, e)
		for _, c := range cs {
			t.Run(c.job(), func(t *testing.T) {
				t.Parallel()
				if s := judgementSetups[c.situation][c.kind]; s.refresh != nil {
					sub := *e
					sub.t = t
					s.refresh(&sub, c.job())
				}
				views.agree(t, e, c)
			})
		}
	}
	t.Run("views", func(t *testing.T) { walk(t, false) })
	// The claims table gone: every job with a schedule is judged unknown.
	if _, err := d.pool.Exec(t.Context(), `DROP TABLE `+e.claims()); err != nil {
		t.Fatal(err)
	}
	t.Run("no claims", func(t *testing.T) { walk(t, true) })
}

// judgementViews are the views read once for all jobs: status (table and
// --json), the exporter's metrics and the web page's index.
type judgementViews struct {
	statusJSON map[string]status.JobJSON
	// statusHealth is each job's HEALTH in status's table.
	statusHealth map[string]string
	series       map[string]string
	index        string
}

func readViews(t *testing.T, e *tableEnv) judgementViews {
	t.Helper()
	v := judgementViews{statusJSON: map[string]status.JobJSON{}, statusHealth: map[string]string{}, series: scrape(t, e.addr)}
	var jobs []status.JobJSON
	if _, out := output(t, append([]string{"status", "--json"}, e.store...)...); json.Unmarshal([]byte(out), &jobs) != nil {
		t.Fatalf("status --json: %q", out)
	}
	for _, j := range jobs {
		v.statusJSON[j.Job] = j
	}
	_, out := output(t, append([]string{"status"}, e.store...)...)
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && v.statusHealth[f[0]] == "" {
			v.statusHealth[f[0]] = f[1]
		}
	}
	_, v.index = get(t, e.addr, "/")
	v.index = strings.ReplaceAll(v.index, "\n", " ")
	return v
}

// agree asserts that every view says what cell c says of its job.
func (v judgementViews) agree(t *testing.T, e *tableEnv, c judgementCell) {
	job := c.job()
	args := []string{"check", "--job", job, "--json"}
	if c.kind != kindScheduled {
		args = append(args, "--max-age", "24h", "--fail-on-last-failure")
	}
	code, out := output(t, append(args, e.store...)...)
	var res check.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("check --json: %v in %q", err, out)
	}
	wantCode := checkCodes[c.verdict]
	if code != wantCode || res.Status != strings.ToLower(c.verdict) || res.State != c.state {
		t.Errorf("check exited %d: %s %s: %s; want %d, %s, %s", code, res.Status, res.State, res.Message, wantCode, strings.ToLower(c.verdict), c.state)
	}
	if s := judgementSetups[c.situation][c.kind]; s.newest != "" || s.by != "" {
		var runs []history.RunJSON
		by := strings.ReplaceAll(s.by, "{operator}", cmdutil.Operator())
		if _, out := output(t, append([]string{"history", "--json", "--job", job}, e.store...)...); json.Unmarshal([]byte(out), &runs) != nil ||
			len(runs) == 0 || s.newest != "" && runs[0].Outcome != s.newest || by != "" && (runs[0].By == nil || *runs[0].By != by) {
			t.Errorf("history --json: %s; want the newest run %s, by %q", out, cmp.Or(s.newest, "stopped"), by)
		}
	}
	if judgementSetups[c.situation][c.kind].do == nil {
		v.absent(t, e, job)
		return
	}
	if st, ok := v.statusJSON[job]; !ok || st.Health != c.state || st.HealthReason == "" {
		t.Errorf("status --json: %+v; want health %s, and why", st, c.state)
	}
	if got := v.statusHealth[job]; got != c.state {
		t.Errorf("status: HEALTH %q, want %s", got, c.state)
	}
	if _, out := output(t, append([]string{"history", "--job", job}, e.store...)...); !strings.Contains(out, "\nhealth: "+c.state+": ") {
		t.Errorf("history: %s; want health: %s", out, c.state)
	}
	for _, state := range inspect.States {
		if state == inspect.StateAbsent {
			continue // a job the exporter lists is not absent
		}
		want := map[bool]string{true: "1", false: "0"}[state == c.state]
		if got := v.series[`leasewrap_job_state{lease="`+job+`",state="`+state+`"}`]; got != want {
			t.Errorf("leasewrap_job_state{state=%q} = %q, want %s", state, got, want)
		}
	}
	if i := strings.Index(v.index, `data-job="`+job+`"`); i < 0 || !strings.Contains(v.index[i:i+strings.Index(v.index[i:], "</tr>")], `data-health="`+c.state+`"`) {
		t.Errorf("/: the row of %s does not say %s", job, c.state)
	}
	if code, page := get(t, e.addr, "/jobs/"+job); code != 200 || !strings.Contains(page, `data-health="`+c.state+`"`) {
		t.Errorf("/jobs/%s answered %d, not saying %s", job, code, c.state)
	}
}

// absent asserts that no view but check lists job: status --job exits
// 1, status --json, the exporter and the web page's index leave it out,
// and its page is not found.
func (v judgementViews) absent(t *testing.T, e *tableEnv, job string) {
	if code, out := output(t, append([]string{"status", "--job", job}, e.store...)...); code != 1 {
		t.Errorf("status --job exited %d: %s; want 1", code, out)
	}
	if _, ok := v.statusJSON[job]; ok {
		t.Errorf("status --json lists %s", job)
	}
	for series := range v.series {
		if strings.Contains(series, `lease="`+job+`"`) {
			t.Errorf("/metrics has %s", series)
		}
	}
	if strings.Contains(v.index, `data-job="`+job+`"`) {
		t.Errorf("/ lists %s", job)
	}
	if code, _ := get(t, e.addr, "/jobs/"+job); code != 404 {
		t.Errorf("/jobs/%s answered %d, want 404", job, code)
	}
}
