package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/stall"
	"github.com/redbite/leasewrap/internal/tcpproxy"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schema"
)

// farSchedule comes due once a year: no scheduled run happens during a test.
const farSchedule = "0 0 1 1 *"

// trigger runs leasewrap trigger and returns its exit status and output.
func (d db) trigger(t *testing.T, extra ...string) (int, string) {
	t.Helper()
	return d.triggerAt(t, pgtest.URL(), extra...)
}

// triggerAt runs leasewrap trigger on the database at url.
func (d db) triggerAt(t *testing.T, url string, extra ...string) (int, string) {
	t.Helper()
	p := lw(t, nil, append([]string{"trigger", "--database-url", url, "--table", d.table, "--log-format", "json"}, extra...)...)
	var out []string
	for line := range p.Lines {
		out = append(out, line)
	}
	return p.Wait(t, 30*time.Second), strings.Join(out, "\n") + p.Logs.String()
}

// claim is one row of the claims table.
type claim struct {
	at              time.Time
	outcome, holder string
	token           int64
}

func (d db) claims(t *testing.T, job string) []claim {
	t.Helper()
	rows, err := d.pool.Query(context.Background(), `SELECT scheduled_at, outcome, holder, fencing_token FROM `+
		schema.ClaimsTable(pgx.Identifier{d.table}).Sanitize()+` WHERE job_name = $1 ORDER BY scheduled_at`, job)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claim, error) {
		var c claim
		return c, r.Scan(&c.at, &c.outcome, &c.holder, &c.token)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitRuns polls the children's own records until n runs have ended.
func waitRuns(t *testing.T, record string, n int) []lwtest.Interval {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs := readHistory(t, record)
		ended := 0
		for _, r := range runs {
			if r.End != 0 {
				ended++
			}
		}
		if ended >= n {
			return runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requested runs ended within 30s: %+v", ended, n, runs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends schedulers between runs: each exits 0.
func stop(t *testing.T, procs ...*lwtest.Proc) {
	t.Helper()
	for _, p := range procs {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		if code := p.Wait(t, 15*time.Second); code != 0 {
			t.Errorf("a scheduler stopped between runs exited %d, want 0", code)
		}
	}
}

// Two listening schedulers whose retry interval (50s) is longer than the
// test's deadline: each request is run once, by one of them, woken by the
// request's notification; trigger says which took it; the claim of each
// is a manual run with the request's time, which the run's history row
// and its child carry as the scheduled time.
func TestTriggerRunsOnceOnOneListeningScheduler(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	var scheds []*lwtest.Proc
	for _, id := range []string{"a", "b"} {
		p := lw(t, []string{child("record:" + record + " exit:0")}, "--database-url", pgtest.URL(), "--table", d.table,
			"--log-format", "json", "--ttl", "3m", "--retry-interval", "50s", "--id", id,
			"--job", "j", "--schedule", farSchedule, "--", self())
		p.WaitLog(t, "scheduler started")
		scheds = append(scheds, p)
	}
	for i := 1; i <= 2; i++ {
		code, out := d.trigger(t, "--job", "j", "--id", "operator")
		if code != 0 || !strings.Contains(out, "run of j requested at") {
			t.Fatalf("trigger exited %d: %s", code, out)
		}
		runs := waitRuns(t, record, i)
		if want := "taken by scheduler " + runs[i-1].Holder + ","; !strings.Contains(out, want) {
			t.Errorf("trigger does not say %q: %s", want, out)
		}
	}
	stop(t, scheds...)

	runs := readHistory(t, record)
	claims := d.claims(t, "j")
	if len(runs) != 2 || len(claims) != 2 {
		t.Fatalf("two requests: %d runs by the children's records, %d claims, want 2 of each: %+v %+v", len(runs), len(claims), runs, claims)
	}
	for i, c := range claims {
		if c.outcome != lease.ClaimManual || c.holder != runs[i].Holder || c.token != runs[i].Token || !runs[i].ScheduledAt.Equal(c.at) {
			t.Errorf("claim %+v does not record run %+v as a manual run", c, runs[i])
		}
		var outcome string
		var scheduled time.Time
		err := d.pool.QueryRow(context.Background(), `SELECT outcome, scheduled_at FROM `+
			pgx.Identifier{d.table + lease.HistorySuffix}.Sanitize()+` WHERE job_name = 'j' AND fencing_token = $1`, c.token).
			Scan(&outcome, &scheduled)
		if err != nil || outcome != lease.OutcomeExited || !scheduled.Equal(c.at) {
			t.Errorf("history of the manual run with token %d: %q at %v (%v), want exited at the request's time %v", c.token, outcome, scheduled, err, c.at)
		}
	}
	if runs[0].End > runs[1].Start {
		t.Errorf("the requested runs overlapped: %+v", runs)
	}
}

// A scheduler that cannot listen (--listen=false, as through PgBouncer in
// transaction mode) finds a request by polling every retry interval
// while idle; without the poll it would sleep until its next time.
func TestTriggerReachesAPollingScheduler(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	p := lw(t, []string{child("record:" + record + " exit:0")}, d.args("--listen=false", "--id", "poller",
		"--job", "j", "--schedule", farSchedule, "--", self())...)
	p.WaitLog(t, "scheduler started")
	if code, out := d.trigger(t, "--job", "j"); code != 0 || !strings.Contains(out, "taken by scheduler poller,") {
		t.Fatalf("trigger exited %d, want 0 naming the scheduler that took it: %s", code, out)
	}
	runs := waitRuns(t, record, 1)
	stop(t, p)
	if c := d.claims(t, "j"); len(c) != 1 || c[0].outcome != lease.ClaimManual || c[0].holder != "poller" || runs[0].Holder != "poller" {
		t.Errorf("claims %+v, runs %+v: want one manual run by the polling scheduler", c, runs)
	}
}

// A request that finds the lease held waits, is not skipped, and runs
// once the holder hands the lease back; trigger says it waits, and
// exits 0.
func TestTriggerWaitsForTheLease(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	p := lw(t, []string{child("record:" + record + " exit:0")}, d.args("--id", "sched", "--log-level", "debug",
		"--job", "j", "--schedule", farSchedule, "--", self())...)
	p.WaitLog(t, "scheduler started")
	// Another holder has the lease for an hour.
	d.exec(t, `UPDATE TABLE SET holder = 'other', expires_at = now() + interval '1 hour', released_at = NULL WHERE job_name = 'j'`)
	if code, out := d.trigger(t, "--job", "j", "--retry-interval", "1s"); code != 0 || !strings.Contains(out, "it waits, as the lease is held by other") {
		t.Fatalf("trigger exited %d, want 0 saying the request waits for the lease: %s", code, out)
	}
	p.WaitLog(t, "a requested run waits: the lease is held")
	if c := d.claims(t, "j"); len(c) != 1 || c[0].outcome != lease.ClaimRequested {
		t.Fatalf("while the lease is held, claims are %+v, want the request waiting", c)
	}
	// The holder hands it back, as a release does, announcing it.
	d.exec(t, `WITH r AS (UPDATE TABLE SET expires_at = now(), released_at = now() WHERE job_name = 'j' RETURNING 1)
SELECT pg_notify($1, 'j') FROM r`, jobChannelOf(d.table, "j"))
	runs := waitRuns(t, record, 1)
	stop(t, p)
	if c := d.claims(t, "j"); len(c) != 1 || c[0].outcome != lease.ClaimManual || runs[0].Holder != "sched" {
		t.Errorf("claims %+v, runs %+v: want the request run once by the scheduler", c, runs)
	}
}

// jobChannelOf is the NOTIFY channel of the releases of job's lease in a
// lease table (see lease.jobChannel).
func jobChannelOf(table, job string) string {
	sum := sha256.Sum256([]byte("leasewrap:" + pgx.Identifier{table}.Sanitize() + "\n" + job))
	return "leasewrap:" + hex.EncodeToString(sum[:])[:32]
}

// trigger refuses with one line: a job without a schedule recorded
// (exit 1), tables that do not exist (69, creating nothing), bad flags
// (64).
func TestTriggerRefuses(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	if code, out := d.trigger(t, "--job", "j"); code != cmdutil.ExitUnavailable || !strings.Contains(out, "no such table") {
		t.Errorf("without tables: exit %d, want 69: %s", code, out)
	}
	if d.holder(t, "j") != "" {
		t.Error("trigger created the lease table")
	}
	p := lw(t, nil, d.args("--job", "plain", "--", "true")...)
	if code := p.Wait(t, 15*time.Second); code != 0 {
		t.Fatalf("a run without schedule exited %d", code)
	}
	for _, job := range []string{"plain", "unknown"} {
		code, out := d.trigger(t, "--job", job)
		if code != cmdutil.ExitNotFound || !strings.Contains(out, "no scheduler would run it") && !strings.Contains(out, "has no lease row") {
			t.Errorf("job %s without schedule: exit %d, want 1: %s", job, code, out)
		}
	}
	for _, args := range [][]string{{}, {"--job", "j", "--bogus"}, {"--job", "j", "--", "true"}, {"--job", "j", "--id", "a\x01b"},
		{"--job", "j", "extra"}, {"--job", "j", "--retry-interval", "soon"}} {
		code, out := d.trigger(t, args...)
		if code != cmdutil.ExitUsage || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("%q: exit %d, want 64 with one line: %s", args, code, out)
		}
	}
}

// A job whose only instances are crontab lines with --once has no
// scheduler to run a request: trigger says so and exits 69, and leaves
// no request behind that a scheduler started later would run by surprise.
// So it does when no instance of the job runs at all.
func TestTriggerWithNoSchedulerRunning(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	once := lw(t, []string{child("record:" + record + " exit:0")}, d.args("--id", "cron", "--job", "j", "--schedule", farSchedule, "--once", "--", self())...)
	if code := once.Wait(t, 15*time.Second); code != 0 {
		t.Fatalf("a --once line exited %d: %s", code, once.Logs)
	}
	for _, args := range [][]string{{"--job", "j"}, {"--job", "j", "--retry-interval", "100ms"}} {
		start := time.Now()
		code, out := d.trigger(t, args...)
		if code != cmdutil.ExitUnavailable || !strings.Contains(out, "no scheduler of j took it within") ||
			!strings.Contains(out, "--once do not run requests") || !strings.Contains(out, "the request was withdrawn") {
			t.Errorf("%q with no scheduler running: exit %d, want 69 saying no scheduler runs it: %s", args, code, out)
		}
		if took := time.Since(start); took < 5*time.Second {
			t.Errorf("%q gave up after %s, want at least 5s for a scheduler to take the request", args, took)
		}
		if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines != 1 {
			t.Errorf("%q said %d lines, want one: %s", args, lines, out)
		}
	}
	if c := d.claims(t, "j"); len(c) != 0 {
		t.Errorf("claims %+v: want no request left behind", c)
	}
	// A scheduler started now finds nothing to run.
	p := lw(t, []string{child("record:" + record + " exit:0")}, d.args("--id", "late", "--job", "j", "--schedule", farSchedule, "--", self())...)
	p.WaitLog(t, "scheduler started")
	stop(t, p)
	if runs := readHistory(t, record); len(runs) != 0 {
		t.Errorf("withdrawn requests ran: %+v", runs)
	}
}

// A paused job's schedulers take no request: trigger says the job is
// paused, withdraws the request at once (it would otherwise run when the
// job is resumed, by surprise) and exits 69.
func TestTriggerOnAPausedJob(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	p := lw(t, []string{child("record:" + record + " exit:0")}, d.args("--id", "sched", "--job", "j", "--schedule", farSchedule, "--", self())...)
	p.WaitLog(t, "scheduler started")
	pause := lw(t, nil, "pause", "--database-url", pgtest.URL(), "--table", d.table, "--job", "j", "--id", "ops")
	if code := pause.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("pause exited %d: %s", code, pause.Logs)
	}
	window := stall.Open()
	code, out := d.trigger(t, "--job", "j")
	if code != cmdutil.ExitUnavailable || !strings.Contains(out, "j is paused (by ops)") || !strings.Contains(out, "the request was withdrawn") {
		t.Errorf("trigger on a paused job: exit %d, want 69 saying it is paused: %s", code, out)
	}
	// Not the wait for a scheduler (at least 5 s): the pause is read at
	// once, however long this machine kept the test waiting meanwhile.
	took := time.Since(window.Start())
	if late, stalled := window.Late(took, 5*time.Second); late {
		t.Errorf("trigger on a paused job took %s (+%s stalled), want an answer before its wait for a scheduler", took, stalled)
	}
	if c := d.claims(t, "j"); len(c) != 0 {
		t.Errorf("claims %+v: want no request left behind", c)
	}
	resume := lw(t, nil, "resume", "--database-url", pgtest.URL(), "--table", d.table, "--job", "j")
	if code := resume.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("resume exited %d: %s", code, resume.Logs)
	}
	if code, out := d.trigger(t, "--job", "j"); code != 0 || !strings.Contains(out, "taken by scheduler sched,") {
		t.Errorf("trigger once resumed: exit %d: %s", code, out)
	}
	waitRuns(t, record, 1)
	stop(t, p)
	if runs := readHistory(t, record); len(runs) != 1 {
		t.Errorf("runs %+v: want one, of the request made after resume", runs)
	}
}

