package command

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/command/check"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// check reads the run history as a Nagios/Icinga plugin would report it.
func TestCheckJudgesTheLastSuccess(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	runCheck := func(extra ...string) (int, string) {
		t.Helper()
		p := lw(t, nil, append([]string{"check", "--database-url", pgtest.URL(), "--table", d.table, "--job", "nightly"}, extra...)...)
		var out strings.Builder
		for line := range p.Lines {
			out.WriteString(line + "\n")
		}
		return p.Wait(t, 10*time.Second), out.String()
	}
	run := func(status string) {
		t.Helper()
		lw(t, nil, d.args("--job", "nightly", "--", "sh", "-c", "exit "+status)...).Wait(t, 10*time.Second)
	}
	expect := func(code int, out string, wantCode int, wantPrefix string) {
		t.Helper()
		if code != wantCode || !strings.HasPrefix(out, wantPrefix) || strings.Count(out, "\n") != 1 {
			t.Errorf("check exited %d with %q, want %d and one line starting %q", code, out, wantCode, wantPrefix)
		}
	}

	code, out := runCheck("--max-age", "26h")
	expect(code, out, 3, "UNKNOWN: no lease table")
	lw(t, nil, d.args("--job", "other", "--", "true")...).Wait(t, 10*time.Second)
	code, out = runCheck("--max-age", "26h")
	expect(code, out, 2, "CRITICAL: no such job nightly: no lease and no run in the history")
	run("3")
	code, out = runCheck("--max-age", "26h")
	expect(code, out, 2, "CRITICAL: nightly has no successful run in the history")
	run("0")
	code, out = runCheck("--max-age", "26h")
	expect(code, out, 0, "OK: nightly last succeeded ")
	if !strings.Contains(out, "| age=") {
		t.Errorf("no perfdata in %q", out)
	}
	run("1")
	code, out = runCheck("--max-age", "26h")
	expect(code, out, 0, "OK: nightly last succeeded ")
	code, out = runCheck("--max-age", "26h", "--fail-on-last-failure")
	expect(code, out, 2, "CRITICAL: nightly last run failed")

	// A day and more later.
	d.exec(t, `UPDATE "`+d.table+`_history" SET finished_at = finished_at - interval '27 hours', started_at = started_at - interval '27 hours'`)
	code, out = runCheck("--max-age", "26h", "--json")
	var got check.Result
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("check --json: %v in %q", err, out)
	}
	if code != 2 || got.Status != "critical" || got.LastSuccessAgeSeconds == nil || *got.LastSuccessAgeSeconds < 27*3600 ||
		got.LastExitCode == nil || *got.LastExitCode != 1 {
		t.Errorf("check --json exited %d with %+v, want critical with the last success 27h old", code, got)
	}
	code, out = runCheck()
	expect(code, out, 3, "UNKNOWN: missing --max-age")
}

// check cannot judge a job without its lease rows: a role that may read
// the history but not the lease table is answered UNKNOWN, not CRITICAL
// for a held job that looks as if nothing ran it.
func TestCheckWithoutTheLeaseRowsIsUnknown(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	lw(t, nil, d.args("--job", "svc", "--", "sleep", "60")...).WaitLog(t, "child started")
	dsn := d.role(t, `GRANT SELECT ON `+pgx.Identifier{d.table + "_history"}.Sanitize()+` TO ROLE`)
	p := lw(t, nil, "check", "--database-url", dsn, "--table", d.table, "--job", "svc", "--max-age", "1h")
	var out strings.Builder
	for line := range p.Lines {
		out.WriteString(line + "\n")
	}
	if code := p.Wait(t, 10*time.Second); code != 3 || !strings.HasPrefix(out.String(), "UNKNOWN: ") || !strings.Contains(out.String(), "permission denied") {
		t.Errorf("check exited %d with %q, want 3, UNKNOWN, saying why the lease table could not be read", code, out.String())
	}
}
