package command

import (
	"strings"
	"testing"
	"time"
)

// One job's --history-keep prunes that job's runs only: two jobs share a
// table, the first keeps its runs for ever (0s), the second for 1s; the
// second's releases leave the first's runs alone and prune its own, and a
// job with slots prunes the runs recorded under its name.
func TestHistoryKeepPrunesOnlyItsOwnJob(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	run := func(job string, extra ...string) {
		t.Helper()
		args := append(append([]string{"--job", job}, extra...), "--", self())
		p := lw(t, []string{child("exit:0")}, d.args(args...)...)
		if got := p.Wait(t, 20*time.Second); got != 0 {
			t.Fatalf("%s: exit %d; logs:\n%s", job, got, p.Logs)
		}
	}
	count := func(job string) (n int) {
		d.query(t, &n, `SELECT count(*) FROM TABLE_history WHERE job_name = $1`, job)
		return n
	}
	// Runs older than any keep but 0s, without waiting for them to age.
	age := func(job string) {
		d.exec(t, `UPDATE "`+d.table+`_history" SET started_at = started_at - interval '2 hours',
  finished_at = finished_at - interval '2 hours' WHERE job_name = $1`, job)
	}
	run("nightly_report", "--history-keep", "0s")
	run("nightly_report", "--history-keep", "0s")
	age("nightly_report")
	run("cache_warmup", "--history-keep", "1s")
	age("cache_warmup")
	run("pool", "--slots", "2", "--history-keep", "1s")
	age("pool")

	run("cache_warmup", "--history-keep", "1s")
	run("pool", "--slots", "2", "--history-keep", "1s")
	if n := count("nightly_report"); n != 2 {
		t.Errorf("nightly_report (--history-keep 0s) has %d runs left after other jobs' releases, want 2", n)
	}
	if n := count("cache_warmup"); n != 1 {
		t.Errorf("cache_warmup (--history-keep 1s) has %d runs, want 1: its aged run pruned, its new one kept", n)
	}
	if n := count("pool"); n != 1 {
		t.Errorf("pool (--slots 2, --history-keep 1s) has %d runs, want 1: its aged run pruned, its new one kept", n)
	}
	code, out := command(t, "check", "--database-url", d.args()[1], "--table", d.table, "--job", "nightly_report", "--max-age", "26h")
	if code != 0 || !strings.HasPrefix(out, "OK: ") {
		t.Errorf("check of nightly_report exited %d: %s", code, out)
	}
}

// command runs a leasewrap subcommand to its end and returns its exit
// status and what it printed on stdout.
func command(t *testing.T, args ...string) (int, string) {
	t.Helper()
	p := lw(t, nil, args...)
	var out strings.Builder
	for line := range p.Lines {
		out.WriteString(line + "\n")
	}
	return p.Wait(t, 10*time.Second), out.String()
}