// trigger needs no more than SELECT on the lease table and INSERT on its
// claims table to have a running scheduler take its request, as its help
// says. To withdraw a request that nothing took, it needs SELECT and
// DELETE on the claims table too; without them it says the request
// stays, and exits 69.
func TestTriggerNeedsOnlySelectAndInsert(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	p := lw(t, []string{child("record:" + record + " exit:0")}, d.args("--job", "j", "--schedule", farSchedule, "--", self())...)
	p.WaitLog(t, "scheduler started")
	role := fmt.Sprintf("lw_trig_%d_%d", os.Getpid(), roleSeq.Add(1))
	r := pgx.Identifier{role}.Sanitize()
	d.exec(t, `CREATE ROLE `+r+` LOGIN`)
	t.Cleanup(func() {
		if _, err := d.pool.Exec(context.Background(), `DROP OWNED BY `+r+`; DROP ROLE `+r); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	d.exec(t, `GRANT USAGE ON SCHEMA public TO `+r)
	d.exec(t, `GRANT SELECT ON TABLE TO `+r)
	d.exec(t, `GRANT INSERT ON `+schema.ClaimsTable(pgx.Identifier{d.table}).Sanitize()+` TO `+r)
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	if code, out := d.triggerAt(t, u.String(), "--job", "j"); code != 0 || !strings.Contains(out, "taken by scheduler") {
		t.Fatalf("trigger as a role with SELECT and INSERT only exited %d: %s", code, out)
	}
	waitRuns(t, record, 1)
	stop(t, p)

	code, out := d.triggerAt(t, u.String(), "--job", "j", "--id", "stays")
	if code != cmdutil.ExitUnavailable || !strings.Contains(out, "no scheduler of j took it") || !strings.Contains(out, "could not be withdrawn") ||
		!strings.Contains(out, "GRANT SELECT, INSERT, DELETE") || !strings.Contains(out, "it stays recorded") {
		t.Errorf("trigger with no scheduler, as a role that cannot delete: exit %d, want 69 saying the request stays: %s", code, out)
	}
	d.exec(t, `GRANT SELECT, DELETE ON `+schema.ClaimsTable(pgx.Identifier{d.table}).Sanitize()+` TO `+r)
	if code, out := d.triggerAt(t, u.String(), "--job", "j", "--id", "withdrawn"); code != cmdutil.ExitUnavailable || !strings.Contains(out, "the request was withdrawn") {
		t.Errorf("trigger with no scheduler, as a role with SELECT and DELETE: exit %d, want 69 and the request withdrawn: %s", code, out)
	}
	var requested []string
	for _, c := range d.claims(t, "j") {
		if c.outcome == lease.ClaimRequested {
			requested = append(requested, c.holder)
		}
	}
	if len(requested) != 1 || requested[0] != "stays" {
		t.Errorf("requests left: %q, want only the one that could not be withdrawn", requested)
	}
}

// With --no-wait, a request made while no scheduler runs waits in the
// table, and the first scheduler to start runs it.
func TestTriggerWaitsForASchedulerToStart(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	start := func(id string) *lwtest.Proc {
		return lw(t, []string{child("record:" + record + " exit:0")}, d.args("--id", id, "--job", "j", "--schedule", farSchedule, "--", self())...)
	}
	p := start("first")
	p.WaitLog(t, "scheduler started")
	stop(t, p)
	if code, out := d.trigger(t, "--job", "j", "--no-wait"); code != 0 || !strings.Contains(out, "run of j requested at") {
		t.Fatalf("trigger --no-wait exited %d: %s", code, out)
	}
	p = start("second")
	runs := waitRuns(t, record, 1)
	stop(t, p)
	if len(runs) != 1 || runs[0].Holder != "second" {
		t.Errorf("runs %+v: want one, by the scheduler started after the request", runs)
	}
}

// A scheduler whose listening connection is cut goes on: it polls, listens
// again, and a request made after the cut is run.
func TestTriggerAfterTheListeningConnectionWasCut(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	cfg := d.pool.Config().ConnConfig
	proxy := tcpproxy.Start(t, fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	record := filepath.Join(t.TempDir(), "runs")
	p := lw(t, []string{child("record:" + record + " exit:0")}, "--database-url", u.String(), "--table", d.table,
		"--log-format", "json", "--log-level", "debug", "--ttl", "3m", "--retry-interval", "3s",
		"--job", "j", "--schedule", farSchedule, "--", self())
	p.WaitLog(t, "scheduler started")
	proxy.Cut()
	p.WaitLog(t, "listening connection for requested runs lost; polling for now")
	proxy.Restore()
	// The scheduler polls every 3s until it listens again: trigger waits
	// three of its own retry intervals.
	if code, out := d.trigger(t, "--job", "j", "--retry-interval", "3s"); code != 0 {
		t.Fatalf("trigger exited %d: %s", code, out)
	}
	waitRuns(t, record, 1)
	stop(t, p)
}

// A request is recorded before trigger says so: a stdout that cannot be
// written (here /dev/full) does not undo it, so trigger says so on stderr
// and exits 0, and the request is run.
func TestTriggerWhoseStdoutFailsStillRequested(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	p := lw(t, []string{child("record:" + record + " exit:0")}, d.args("--job", "j", "--schedule", farSchedule, "--", self())...)
	p.WaitLog(t, "scheduler started")
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	var stderr lwtest.SyncBuffer
	cmd := exec.Command(binary, "trigger", "--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json", "--job", "j")
	cmd.Stdout, cmd.Stderr = full, &stderr
	err = cmd.Run()
	if err != nil || !strings.Contains(stderr.String(), "run requested; cannot write that to stdout") {
		t.Errorf("trigger with stdout on /dev/full: %v, stderr %q; want exit 0 and the request said on stderr", err, stderr.String())
	}
	waitRuns(t, record, 1)
	stop(t, p)
}

// A scheduler whose role lacks a privilege on the claims table (UPDATE,
// which a requested run's take needs, from the start; INSERT once it
// runs) is told which grants each table needs, the claims table's among
// them, and says it once, however many times come due meanwhile, even
// when a take of another kind succeeds in between.
func TestSchedulerWithoutClaimsInsertSaysTheGrantOnce(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	if code, _, errOut := runLeasewrapIn(t, "migrate", "--database-url", pgtest.URL(), "--table", d.table); code != 0 {
		t.Fatalf("migrate exited %d: %s", code, errOut)
	}
	role := fmt.Sprintf("lw_claims_%d_%d", os.Getpid(), roleSeq.Add(1))
	r := pgx.Identifier{role}.Sanitize()
	d.exec(t, `CREATE ROLE `+r+` LOGIN`)
	t.Cleanup(func() {
		if _, err := d.pool.Exec(context.Background(), `DROP OWNED BY `+r+`; DROP ROLE `+r); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	claims := schema.ClaimsTable(pgx.Identifier{d.table}).Sanitize()
	d.exec(t, `GRANT USAGE ON SCHEMA public TO `+r)
	d.exec(t, `GRANT SELECT, INSERT, UPDATE ON TABLE TO `+r)
	d.exec(t, `GRANT SELECT, INSERT, DELETE ON `+pgx.Identifier{d.table + lease.HistorySuffix}.Sanitize()+` TO `+r)
	d.exec(t, `GRANT SELECT, INSERT, DELETE ON `+claims+` TO `+r)
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	args := []string{"--database-url", u.String(), "--table", d.table, "--log-format", "json", "--log-level", "debug",
		"--ttl", "3s", "--job", "j", "--schedule", "@every 1s", "--", "true"}
	p := lw(t, nil, args...)
	p.WaitLog(t, "scheduler started")
	d.exec(t, `REVOKE INSERT ON `+claims+` FROM `+r)
	const failing = "cannot use the lease store; the scheduled times are accounted for once it answers"
	deadline := time.Now().Add(20 * time.Second)
	var seen []map[string]any
	for len(seen) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d %q lines within 20s:\n%s", len(seen), failing, p.Logs)
		}
		time.Sleep(50 * time.Millisecond)
		seen = seen[:0]
		for _, e := range p.LogEntries(t) {
			if e["message"] == failing {
				seen = append(seen, e)
			}
		}
	}
	stop(t, p)
	if strings.Contains(p.Logs.String(), "the lease store answers again") {
		t.Errorf("the scheduler said the store answers again while its privilege was still missing:\n%s", p.Logs)
	}
	for i, e := range seen {
		if want := map[bool]string{true: "warn", false: "debug"}[i == 0]; e["level"] != want {
			t.Errorf("failure %d logged at %v, want %s: %v", i+1, e["level"], want, e)
		}
		msg, _ := e["error"].(string)
		if !strings.Contains(msg, "SELECT, INSERT, UPDATE, DELETE ON its claims table") || !strings.Contains(msg, "permission denied") {
			t.Errorf("failure %d: %q, want the claims table's grant and the server's message", i+1, msg)
		}
	}
}

// runLeasewrapIn runs leasewrap to its end and returns its status and output.
func runLeasewrapIn(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	r := runLeasewrap(t, 30*time.Second, args...)
	return r.code, string(r.stdout), string(r.stderr)
}
