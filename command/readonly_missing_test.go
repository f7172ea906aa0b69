package command

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// A lease table that does not exist (a mistyped --table) is said in one
// line naming it, with exit 69, by status, history, release and the
// exporter (check answers UNKNOWN), and none of them creates anything: no
// table, no history table, no function.
func TestReadOnlyCommandsOnAMissingTable(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	schema := d.table + "_s"
	s := pgx.Identifier{schema}.Sanitize()
	rawExec(t, d, `CREATE SCHEMA `+s)
	t.Cleanup(func() { rawExec(t, d, `DROP SCHEMA `+s+` CASCADE`) })
	table := schema + ".leader_leas"
	quoted := pgx.Identifier{schema, "leader_leas"}.Sanitize()
	objects := func() (n int) {
		d.query(t, &n, `SELECT (SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = $1::regnamespace)
  + (SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = $1::regnamespace)`, s)
		return n
	}
	if n := objects(); n != 0 {
		t.Fatalf("%d objects in a new schema", n)
	}
	store := []string{"--database-url", pgtest.URL(), "--table", table}
	for _, args := range [][]string{
		{"status"},
		{"status", "--fail-on-error"},
		{"status", "--job", "j", "--json"},
		{"history"},
		{"history", "--job", "j", "--timeline"},
		{"release", "--job", "j", "--id", "someone"},
		{"release", "--job", "j", "--force", "--yes"},
		{"exporter", "--http-addr", "127.0.0.1:0"},
	} {
		p := lw(t, nil, append(args, store...)...)
		got := p.Wait(t, 15*time.Second)
		logs := p.Logs.String()
		if got != cmdutil.ExitUnavailable || strings.Count(logs, "\n") != 1 || !strings.Contains(logs, "no lease table "+quoted) {
			t.Errorf("%s exited %d, want %d and one line naming %s: %q", args, got, cmdutil.ExitUnavailable, quoted, logs)
		}
	}
	code, out := command(t, append([]string{"check", "--job", "j", "--max-age", "1h"}, store...)...)
	if code != cmdutil.CheckUnknown || !strings.HasPrefix(out, "UNKNOWN: no lease table "+quoted) {
		t.Errorf("check exited %d with %q, want %d naming %s", code, out, cmdutil.CheckUnknown, quoted)
	}
	if n := objects(); n != 0 {
		t.Errorf("read-only commands created %d objects in schema %s", n, s)
	}
	var exists bool
	d.query(t, &exists, `SELECT to_regclass($1) IS NOT NULL OR to_regclass($2) IS NOT NULL`, quoted,
		pgx.Identifier{schema, "leader_leas_history"}.Sanitize())
	if exists {
		t.Error("a read-only command created the lease or history table")
	}
}

// The read-only commands need nothing but SELECT: as a role that may do
// nothing else, in read-only transactions (where any write or DDL fails),
// status, history, check, the exporter and release's look-up all answer,
// and the tables, their indexes and the fencing function are as they were.
func TestReadOnlyCommandsNeedOnlySelect(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.runJob(t, "nightly", 0)
	objects := func() (n int) {
		d.query(t, &n, `SELECT (SELECT count(*) FROM pg_catalog.pg_class WHERE relname LIKE $1 || '%')
  + (SELECT count(*) FROM pg_catalog.pg_proc WHERE proname = 'leasewrap_check' AND pronamespace = 'public'::regnamespace)`, d.table)
		return n
	}
	before := objects()
	dsn := d.readOnlyRole(t)
	store := []string{"--database-url", dsn, "--table", d.table}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"status"}, 0, "nightly"},
		{[]string{"status", "--job", "nightly", "--json"}, 0, `"job": "nightly"`},
		{[]string{"history"}, 0, "nightly"},
		{[]string{"history", "--job", "nightly", "--timeline"}, 0, "nightly"},
		{[]string{"check", "--job", "nightly", "--max-age", "1h"}, cmdutil.CheckOK, "OK"},
		// The look-up finds the lease free: nothing to release, nothing written.
		{[]string{"release", "--job", "nightly", "--id", "runner"}, cmdutil.ExitNotFound, ""},
	} {
		code, out := command(t, append(tc.args, store...)...)
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("%s as a SELECT-only role exited %d with %q, want %d and %q", tc.args, code, out, tc.code, tc.out)
		}
	}
	_, addr := d.exporter(t, dsn)
	waitSeries(t, addr, map[string]string{"leasewrap_exporter_up": "1", `leasewrap_job_last_exit_code{lease="nightly"}`: "0"})
	if after := objects(); after != before {
		t.Errorf("read-only commands changed the objects of %s: %d before, %d after", d.table, before, after)
	}
}
