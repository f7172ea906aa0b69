package command

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// Input that no lease should be taken with is refused with 64 and one line
// naming the flag and the limit, before the database is touched: neither the
// lease table nor anything in a system schema is created.
func TestBadNamesAndDurationsAreRefusedBeforeTheDatabase(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for _, tc := range []struct {
		name  string
		args  []string
		table string // where a table would have been created, if not d.table
		want  string // in the one line
	}{
		{"id not UTF-8", []string{"--id", "web\xff1"}, "", "--id"},
		{"id too long", []string{"--id", strings.Repeat("i", 201)}, "", "1-200 bytes"},
		{"id with ESC", []string{"--id", "web\x1b[2J"}, "", "--id"},
		{"job with #", []string{"--job", "x#2"}, "", "'#'"},
		{"job with CR", []string{"--job", "x\rfake"}, "", "U+000D"},
		{"job with CSI", []string{"--job", "x\u009bfake"}, "", "U+009B"},
		{"job with RLO", []string{"--job", "x\u202efake"}, "", "U+202E"},
		{"job too long", []string{"--job", strings.Repeat("j", 100_000)}, "", "1-200 bytes"},
		{"information_schema", []string{"--table", "information_schema." + d.table}, "information_schema." + d.table, "belongs to PostgreSQL"},
		{"pg_catalog", []string{"--table", "pg_catalog." + d.table}, "pg_catalog." + d.table, "belongs to PostgreSQL"},
		{"pg_toast", []string{"--table", "pg_toast." + d.table}, "pg_toast." + d.table, "belongs to PostgreSQL"},
		{"table with ESC", []string{"--table", "t\x1b[2J"}, "t\x1b[2J", "printable UTF-8"},
		{"ttl NaN", []string{"--ttl", "NaN"}, "", "want a duration such as 30s"},
		{"ttl huge", []string{"--ttl", "2562047h"}, "", "--ttl 2562047h: must be at most 24h"},
		{"grace huge", []string{"--grace", "2562047h"}, "", "--grace 2562047h: must be at most 24h"},
		{"max-runtime huge", []string{"--max-runtime", "2562047h"}, "", "at most 8760h"},
		{"retry-delay past its cap", []string{"--retry-delay", "1h"}, "", "at most 10m"},
		{"history-keep huge", []string{"--history-keep", "2562047h"}, "", "at most 87600h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--database-url", pgtest.URL(), "--table", d.table, "--job", "j"}, tc.args...)
			p := lw(t, nil, append(args, "--", "true")...)
			if got := p.Wait(t, 10*time.Second); got != 64 {
				t.Errorf("exit %d, want 64", got)
			}
			out := p.Logs.String()
			if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "leasewrap: ") || !strings.Contains(out, tc.want) {
				t.Errorf("want one line with %q, got %q", tc.want, out)
			}
			if strings.ContainsAny(out, "\x1b\r\u009b\u202e") {
				t.Errorf("the refusal prints the control character raw: %q", out)
			}
			table := tc.table
			if table == "" {
				table = d.table
			}
			var exists bool
			if err := d.pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL",
				pgx.Identifier(strings.Split(table, ".")).Sanitize()).Scan(&exists); err != nil {
				t.Fatal(err)
			}
			if exists && tc.table != "" {
				t.Errorf("%s was created", table)
				parts := strings.Split(table, ".")
				d.exec(t, "DROP TABLE "+pgx.Identifier(parts).Sanitize()+", "+
					pgx.Identifier(strings.Split(table+"_history", ".")).Sanitize())
				if len(parts) == 2 { // not the shared public one
					d.exec(t, "DROP FUNCTION IF EXISTS "+pgx.Identifier{parts[0]}.Sanitize()+".leasewrap_check(text, bigint, text)")
				}
			} else if exists {
				t.Errorf("%s was created", table)
			}
		})
	}
}

// The limit is on the bytes, not a guess: the longest id and job pass.
func TestLongestNamesAreAccepted(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	p := lw(t, nil, d.args("--id", strings.Repeat("i", 200), "--job", strings.Repeat("é", 100), "--", "true")...)
	if got := p.Wait(t, 15*time.Second); got != 0 {
		t.Errorf("exit %d, want 0", got)
	}
}
