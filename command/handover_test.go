package command

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/check"
	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/command/history"
	"github.com/redbite/leasewrap/command/status"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// judged is what every view says of a job at one moment.
type judged struct {
	checkCode, failOnErrorCode int
	check, status, state, page string
	healthy                    string
}

// judgeViews reads job's judgement in check (--max-age 1h), status
// --json and --fail-on-error, the exporter's leasewrap_job_state and the
// web page's row.
func (d db) judgeViews(t *testing.T, addr, job string) judged {
	t.Helper()
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	var j judged
	var out string
	j.checkCode, out = output(t, append([]string{"check", "--job", job, "--max-age", "1h", "--json"}, store...)...)
	var res check.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("check --json: %v in %q", err, out)
	}
	j.check = res.State + ": " + res.Message
	_, out = output(t, append([]string{"status", "--json", "--job", job}, store...)...)
	var jobs []status.JobJSON
	if err := json.Unmarshal([]byte(out), &jobs); err != nil || len(jobs) == 0 {
		t.Fatalf("status --json: %v in %q", err, out)
	}
	j.status = jobs[0].Health + ": " + jobs[0].HealthReason
	j.failOnErrorCode, _ = output(t, append([]string{"status", "--fail-on-error", "--job", job}, store...)...)
	series := scrape(t, addr)
	j.state = "none"
	for _, s := range []string{"healthy", "failing", "stale", "absent", "unknown", "paused"} {
		if series[`leasewrap_job_state{lease="`+job+`",state="`+s+`"}`] == "1" {
			j.state = s
		}
	}
	j.healthy = series[`leasewrap_job_state{lease="`+job+`",state="healthy"}`]
	_, index := get(t, addr, "/")
	if i := strings.Index(index, `data-job="`+job+`"`); i >= 0 {
		row := index[i:]
		j.page = row[:strings.Index(row, "</tr>")]
	}
	return j
}

// wantHealthy fails the test unless every view calls job healthy now,
// with a reason that says what why contains.
func (d db) wantHealthy(t *testing.T, addr, job, when, why string) {
	t.Helper()
	j := d.judgeViews(t, addr, job)
	if j.checkCode != 0 || !strings.HasPrefix(j.check, "healthy: ") || !strings.Contains(j.check, why) {
		t.Errorf("%s: check exited %d with %q, want 0, healthy, saying %q", when, j.checkCode, j.check, why)
	}
	if !strings.HasPrefix(j.status, "healthy: ") || !strings.Contains(j.status, why) {
		t.Errorf("%s: status says %q, want healthy, saying %q", when, j.status, why)
	}
	if j.failOnErrorCode != 0 {
		t.Errorf("%s: status --fail-on-error exited %d, want 0", when, j.failOnErrorCode)
	}
	if j.healthy != "1" {
		t.Errorf("%s: leasewrap_job_state is %s (healthy %q), want healthy 1", when, j.state, j.healthy)
	}
	if !strings.Contains(j.page, `data-health="healthy"`) {
		t.Errorf("%s: the web page's row of %s is not healthy: %s", when, job, j.page)
	}
}

// A rolling restart of three --wait instances (each sent SIGTERM in turn,
// as docker stop, systemctl stop or a Deployment's rollout does, and
// started again) hands the service on at each step and leaves it healthy
// in every view, checked at each step without waiting for it to settle:
// each stopped run is recorded stopped, by SIGTERM to leasewrap, not as a
// failure of the command.
func TestRollingRestartStaysHealthy(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	start := func(id string) *lwtest.Proc {
		return lw(t, []string{child("ready block")}, d.args("--job", "svc", "--id", id, "--wait", "--", self())...)
	}
	ids := []string{"A", "B", "C"}
	procs := map[string]*lwtest.Proc{"A": start("A")}
	procs["A"].Expect(t, "ready")
	for _, id := range ids[1:] {
		procs[id] = start(id)
		procs[id].WaitLog(t, "standing by: lease held by another instance")
	}
	_, addr := d.exporter(t, pgtest.URL())
	d.wantHealthy(t, addr, "svc", "before the restart", "svc is running on A; no run of it has finished yet")
	for i, id := range ids {
		if err := procs[id].Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := procs[id].Wait(t, 15*time.Second); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("%s exited %d after SIGTERM, want 143", id, code)
		}
		// The release handed the lease on before the instance exited.
		d.wantHealthy(t, addr, "svc", "after SIGTERM to "+id, "its last run on "+id+" was stopped (SIGTERM to leasewrap)")
		procs[id] = start(id)
		procs[id].WaitLog(t, "standing by: lease held by another instance")
		d.wantHealthy(t, addr, "svc", "after "+id+" started again", "svc is running on "+ids[(i+1)%len(ids)])
	}
	var runs []history.RunJSON
	_, out := output(t, "history", "--json", "--job", "svc", "--database-url", pgtest.URL(), "--table", d.table)
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("history --json: %v in %q", err, out)
	}
	if len(runs) != 3 {
		t.Fatalf("history --json: %d runs, want 3: %s", len(runs), out)
	}
	for _, r := range runs {
		if r.Outcome != "stopped" || r.By == nil || *r.By != "SIGTERM to leasewrap" || r.ExitCode == nil || *r.ExitCode != 143 {
			t.Errorf("history --json: %+v, want stopped by SIGTERM to leasewrap, exit 143", r)
		}
	}
	_, out = output(t, "history", "--job", "svc", "--database-url", pgtest.URL(), "--table", d.table)
	if !strings.Contains(out, " OUTCOME  BY ") || strings.Count(out, " stopped  SIGTERM to leasewrap ") != 3 {
		t.Errorf("history: %q, want three runs stopped, BY SIGTERM to leasewrap", out)
	}
}

