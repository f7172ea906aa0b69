package command

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// A job name or holder id with white space at either end is another name
// ("nightly_report" paused, " nightly_report" would run): every command
// refuses it from the command line and from the environment with 64 and one
// line naming the setting and the character (check, a monitoring plugin,
// with UNKNOWN: 3 and its one line on stdout), before the database is
// touched.
func TestNamesWithWhiteSpaceAtAnEndAreRefused(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	const (
		leading  = `a job name may not begin with white space (U+0020 SPACE); remove it`
		trailing = `a job name may not end with white space (U+0009 CHARACTER TABULATION); remove it`
		idNBSP   = `a holder id may not begin with white space (U+00A0 NO-BREAK SPACE); remove it`
		idEnd    = `a holder id may not end with white space (U+0020 SPACE); remove it`
	)
	for _, tc := range []struct {
		name string
		args []string // after the store flags
		env  []string
		want string // the whole line after "leasewrap: "
	}{
		{"run --job", []string{"--job", " nightly_report", "--", "true"}, nil, `--job " nightly_report": ` + leading},
		{"run LEASEWRAP_JOB", []string{"--", "true"}, []string{"LEASEWRAP_JOB= nightly_report"}, `LEASEWRAP_JOB (--job) " nightly_report": ` + leading},
		{"run --job trailing tab", []string{"--job", "nightly_report\t", "--", "true"}, nil, `--job "nightly_report\t": ` + trailing},
		{"run --id", []string{"--job", "nightly_report", "--id", "\u00a0web-1", "--", "true"}, nil, `--id "\u00a0web-1": ` + idNBSP},
		{"run LEASEWRAP_ID", []string{"--job", "nightly_report", "--", "true"}, []string{"LEASEWRAP_ID=web-1 "}, `LEASEWRAP_ID (--id) "web-1 ": ` + idEnd},
		{"status --job", []string{"status", "--job", " nightly_report"}, nil, `--job " nightly_report": ` + leading},
		{"status LEASEWRAP_JOB", []string{"status"}, []string{"LEASEWRAP_JOB= nightly_report"}, `LEASEWRAP_JOB (--job) " nightly_report": ` + leading},
		{"history --job", []string{"history", "--job", " nightly_report"}, nil, `--job " nightly_report": ` + leading},
		{"history LEASEWRAP_JOB", []string{"history"}, []string{"LEASEWRAP_JOB= nightly_report"}, `LEASEWRAP_JOB (--job) " nightly_report": ` + leading},
		{"check --job", []string{"check", "--job", " nightly_report", "--max-age", "1h"}, nil, `--job " nightly_report": ` + leading},
		{"check LEASEWRAP_JOB", []string{"check", "--max-age", "1h"}, []string{"LEASEWRAP_JOB= nightly_report"}, `LEASEWRAP_JOB (--job) " nightly_report": ` + leading},
		{"release --job", []string{"release", "--job", " nightly_report", "--force", "--yes"}, nil, `--job " nightly_report": ` + leading},
		{"release LEASEWRAP_JOB", []string{"release", "--force", "--yes"}, []string{"LEASEWRAP_JOB= nightly_report"}, `LEASEWRAP_JOB (--job) " nightly_report": ` + leading},
		{"release --id", []string{"release", "--job", "nightly_report", "--id", "\u00a0web-1"}, nil, `--id "\u00a0web-1": ` + idNBSP},
		{"release LEASEWRAP_ID", []string{"release", "--job", "nightly_report"}, []string{"LEASEWRAP_ID=web-1 "}, `LEASEWRAP_ID (--id) "web-1 ": ` + idEnd},
		{"release --to", []string{"release", "--job", "nightly_report", "--to", "web-1 "}, nil, `--to "web-1 ": ` + idEnd},
		{"trigger --job", []string{"trigger", "--job", " nightly_report", "--no-wait"}, nil, `--job " nightly_report": ` + leading},
		{"trigger LEASEWRAP_JOB", []string{"trigger", "--no-wait"}, []string{"LEASEWRAP_JOB= nightly_report"}, `LEASEWRAP_JOB (--job) " nightly_report": ` + leading},
		{"trigger --id", []string{"trigger", "--job", "nightly_report", "--id", "web-1 ", "--no-wait"}, nil, `--id "web-1 ": ` + idEnd},
		{"trigger LEASEWRAP_ID", []string{"trigger", "--job", "nightly_report", "--no-wait"}, []string{"LEASEWRAP_ID=web-1 "}, `LEASEWRAP_ID (--id) "web-1 ": ` + idEnd},
		{"pause --job", []string{"pause", "--job", " nightly_report"}, nil, `--job " nightly_report": ` + leading},
		{"pause LEASEWRAP_JOB", []string{"pause"}, []string{"LEASEWRAP_JOB= nightly_report"}, `LEASEWRAP_JOB (--job) " nightly_report": ` + leading},
		{"pause --id", []string{"pause", "--job", "nightly_report", "--id", "web-1 "}, nil, `--id "web-1 ": ` + idEnd},
		{"pause LEASEWRAP_ID", []string{"pause", "--job", "nightly_report"}, []string{"LEASEWRAP_ID=web-1 "}, `LEASEWRAP_ID (--id) "web-1 ": ` + idEnd},
		{"resume --job", []string{"resume", "--job", " nightly_report"}, nil, `--job " nightly_report": ` + leading},
		{"resume LEASEWRAP_JOB", []string{"resume"}, []string{"LEASEWRAP_JOB= nightly_report"}, `LEASEWRAP_JOB (--job) " nightly_report": ` + leading},
		{"reschedule --job", []string{"reschedule", "--job", " nightly_report", "--schedule", "@daily"}, nil, `--job " nightly_report": ` + leading},
		{"reschedule LEASEWRAP_JOB", []string{"reschedule", "--schedule", "@daily"}, []string{"LEASEWRAP_JOB= nightly_report"}, `LEASEWRAP_JOB (--job) " nightly_report": ` + leading},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			store := []string{"--database-url", pgtest.URL(), "--table", d.table}
			if args[0] == "--job" || args[0] == "--" {
				args = append(store, args...)
			} else {
				args = append(append([]string{args[0]}, store...), args[1:]...)
			}
			p := lw(t, tc.env, args...)
			code, want, got := 64, "leasewrap: "+tc.want+"\n", func() string { return p.Logs.String() }
			if args[0] == "check" {
				code, want, got = 3, "UNKNOWN: "+tc.want+"\n", func() string { return stdoutOf(p) }
			}
			if exit := p.Wait(t, 10*time.Second); exit != code {
				t.Errorf("exit %d, want %d", exit, code)
			}
			if got := got(); got != want {
				t.Errorf("got  %q\nwant %q", got, want)
			}
			var exists bool
			if err := d.pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL",
				pgx.Identifier{d.table}.Sanitize()).Scan(&exists); err != nil {
				t.Fatal(err)
			}
			if exists {
				t.Errorf("%s was created: the refusal came after the database was written", d.table)
			}
		})
	}
}

// stdoutOf is all p wrote on stdout, once it has exited.
func stdoutOf(p *lwtest.Proc) string {
	var out strings.Builder
	for l := range p.Lines {
		out.WriteString(l + "\n")
	}
	return out.String()
}
