package command

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// historyWarning is how a wrapper says, once, that runs are not recorded.
const historyWarning = "runs are not recorded, the job runs on under its lease: "

// historyWarnings are the wrapper's warnings that runs are not recorded.
func historyWarnings(t *testing.T, p *lwtest.Proc) []string {
	t.Helper()
	var out []string
	for _, e := range p.LogEntries(t) {
		if msg, _ := e["message"].(string); strings.HasPrefix(msg, historyWarning) {
			out = append(out, msg)
		}
	}
	return out
}

// A history table leasewrap cannot write to never stops a run: the child
// runs, its exit status passes through, the wrapper says once which table
// and why; status is unaffected, and check and history say the history is
// unavailable.
func TestBrokenHistoryNeverStopsARun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// breakIt breaks the history table of a lease table that exists
		// (created by a first run), and returns the URL to run as.
		breakIt func(t *testing.T, d db, history string) string
		problem string // in the warning and in check's line
	}{
		{"wrong column type", func(t *testing.T, d db, h string) string {
			rawExec(t, d, `ALTER TABLE `+h+` ALTER COLUMN outcome TYPE integer USING 0`)
			return pgtest.URL()
		}, "column outcome is integer, want text"},
		{"not null column without a default", func(t *testing.T, d db, h string) string {
			rawExec(t, d, `ALTER TABLE `+h+` ADD COLUMN reviewer text NOT NULL DEFAULT 'x'; ALTER TABLE `+h+` ALTER COLUMN reviewer DROP DEFAULT`)
			return pgtest.URL()
		}, "column reviewer is text NOT NULL without a default"},
		{"a view", func(t *testing.T, d db, h string) string {
			rawExec(t, d, `DROP TABLE `+h)
			d.exec(t, `CREATE VIEW `+h+` AS SELECT 'j'::text AS job_name`)
			t.Cleanup(func() { rawExec(t, d, `DROP VIEW `+h) }) // before the test's table is dropped
			return pgtest.URL()
		}, "it is a view, want a plain table"},
		{"no privileges", func(t *testing.T, d db, h string) string {
			return d.role(t, `GRANT SELECT, INSERT, UPDATE ON TABLE TO ROLE`)
		}, "may not INSERT into and SELECT from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			history := pgx.Identifier{d.table + "_history"}.Sanitize()
			d.runJob(t, "j", 0)
			dsn := tc.breakIt(t, d, history)

			p := lw(t, []string{child("exit:3")}, d.args("--database-url", dsn, "--job", "j", "--", self())...)
			if got := p.Wait(t, 20*time.Second); got != 3 {
				t.Fatalf("run with a broken history exited %d, want the child's 3; logs:\n%s", got, p.Logs)
			}
			warned := historyWarnings(t, p)
			if len(warned) != 1 || !strings.Contains(warned[0], history) || !strings.Contains(warned[0], tc.problem) {
				t.Errorf("warnings %q, want one naming %s and %q", warned, history, tc.problem)
			}
			var exit int
			d.query(t, &exit, `SELECT last_exit_code FROM TABLE WHERE job_name = 'j'`)
			if exit != 3 {
				t.Errorf("lease row's last exit code %d, want 3: the release did not happen", exit)
			}

			code, out := command(t, "status", "--database-url", dsn, "--table", d.table, "--fail-on-error")
			if code != cmdutil.ExitLastRunFailed || !strings.Contains(out, "j ") {
				t.Errorf("status exited %d, want %d with job j: %q", code, cmdutil.ExitLastRunFailed, out)
			}
			code, out = command(t, "check", "--database-url", dsn, "--table", d.table, "--job", "j", "--max-age", "1h")
			if want := "UNKNOWN: run history unavailable: "; code != 3 || !strings.HasPrefix(out, want) || !strings.Contains(out, history) {
				t.Errorf("check exited %d with %q, want 3 and %q naming %s", code, out, want, history)
			}
			h := lw(t, nil, "history", "--database-url", dsn, "--table", d.table)
			if got := h.Wait(t, 10*time.Second); got != cmdutil.ExitUnavailable ||
				!strings.HasPrefix(h.Logs.String(), "leasewrap: run history unavailable: ") || strings.Count(h.Logs.String(), "\n") != 1 {
				t.Errorf("history exited %d, want %d and one line: %s", got, cmdutil.ExitUnavailable, h.Logs)
			}
			if dsn != pgtest.URL() {
				return // the role cannot migrate
			}
			m := lw(t, nil, "migrate", "--database-url", dsn, "--table", d.table)
			if got := m.Wait(t, 10*time.Second); got != cmdutil.ExitUnavailable || !strings.HasPrefix(m.Logs.String(), "leasewrap: history table "+history) ||
				strings.Count(m.Logs.String(), "\n") != 1 {
				t.Errorf("migrate exited %d, want %d and one line naming %s: %s", got, cmdutil.ExitUnavailable, history, m.Logs)
			}
		})
	}
}