// release --to hands a service to the standby chosen and leaves it
// healthy in every view; the run it ended is recorded stopped, with who
// asked, and the web page's details of that run say so.
func TestReleaseToStaysHealthyAndSaysWhoAsked(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	store := []string{"--database-url", pgtest.URL(), "--table", d.table}
	a := lw(t, []string{child("ready block")}, d.args("--job", "svc", "--id", "A", "--wait", "--", self())...)
	a.Expect(t, "ready")
	b := lw(t, []string{child("ready block")}, d.args("--job", "svc", "--id", "B", "--wait", "--", self())...)
	b.WaitLog(t, "standing by: lease held by another instance")
	_, addr := d.exporter(t, pgtest.URL())
	if code, out := output(t, append([]string{"release", "--job", "svc", "--to", "B"}, store...)...); code != 0 {
		t.Fatalf("release --to B exited %d: %s", code, out)
	}
	b.Expect(t, "ready")
	a.Wait(t, 15*time.Second)
	by := "release --to B by " + cmdutil.Operator()
	d.wantHealthy(t, addr, "svc", "after release --to B", "svc is running on B; its last run on A was stopped ("+by+")")

	var runs []history.RunJSON
	_, out := output(t, append([]string{"history", "--json", "--job", "svc"}, store...)...)
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("history --json: %v in %q", err, out)
	}
	if len(runs) != 1 || runs[0].Holder != "A" || runs[0].Outcome != "stopped" || runs[0].By == nil || *runs[0].By != by {
		t.Fatalf("history --json: %s, want A's run stopped by %q", out, by)
	}
	_, page := get(t, addr, "/jobs/svc?run="+runID(runs[0]))
	if !strings.Contains(page, `<dt>Stopped by</dt><dd class="stopped-by">`+by+`</dd>`) {
		t.Errorf("/jobs/svc, A's run selected, does not say it was stopped by %q", by)
	}
}

// runID is a run's id in the web page's links: slot, token and attempt.
func runID(r history.RunJSON) string {
	return strconv.Itoa(max(r.Slot, 1)) + "-" + strconv.FormatInt(r.FencingToken, 10) + "-" + strconv.Itoa(max(r.Attempt, 1))
}

// A command killed by a signal nobody sent through leasewrap (an OOM
// kill: SIGKILL of the command, not of leasewrap) is a failure: the
// standby takes over, and the job is failing in check and status, and
// in the exporter, though it runs again.
func TestOOMKilledCommandIsFailingAfterTheTakeover(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "runs")
	a := lw(t, []string{child("record:" + record + " ready block")}, d.args("--job", "svc", "--id", "A", "--wait", "--", self())...)
	a.Expect(t, "ready")
	b := lw(t, []string{child("record:" + record + " ready block")}, d.args("--job", "svc", "--id", "B", "--wait", "--", self())...)
	b.WaitLog(t, "standing by: lease held by another instance")
	_, addr := d.exporter(t, pgtest.URL())
	if err := syscall.Kill(readHistory(t, record)[0].Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.Expect(t, "ready")
	if code := a.Wait(t, 15*time.Second); code != 128+int(syscall.SIGKILL) {
		t.Errorf("A exited %d after its command was killed, want 137", code)
	}
	j := d.judgeViews(t, addr, "svc")
	why := "(signalled 137 on A); svc is running on B"
	if j.checkCode != 2 || !strings.HasPrefix(j.check, "failing: ") || !strings.Contains(j.check, why) {
		t.Errorf("check exited %d with %q, want 2, failing, saying %q", j.checkCode, j.check, why)
	}
	if !strings.HasPrefix(j.status, "failing: ") || !strings.Contains(j.status, why) {
		t.Errorf("status says %q, want failing, saying %q", j.status, why)
	}
	if j.failOnErrorCode != cmdutil.ExitLastRunFailed {
		t.Errorf("status --fail-on-error exited %d, want %d", j.failOnErrorCode, cmdutil.ExitLastRunFailed)
	}
	if j.state != "failing" {
		t.Errorf("leasewrap_job_state is %s, want failing", j.state)
	}
}
