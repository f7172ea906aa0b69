package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
		if got != exitUnavailable || strings.Count(logs, "\n") != 1 || !strings.Contains(logs, "no lease table "+quoted) {
			t.Errorf("%s exited %d, want %d and one line naming %s: %q", args, got, exitUnavailable, quoted, logs)
		}
	}
	code, out := command(t, append([]string{"check", "--job", "j", "--max-age", "1h"}, store...)...)
	if code != checkUnknown || !strings.HasPrefix(out, "UNKNOWN: no lease table "+quoted) {
		t.Errorf("check exited %d with %q, want %d naming %s", code, out, checkUnknown, quoted)
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
