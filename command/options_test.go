package command

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/command/version"
	"github.com/redbite/leasewrap/internal/golden"
	"github.com/redbite/leasewrap/internal/pgtest"
)

func TestSubcommandMayFollowFlags(t *testing.T) {
	cmds := commands()
	for _, tc := range []struct {
		args []string
		sub  string
		want []string
	}{
		{[]string{"--table", "T", "status", "--job", "J"}, "status", []string{"status", "--table", "T", "--job", "J"}},
		{[]string{"--database-url=x", "migrate"}, "migrate", []string{"migrate", "--database-url=x"}},
		{[]string{"--wait", "status"}, "status", []string{"status", "--wait"}},
		{[]string{"--job", "status", "run-me"}, "", []string{"--job", "status", "run-me"}},
		{[]string{"--job", "x", "./report"}, "", []string{"--job", "x", "./report"}},
		{[]string{"version"}, "version", []string{"version"}},
	} {
		got, sub := subcommandFirst(append([]string{"leasewrap"}, tc.args...), cmds)
		name := ""
		if sub != nil {
			name = sub.Name
		}
		if name != tc.sub || !slices.Equal(got[1:], tc.want) {
			t.Errorf("%q: subcommand %q with %q, want %q with %q", tc.args, name, got[1:], tc.sub, tc.want)
		}
	}
}

