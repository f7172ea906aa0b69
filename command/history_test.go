package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/cmdutil"
)

// Each way a run can end leaves one history row, written with the release.
func TestHistoryRecordsHowEachRunEnded(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	run := func(job, script string, want int, extra ...string) {
		t.Helper()
		p := lw(t, []string{child(script)}, d.args(append([]string{"--job", job}, extra...)...)...)
		if got := p.Wait(t, 20*time.Second); got != want {
			t.Fatalf("%s: exit %d, want %d; logs:\n%s", job, got, want, p.Logs)
		}
	}
	run("exited", "exit:3", 3, "--", self())
	// A command that dies of a signal nobody sent through leasewrap.
	run("signalled", "kill:TERM", 143, "--", self())
	// Found and executable, but its interpreter does not exist: the lease
	// is taken, the exec fails.
	script := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run("could-not-start", "", 127, "--", script)
	// An operator's release stops the command.
	p := lw(t, []string{child("trap ready block")}, d.args("--job", "stopped", "--id", "holder-s", "--", self())...)
	p.Expect(t, "ready")
	rel := lw(t, nil, "release", "--database-url", d.args()[1], "--table", d.table, "--job", "stopped", "--id", "holder-s")
	if got := rel.Wait(t, 10*time.Second); got != 0 {
		t.Fatalf("release exited %d: %s", got, rel.Logs)
	}
	if got := p.Wait(t, 10*time.Second); got != 75 {
		t.Fatalf("released holder exited %d, want 75", got)
	}
	// A signal to leasewrap stops the command.
	p = lw(t, []string{child("ready block")}, d.args("--job", "terminated", "--", self())...)
	p.Expect(t, "ready")
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := p.Wait(t, 10*time.Second); got != 143 {
		t.Fatalf("holder sent SIGTERM exited %d, want 143", got)
	}

	var got []string
	d.query(t, &got, `SELECT array_agg(job_name || ' ' || outcome || ' ' || coalesce(exit_code::text, '-') || ' ' || coalesce(stopped_by, '-')
  ORDER BY job_name) FROM TABLE_history`)
	want := []string{"could-not-start could_not_start 127 -", "exited exited 3 -", "signalled signalled 143 -",
		"stopped stopped 143 release by " + cmdutil.Operator(), "terminated stopped 143 SIGTERM to leasewrap"}
	if !slices.Equal(got, want) {
		t.Errorf("history rows %q, want %q", got, want)
	}
	var consistent bool
	d.query(t, &consistent, `SELECT bool_and(h.fencing_token = l.fencing_token AND h.holder = l.holder
  AND h.started_at = l.last_started_at AND h.finished_at = l.last_finished_at AND h.slot = 1 AND h.attempt = 1)
FROM TABLE_history h JOIN TABLE l ON l.job_name = h.job_name`)
	if !consistent {
		t.Error("history rows do not match the lease rows' last runs")
	}
}

// A wrapper that died without releasing (SIGKILL) leaves its run open; the
// next instance that takes the lease closes it as lost, in the statement
// that takes it.
func TestCrashedRunIsClosedAsLostByTheNextTaker(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	a := lw(t, []string{child("ready block")}, d.expiringArgs("--job", "j", "--id", "crashed", "--", self())...)
	a.Expect(t, "ready")
	token := int64(a.WaitLog(t, "acquired")["fencing_token"].(float64))
	_ = a.Cmd.Process.Kill()
	a.Wait(t, 10*time.Second)
	var rows int
	d.query(t, &rows, `SELECT count(*) FROM TABLE_history`)
	if rows != 0 {
		t.Fatalf("%d history rows before anyone took the lease over, want 0", rows)
	}
	b := lw(t, []string{child("exit:0")}, d.expiringArgs("--job", "j", "--id", "next", "--wait", "--", self())...)
	if got := b.Wait(t, 20*time.Second); got != 0 {
		t.Fatalf("next holder exited %d", got)
	}
	var got []string
	d.query(t, &got, `SELECT array_agg(holder || ' ' || outcome || ' ' || (fencing_token = $1) || ' ' || (exit_code IS NULL)
  || ' ' || (finished_at > started_at) ORDER BY finished_at) FROM TABLE_history`, token)
	want := []string{"crashed lost true true true", "next exited false false true"}
	if !slices.Equal(got, want) {
		t.Errorf("history %q, want %q", got, want)
	}
}

