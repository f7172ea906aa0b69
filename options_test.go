package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/lease/inspect"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// parse runs the main command's option parsing in process, with env set.
func parse(t *testing.T, env map[string]string, args ...string) (runOptions, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	own, child, hasChild := splitChild(append([]string{"leasewrap"}, args...))
	var (
		got      runOptions
		parseErr error
	)
	app := &cli.App{Name: "leasewrap", Flags: runFlags(), Metadata: map[string]any{argsKey: own},
		OnUsageError: usageError, ExitErrHandler: func(*cli.Context, error) {}, Writer: io.Discard, ErrWriter: io.Discard,
		Action: func(c *cli.Context) error {
			got, parseErr = parseRunOptions(c, child, hasChild)
			return nil
		}}
	if err := app.Run(own); err != nil {
		return got, err
	}
	return got, parseErr
}

func TestTimingsFollowTheTTL(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want lease.Timings
	}{
		{nil, lease.Timings{TTL: 45 * time.Second, RenewInterval: 15 * time.Second, Grace: 10 * time.Second, RetryInterval: 2 * time.Second}},
		{[]string{"--ttl", "10s"}, lease.Timings{TTL: 10 * time.Second, RenewInterval: 3333 * time.Millisecond, Grace: 2222 * time.Millisecond, RetryInterval: 444 * time.Millisecond}},
		{[]string{"--ttl", "3s"}, lease.Timings{TTL: 3 * time.Second, RenewInterval: time.Second, Grace: 667 * time.Millisecond, RetryInterval: 133 * time.Millisecond}},
		{[]string{"--ttl", "20s", "--grace", "5s"}, lease.Timings{TTL: 20 * time.Second, RenewInterval: 6667 * time.Millisecond, Grace: 5 * time.Second, RetryInterval: 889 * time.Millisecond}},
	} {
		o, err := parse(t, nil, append(append([]string{"--job", "j"}, tc.args...), "--", "true")...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if o.timings != tc.want {
			t.Errorf("%q: timings %+v, want %+v", tc.args, o.timings, tc.want)
		}
	}
}

func TestBadSettingsSayWhatToChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string // every one must be in the message
	}{
		{"all timings at once", nil, []string{"--ttl", "20s", "--renew-interval", "15s"},
			[]string{"--ttl 22s", "--renew-interval 6.667s", "--grace 4.444s", "--retry-interval 889ms"}},
		{"no unit", nil, []string{"--ttl", "8"}, []string{"--ttl", "8s"}},
		{"no unit from the environment", map[string]string{"LEASEWRAP_TTL": "8"}, nil, []string{"LEASEWRAP_TTL", "8s"}},
		{"bad duration from the environment", map[string]string{"LEASEWRAP_GRACE": "soon"}, nil, []string{"LEASEWRAP_GRACE"}},
		{"microseconds", nil, []string{"--ttl", "45000000001ns"}, []string{"whole number of microseconds"}},
		{"too frequent", nil, []string{"--renew-interval", "5ms"}, []string{"--renew-interval", "at least 100ms"}},
		{"ttl too short for its timings", nil, []string{"--ttl", "200ms"}, []string{"--ttl", "100ms"}},
		{"log level", nil, []string{"--log-level", "fatal"}, []string{"--log-level", "trace, debug, info, warn or error"}},
		{"skip code", map[string]string{"LEASEWRAP_SKIP_EXIT_CODE": "300"}, nil, []string{"LEASEWRAP_SKIP_EXIT_CODE", "0-255"}},
		{"wait-timeout alone", nil, []string{"--wait-timeout", "1m"}, []string{"--wait"}},
		{"table", nil, []string{"--table", "a.b.c"}, []string{"--table"}},
		{"outer job inherited", map[string]string{"LEASEWRAP_JOB": "outer", "LEASEWRAP_FENCING_TOKEN": "7"}, nil,
			[]string{"LEASEWRAP_JOB=outer", "--job"}},
		{"unknown flag", nil, []string{"--schedul", "@daily"}, []string{"unknown flag --schedul"}},
		{"bad boolean", nil, []string{"--wait=yes"}, []string{`invalid --wait "yes": want true or false`}},
		{"bad boolean from the environment", map[string]string{"LEASEWRAP_WAIT": "yes"}, nil,
			[]string{`invalid LEASEWRAP_WAIT (--wait) "yes": want true or false`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--job", "j"}
			if _, ok := tc.env["LEASEWRAP_JOB"]; ok {
				args = nil
			}
			_, err := parse(t, tc.env, append(append(args, tc.args...), "--", "true")...)
			code, msg := exitCode(err)
			if code != exitUsage || msg == nil {
				t.Fatalf("got %d %v, want a usage error", code, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg.Error(), w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg.Error(), "\n") {
				t.Errorf("message %q is more than one line", msg)
			}
		})
	}
}