// runInProcess runs leasewrap's command line in this process.
func runInProcess(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	code = Run(append([]string{"leasewrap"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestSubcommandsReadOnlyTheirSettings(t *testing.T) {
	code, out, errOut := runInProcess(t, map[string]string{"LEASEWRAP_TTL": "abc", "LEASEWRAP_WAIT": "maybe"}, "version")
	if code != 0 || !strings.HasPrefix(out, "leasewrap ") {
		t.Errorf("version with a bad LEASEWRAP_TTL: exit %d, %q %q", code, out, errOut)
	}
	code, _, errOut = runInProcess(t, nil, "migrate", "--", "rm", "-rf", "/")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut, "migrate runs no command") {
		t.Errorf("migrate -- rm -rf /: exit %d, %q", code, errOut)
	}
	code, _, errOut = runInProcess(t, nil, "--ttl", "10s", "status")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut, "-ttl") || !strings.Contains(errOut, "leasewrap status --help") {
		t.Errorf("--ttl before status: exit %d, %q; want it refused, pointing to status --help", code, errOut)
	}
}

func TestHelpGolden(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"status", "--help"}, {"history", "--help"}, {"check", "--help"}, {"exporter", "--help"},
		{"release", "--help"}, {"trigger", "--help"}, {"pause", "--help"}, {"resume", "--help"}, {"reschedule", "--help"},
		{"migrate", "--help"}, {"version", "--help"}} {
		code, out, errOut := runInProcess(t, nil, args...)
		if code != 0 || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		name := "help-root.txt"
		if args[0] != "--help" {
			name = "help-" + args[0] + ".txt"
		}
		golden.Check(t, name, out)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// Output that cannot be written is an I/O error (74), not a usage error.
func TestStatusThatCannotWriteExits74(t *testing.T) {
	d := newDB(t)
	if code := Run([]string{"leasewrap", "migrate", "--database-url", pgtest.URL(), "--table", d.table}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("migrate exited %d", code)
	}
	var stderr bytes.Buffer
	code := Run([]string{"leasewrap", "status", "--database-url", pgtest.URL(), "--table", d.table},
		failingWriter{}, &stderr)
	if code != cmdutil.ExitIOErr || !strings.Contains(stderr.String(), "cannot write status") {
		t.Errorf("exit %d, %q; want 74 and the reason", code, stderr.String())
	}
}

// Inside a wrapped command, LEASEWRAP_JOB names the outer job: the main
// command refuses to take it for its own (see TestBadSettingsSayWhatToChange),
// but release and check of that job are what a command may ask.
func TestReleaseAndCheckUseTheOuterJob(t *testing.T) {
	d := newDB(t)
	if code, _, errOut := runInProcess(t, nil, "migrate", "--database-url", pgtest.URL(), "--table", d.table); code != 0 {
		t.Fatalf("migrate exited %d: %s", code, errOut)
	}
	env := map[string]string{"LEASEWRAP_JOB": "outer", "LEASEWRAP_FENCING_TOKEN": "7"}
	code, _, errOut := runInProcess(t, env, "release", "--id", "w1", "--database-url", pgtest.URL(), "--table", d.table)
	if code != cmdutil.ExitNotFound || !strings.Contains(errOut, `"outer"`) {
		t.Errorf("release under a leasewrap: exit %d, %q; want 1, no such job \"outer\"", code, errOut)
	}
	code, out, _ := runInProcess(t, env, "check", "--max-age", "1h", "--database-url", pgtest.URL(), "--table", d.table)
	if code != cmdutil.CheckCritical || !strings.Contains(out, "outer") {
		t.Errorf("check under a leasewrap: exit %d, %q; want CRITICAL about outer", code, out)
	}
}

// status and history narrowed to one job by LEASEWRAP_JOB (an environment
// file sourced for a unit sets it) say so on stderr; an empty --job shows every
// job, and a --job given on the command line needs no word.
func TestStatusAndHistorySayAJobFromTheEnvironment(t *testing.T) {
	d := newDB(t)
	for _, job := range []string{"job_alpha", "job_beta"} {
		// The real binary: the main command in this process would make it
		// the reaper of every other test's leasewrap.
		p := lw(t, nil, d.args("--job", job, "--", "true")...)
		if code := p.Wait(t, 20*time.Second); code != 0 {
			t.Fatalf("run of %s exited %d", job, code)
		}
	}
	const said = `showing job "job_alpha" only, as LEASEWRAP_JOB says; --job '' shows every job`
	for _, tc := range []struct {
		args      []string
		say, both bool
	}{
		{[]string{"status"}, true, false},
		{[]string{"history"}, true, false},
		{[]string{"status", "--json"}, true, false},
		{[]string{"status", "--job", ""}, false, true},
		{[]string{"history", "--job="}, false, true},
		{[]string{"status", "--job", "job_alpha"}, false, false},
	} {
		args := append(tc.args, "--database-url", pgtest.URL(), "--table", d.table)
		code, out, errOut := runInProcess(t, map[string]string{"LEASEWRAP_JOB": "job_alpha"}, args...)
		if code != 0 {
			t.Errorf("%q: exit %d: %s", tc.args, code, errOut)
		}
		if got := strings.Contains(errOut, said); got != tc.say {
			t.Errorf("%q with LEASEWRAP_JOB=job_alpha: stderr %q, said %v, want %v", tc.args, errOut, got, tc.say)
		}
		if got := strings.Contains(out, "job_beta") && strings.Contains(out, "job_alpha"); got != tc.both {
			t.Errorf("%q with LEASEWRAP_JOB=job_alpha: both jobs shown %v, want %v: %s", tc.args, got, tc.both, out)
		}
	}
}

// The words people try first do what they do in git and kubectl: help,
// help SUBCOMMAND and --version; a word that is no subcommand (nor, without
// --, a program) is refused with the subcommand it is likely a typo of, and
// an unknown flag with the flag; leasewrap alone prints its usage to stderr
// and exits 64.
func TestHabitsOfTheCommandLine(t *testing.T) {
	env := map[string]string{"LEASEWRAP_JOB": "", "LEASEWRAP_DATABASE_URL": "", "DATABASE_URL": "", "PGHOST": "", "PGDATABASE": "", "PGSERVICE": ""}
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string // each must be in it; "" for empty
	}{
		{[]string{"--version"}, 0, "leasewrap " + version.String() + "\n", ""},
		{[]string{"--log-level", "debug", "--version"}, 0, "leasewrap " + version.String() + "\n", ""},
		{[]string{"help"}, 0, "leasewrap [flags] -- COMMAND [ARG...]", ""},
		{[]string{"help", "status"}, 0, "leasewrap status [--job NAME]", ""},
		{[]string{"help", "stauts"}, cmdutil.ExitUsage, "", `leasewrap: unknown command "stauts"; did you mean "status"?`},
		{[]string{"stauts"}, cmdutil.ExitUsage, "", `leasewrap: unknown command "stauts"; did you mean "status"?`},
		{[]string{"hisotry", "--job", "x"}, cmdutil.ExitUsage, "", `did you mean "history"?`},
		{[]string{"--job", "x", "stauts"}, cmdutil.ExitUsage, "", `unknown command "stauts"; did you mean "status"?`},
		{[]string{"--job", "x", "no-such-program-xyzzy"}, cmdutil.ExitUsage, "", `unknown command "no-such-program-xyzzy": see leasewrap --help`},
		{[]string{"--job", "x", "--hold", "5m", "--", "true"}, cmdutil.ExitUsage, "", "leasewrap: unknown flag --hold; did you mean --hold-for? (see leasewrap --help)\n"},
		{[]string{"status", "--jbo", "x"}, cmdutil.ExitUsage, "", "leasewrap: unknown flag --jbo; did you mean --job? (see leasewrap status --help)\n"},
		{[]string{"--job", "x", "--xyzzy", "--", "true"}, cmdutil.ExitUsage, "", "leasewrap: unknown flag --xyzzy (see leasewrap --help)\n"},
		{[]string{"--job", "x", "stauts", "--", "true"}, cmdutil.ExitUsage, "", `unknown command "stauts"`},
		// A program, by path or in $PATH, is still the command to run (the
		// refusal that follows is the missing database's), and so is a word
		// after --: not found, 127.
		{[]string{"--job", "x", "true"}, cmdutil.ExitUsage, "", "no database named"},
		{[]string{"--job", "x", "./stauts"}, 127, "", `cannot run "./stauts"`},
		{[]string{"--job", "x", "--", "stauts"}, 127, "", `cannot run "stauts"`},
		{nil, cmdutil.ExitUsage, "", "usage: leasewrap [flags] -- COMMAND [ARG...]\n"},
	} {
		code, out, errOut := runInProcess(t, env, tc.args...)
		if code != tc.code || tc.stdout == "" && out != "" || !strings.Contains(out, tc.stdout) ||
			tc.stderr == "" && errOut != "" || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("leasewrap %q: exit %d, stdout %.200q, stderr %.200q; want %d, %q, %q", tc.args, code, out, errOut, tc.code, tc.stdout, tc.stderr)
		}
	}
	// The real binary, alone.
	p := lw(t, nil)
	if code := p.Wait(t, 10*time.Second); code != cmdutil.ExitUsage || !strings.Contains(p.Logs.String(), "leasewrap help SUBCOMMAND") {
		t.Errorf("leasewrap alone: exit %d, stderr %q; want 64 and the usage", code, p.Logs)
	}
}