// Each release deletes at most a batch of its job's runs older than
// --history-keep, oldest first, and nothing younger.
func TestHistoryPruningIsBounded(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	once := func(extra ...string) {
		t.Helper()
		p := lw(t, []string{child("exit:0")}, d.args(append([]string{"--job", "j"}, append(extra, "--", self())...)...)...)
		if got := p.Wait(t, 20*time.Second); got != 0 {
			t.Fatalf("exit %d; logs:\n%s", got, p.Logs)
		}
	}
	once() // creates the tables
	d.exec(t, `INSERT INTO "`+d.table+`_history" (job_name, holder, fencing_token, started_at, finished_at, outcome)
SELECT 'j', 'old', g, now() - interval '40 days' - g * interval '1 second', now() - interval '40 days' + g * interval '1 second', 'exited'
FROM generate_series(1, 250) g
UNION ALL
SELECT 'j', 'recent', g, now() - interval '10 days', now() - interval '10 days', 'exited' FROM generate_series(1, 5) g
UNION ALL
SELECT 'other', 'old', g, now() - interval '40 days', now() - interval '40 days', 'exited' FROM generate_series(1, 5) g`)
	count := func(job, holder string) (n int) {
		d.query(t, &n, `SELECT count(*) FROM TABLE_history WHERE job_name = $1 AND holder = $2`, job, holder)
		return n
	}
	once("--history-keep", "0s")
	if n := count("j", "old"); n != 250 {
		t.Errorf("--history-keep 0s pruned: %d old runs left, want 250", n)
	}
	for _, left := range []int{150, 50, 0} {
		once()
		if n := count("j", "old"); n != left {
			t.Fatalf("%d old runs left after a run, want %d (a batch of 100 per release)", n, left)
		}
	}
	if n := count("j", "recent"); n != 5 {
		t.Errorf("%d runs younger than 30 days left, want 5", n)
	}
	var mine int
	d.query(t, &mine, `SELECT count(*) FROM TABLE_history WHERE job_name = 'j' AND holder NOT IN ('old', 'recent')`)
	if mine != 5 {
		t.Errorf("%d runs of j, want the 5 just made", mine)
	}
	if n := count("other", "old"); n != 5 {
		t.Errorf("j's releases pruned another job's runs: %d of its 5 left", n)
	}
}

// history --json is a list of objects with a fixed set of keys.
func TestHistoryJSONShape(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for _, script := range []string{"exit:0", "exit:2"} {
		p := lw(t, []string{child(script)}, d.args("--job", "j", "--id", "h1", "--", self())...)
		p.Wait(t, 20*time.Second)
	}
	p := lw(t, nil, "history", "--database-url", d.args()[1], "--table", d.table, "--json", "--job", "j")
	var out strings.Builder
	for line := range p.Lines {
		out.WriteString(line + "\n")
	}
	if got := p.Wait(t, 10*time.Second); got != 0 {
		t.Fatalf("history exited %d: %s", got, p.Logs)
	}
	var runs []map[string]any
	if err := json.Unmarshal([]byte(out.String()), &runs); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2:\n%s", len(runs), out.String())
	}
	keys := func(m map[string]any) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		slices.Sort(k)
		return k
	}
	want := []string{"attempt", "by", "duration_seconds", "exit_code", "fencing_token", "finished_at", "holder", "job", "origin", "outcome", "output_bytes",
		"scheduled_at", "slot", "started_at"}
	for _, r := range runs {
		if !slices.Equal(keys(r), want) {
			t.Errorf("keys %q, want %q", keys(r), want)
		}
	}
	// Newest first.
	if runs[0]["exit_code"] != 2.0 || runs[1]["exit_code"] != 0.0 || runs[0]["outcome"] != "exited" || runs[0]["holder"] != "h1" {
		t.Errorf("runs %v, want the exit 2 run first", runs)
	}
	if _, err := time.Parse(time.RFC3339Nano, runs[0]["finished_at"].(string)); err != nil {
		t.Errorf("finished_at: %v", err)
	}
}