// A TTL too short for a timing that follows it is refused with the floor
// that timing missed and the shortest TTL that works, never with the
// following timing's value rounded to milliseconds (0s for --ttl 1ms).
func TestTooShortTTLSaysTheTruth(t *testing.T) {
	for _, tc := range []struct {
		ttl  string
		want []string
	}{
		{"1ms", []string{"invalid --ttl 1ms", "--renew-interval that follows from it (ttl/3) must be at least 100ms", "use --ttl 299ms or longer"}},
		{"150ms", []string{"invalid --ttl 150ms", "must be at least 100ms", "use --ttl 299ms or longer"}},
		// With every timing set, no others fit a TTL this short.
		{"1ms --renew-interval 100ms --grace 100ms --retry-interval 100ms", []string{"timings do not fit", "use --ttl 1s"}},
	} {
		_, err := parse(t, nil, append(append([]string{"--job", "j", "--ttl"}, strings.Fields(tc.ttl)...), "--", "true")...)
		code, msg := exitCode(err)
		if code != exitUsage || msg == nil {
			t.Fatalf("--ttl %s: got %d %v, want a usage error", tc.ttl, code, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg.Error(), w) {
				t.Errorf("--ttl %s: message %q lacks %q", tc.ttl, msg, w)
			}
		}
		if strings.Contains(msg.Error(), "0s") || strings.Contains(msg.Error(), "positive") {
			t.Errorf("--ttl %s: message %q speaks of a rounded value", tc.ttl, msg)
		}
	}
	// The TTL it suggests is accepted.
	if _, err := parse(t, nil, "--job", "j", "--ttl", "299ms", "--", "true"); err != nil {
		t.Errorf("--ttl 299ms: %v", err)
	}
}

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
	code = run(append([]string{"leasewrap"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestSubcommandsReadOnlyTheirSettings(t *testing.T) {
	code, out, errOut := runInProcess(t, map[string]string{"LEASEWRAP_TTL": "abc", "LEASEWRAP_WAIT": "maybe"}, "version")
	if code != 0 || !strings.HasPrefix(out, "leasewrap ") {
		t.Errorf("version with a bad LEASEWRAP_TTL: exit %d, %q %q", code, out, errOut)
	}
	code, _, errOut = runInProcess(t, nil, "migrate", "--", "rm", "-rf", "/")
	if code != exitUsage || !strings.Contains(errOut, "migrate runs no command") {
		t.Errorf("migrate -- rm -rf /: exit %d, %q", code, errOut)
	}
	code, _, errOut = runInProcess(t, nil, "--ttl", "10s", "status")
	if code != exitUsage || !strings.Contains(errOut, "-ttl") || !strings.Contains(errOut, "leasewrap status --help") {
		t.Errorf("--ttl before status: exit %d, %q; want it refused, pointing to status --help", code, errOut)
	}
}

func TestChildEnvironmentLosesLeasewrapsSettings(t *testing.T) {
	env := childEnv([]string{"PATH=/bin", "LEASEWRAP_DATABASE_URL=postgres://u:pw@db/x", "LEASEWRAP_HTTP_ADDR=:8080",
		"LEASEWRAP_TTL=10s", "LEASEWRAP_JOB=outer", "LEASEWRAP_ID=me", "DATABASE_URL=postgres://app@db/x", "PGPASSWORD=pw"},
		leaseVars{job: "inner", holder: "h1", table: "leader_lease", row: "inner", token: 42, slot: 1})
	want := []string{"PATH=/bin", "DATABASE_URL=postgres://app@db/x", "PGPASSWORD=pw",
		"LEASEWRAP_JOB=inner", "LEASEWRAP_HOLDER=h1", "LEASEWRAP_FENCING_TOKEN=42", "LEASEWRAP_TABLE=leader_lease",
		"LEASEWRAP_SLOT=1", "LEASEWRAP_LEASE=inner"}
	if !slices.Equal(env, want) {
		t.Errorf("child env %q, want %q", env, want)
	}
}

func TestStatusTableEscapesTerminalControls(t *testing.T) {
	var buf bytes.Buffer
	evil := "evil\x1b[2J\rSPOOF\tx"
	err := printStatusTable(&buf, []inspect.JobStatus{{Job: "j", Holder: evil, State: lease.StateHeld, ExpiresIn: time.Second}}, verdicts{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(buf.String(), "\x1b\r") || !strings.Contains(buf.String(), `evil\x1b[2J\rSPOOF\tx`) {
		t.Errorf("status printed %q, want the controls escaped", buf.String())
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (rerun with -update if the change is meant):\n%s", t.Name(), path, got)
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
		golden(t, name, out)
	}
}

func TestStatusGolden(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	code, later := 4, at.Add(90*time.Second)
	by := "host-a"
	jobs := []inspect.JobStatus{
		{Job: "nightly_report", Holder: "host-a", State: lease.StateReleased, FencingToken: 1772330400000000,
			LastStarted: &at, LastFinished: &later, LastExitCode: &code, LastHolder: &by},
		{Job: "scheduler", Holder: "host-b", State: lease.StateHeld, ExpiresIn: 44500 * time.Millisecond,
			FencingToken: 1772330460000000, LastStarted: &later, LastHolder: ptr("host-b")},
		{Job: "never-ran", Holder: "host-c", State: lease.StateExpired, FencingToken: 7},
	}
	v := verdicts{byJob: map[string]inspect.Verdict{
		"nightly_report": {State: inspect.StateFailing, Reason: "nightly_report last run failed, 1m0s ago (exited 4 on host-a)"},
		"scheduler":      {State: inspect.StateHealthy, Reason: "scheduler is running; no run of it has finished yet"},
	}}
	var table, js bytes.Buffer
	if err := printStatusTable(&table, jobs, v); err != nil {
		t.Fatal(err)
	}
	if err := printStatusJSON(&js, jobs, v); err != nil {
		t.Fatal(err)
	}
	golden(t, "status.txt", table.String())
	golden(t, "status.json", js.String())
}

func TestRetryDelayDoublesUpToACap(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 7: 10 * time.Minute, 60: 10 * time.Minute} {
		if got := retryDelay(10*time.Second, n); got != want {
			t.Errorf("retry %d: %s, want %s", n, got, want)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// Output that cannot be written is an I/O error (74), not a usage error.
func TestStatusThatCannotWriteExits74(t *testing.T) {
	d := newDB(t)
	if code := run([]string{"leasewrap", "migrate", "--database-url", pgtest.URL(), "--table", d.table}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("migrate exited %d", code)
	}
	var stderr bytes.Buffer
	code := run([]string{"leasewrap", "status", "--database-url", pgtest.URL(), "--table", d.table},
		failingWriter{}, &stderr)
	if code != exitIOErr || !strings.Contains(stderr.String(), "cannot write status") {
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
	if code != exitNotFound || !strings.Contains(errOut, `"outer"`) {
		t.Errorf("release under a leasewrap: exit %d, %q; want 1, no such job \"outer\"", code, errOut)
	}
	code, out, _ := runInProcess(t, env, "check", "--max-age", "1h", "--database-url", pgtest.URL(), "--table", d.table)
	if code != checkCritical || !strings.Contains(out, "outer") {
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
// --, a program) is refused with the subcommand it is likely a typo of;
// leasewrap alone prints its usage to stderr and exits 64.
func TestHabitsOfTheCommandLine(t *testing.T) {
	env := map[string]string{"LEASEWRAP_JOB": "", "LEASEWRAP_DATABASE_URL": "", "DATABASE_URL": "", "PGHOST": "", "PGDATABASE": "", "PGSERVICE": ""}
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string // each must be in it; "" for empty
	}{
		{[]string{"--version"}, 0, "leasewrap " + version() + "\n", ""},
		{[]string{"--log-level", "debug", "--version"}, 0, "leasewrap " + version() + "\n", ""},
		{[]string{"help"}, 0, "leasewrap [flags] -- COMMAND [ARG...]", ""},
		{[]string{"help", "status"}, 0, "leasewrap status [--job NAME]", ""},
		{[]string{"help", "stauts"}, exitUsage, "", `leasewrap: unknown command "stauts"; did you mean "status"?`},
		{[]string{"stauts"}, exitUsage, "", `leasewrap: unknown command "stauts"; did you mean "status"?`},
		{[]string{"hisotry", "--job", "x"}, exitUsage, "", `did you mean "history"?`},
		{[]string{"--job", "x", "stauts"}, exitUsage, "", `unknown command "stauts"; did you mean "status"?`},
		{[]string{"--job", "x", "no-such-program-xyzzy"}, exitUsage, "", `unknown command "no-such-program-xyzzy": see leasewrap --help`},
		{[]string{"--job", "x", "stauts", "--", "true"}, exitUsage, "", `unknown command "stauts"`},
		// A program, by path or in $PATH, is still the command to run (the
		// refusal that follows is the missing database's), and so is a word
		// after --: not found, 127.
		{[]string{"--job", "x", "true"}, exitUsage, "", "no database named"},
		{[]string{"--job", "x", "./stauts"}, 127, "", `cannot run "./stauts"`},
		{[]string{"--job", "x", "--", "stauts"}, 127, "", `cannot run "stauts"`},
		{nil, exitUsage, "", "usage: leasewrap [flags] -- COMMAND [ARG...]\n"},
	} {
		code, out, errOut := runInProcess(t, env, tc.args...)
		if code != tc.code || tc.stdout == "" && out != "" || !strings.Contains(out, tc.stdout) ||
			tc.stderr == "" && errOut != "" || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("leasewrap %q: exit %d, stdout %.200q, stderr %.200q; want %d, %q, %q", tc.args, code, out, errOut, tc.code, tc.stdout, tc.stderr)
		}
	}
	// The real binary, alone.
	p := lw(t, nil)
	if code := p.Wait(t, 10*time.Second); code != exitUsage || !strings.Contains(p.Logs.String(), "leasewrap help SUBCOMMAND") {
		t.Errorf("leasewrap alone: exit %d, stderr %q; want 64 and the usage", code, p.Logs)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"stauts", "status", 1}, {"status", "status", 0}, {"hisotry", "history", 1}, {"relase", "release", 1}, {"foo", "status", 6}, {"", "help", 4}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