// A broken history is counted in the wrapper's metrics.
func TestBrokenHistoryIsCounted(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.runJob(t, "j", 0)
	h := pgx.Identifier{d.table + "_history"}.Sanitize()
	rawExec(t, d, `ALTER TABLE `+h+` ADD COLUMN reviewer text NOT NULL DEFAULT 'x'; ALTER TABLE `+h+` ALTER COLUMN reviewer DROP DEFAULT`)
	p := lw(t, []string{child("ready block")}, d.args("--job", "j", "--http-addr", "127.0.0.1:0", "--", self())...)
	addr := httpAddr(t, p)
	p.Expect(t, "ready")
	if got := scrape(t, addr)[`leasewrap_history_write_failures_total{lease="j"}`]; got != "1" {
		t.Errorf("leasewrap_history_write_failures_total = %q, want 1", got)
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	if got := p.Wait(t, 10*time.Second); got != 143 {
		t.Errorf("exit %d, want 143", got)
	}
}

// A history table broken under running instances (an ALTER while the
// leader runs) loses neither the leader's release nor the standby's take:
// both go through without recording the run, and each says so once. The
// same holds for the slot take of a job with --slots.
func TestHistoryBrokenWhileRunningLosesNoRelease(t *testing.T) {
	t.Parallel()
	for _, slots := range []string{"1", "2"} {
		t.Run("slots "+slots, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			leader := lw(t, []string{child("ready block")}, d.args("--job", "j", "--slots", slots, "--id", "leader", "--", self())...)
			leader.Expect(t, "ready")
			if slots == "2" { // the other slot stays held
				other := lw(t, []string{child("ready block")}, d.args("--job", "j", "--slots", slots, "--id", "other", "--", self())...)
				other.Expect(t, "ready")
			}
			standby := lw(t, []string{child("exit:0")}, d.args("--job", "j", "--slots", slots, "--id", "standby", "--wait", "--", self())...)
			standby.WaitLog(t, "standing by: lease held by another instance")
			rawExec(t, d, `ALTER TABLE `+pgx.Identifier{d.table + "_history"}.Sanitize()+` ALTER COLUMN outcome TYPE integer USING 0`)

			_ = leader.Cmd.Process.Signal(syscall.SIGTERM)
			if got := leader.Wait(t, 10*time.Second); got != 143 {
				t.Fatalf("leader exited %d, want 143; logs:\n%s", got, leader.Logs)
			}
			if got := standby.Wait(t, 20*time.Second); got != 0 {
				t.Fatalf("standby exited %d, want 0; logs:\n%s", got, standby.Logs)
			}
			for name, p := range map[string]*lwtest.Proc{"leader": leader, "standby": standby} {
				if w := historyWarnings(t, p); len(w) != 1 || !strings.Contains(w[0], d.table+"_history") {
					t.Errorf("%s warned %q, want once, naming the history table", name, w)
				}
			}
			if strings.Contains(leader.Logs.String(), "release failed") {
				t.Errorf("the leader's release failed: the lease was left to expire")
			}
			var holder string
			var released bool
			d.query(t, &holder, `SELECT last_holder FROM TABLE WHERE job_name = 'j'`)
			d.query(t, &released, `SELECT released_at IS NOT NULL AND expires_at <= now() FROM TABLE WHERE job_name = 'j'`)
			if holder != "standby" || !released {
				t.Errorf("last holder %q, released %v: want the standby's run, released", holder, released)
			}
		})
	}
}

// rawExec runs sql as it is (db.exec would replace the word TABLE).
func rawExec(t *testing.T, d db, sql string) {
	t.Helper()
	if _, err := d.pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// role creates a login role that may use the schema public, runs grants
// (ROLE and TABLE stand for the role and the lease table) and returns a URL
// that connects as it.
func (d db) role(t *testing.T, grants string) string {
	t.Helper()
	role := fmt.Sprintf("lw_hb_%d_%d", os.Getpid(), roleSeq.Add(1))
	r := pgx.Identifier{role}.Sanitize()
	d.exec(t, `CREATE ROLE `+r+` LOGIN`)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = d.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
		if _, err := d.pool.Exec(ctx, `DROP OWNED BY `+r+`; DROP ROLE `+r); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	d.exec(t, `GRANT USAGE ON SCHEMA public TO `+r)
	d.exec(t, strings.ReplaceAll(grants, "ROLE", r))
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}
