package wrap

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
	"github.com/urfave/cli/v2"
)

// parse runs the main command's option parsing in process, with env set.
func parse(t *testing.T, env map[string]string, args ...string) (runOptions, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	own, child, hasChild := append([]string{"leasewrap"}, args...), []string(nil), false
	if i := slices.Index(own, "--"); i >= 0 {
		own, child, hasChild = own[:i], own[i+1:], true
	}
	var (
		got      runOptions
		parseErr error
	)
	app := &cli.App{Name: "leasewrap", Flags: RunFlags(), Metadata: map[string]any{cmdutil.ArgsKey: own},
		OnUsageError: cmdutil.UsageError, ExitErrHandler: func(*cli.Context, error) {}, Writer: io.Discard, ErrWriter: io.Discard,
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
		// A crontab line does not stand by for its database.
		{"wait-timeout with --once", nil, []string{"--wait-timeout", "1m", "--schedule", "@every 1m", "--once"},
			[]string{"--wait-timeout 1m0s needs --wait, or --schedule without --once"}},
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
			code, msg := cmdutil.ExitCode(err)
			if code != cmdutil.ExitUsage || msg == nil {
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
		code, msg := cmdutil.ExitCode(err)
		if code != cmdutil.ExitUsage || msg == nil {
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

func TestRetryDelayDoublesUpToACap(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 7: 10 * time.Minute, 60: 10 * time.Minute} {
		if got := retryDelay(10*time.Second, n); got != want {
			t.Errorf("retry %d: %s, want %s", n, got, want)
		}
	}
}

// A schedule refuses, with one line and status 64, what it leaves without
// meaning or cannot combine with, and bad schedule settings.
func TestScheduleRefusesSettingsItCannotUse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--schedule", "@every 2s", "--wait"}, nil, "--wait means nothing with --schedule"},
		{[]string{"--schedule", "@every 2s", "--hold-for", "1m"}, nil, "--hold-for means nothing with --schedule"},
		{[]string{"--schedule", "@every 2s", "--slots", "2"}, nil, "--slots cannot be combined with --schedule"},
		{[]string{"--once"}, nil, "--once needs --schedule"},
		{[]string{"--catch-up", "all"}, nil, "--catch-up needs --schedule"},
		{[]string{"--schedule", "61 * * * *"}, nil, "invalid --schedule"},
		{[]string{"--schedule", "0 2 * * *", "--timezone", "Mars/Olympus"}, nil, "unknown time zone"},
		{[]string{"--schedule", "0 2 * * *", "--catch-up", "some"}, nil, `catch-up policy "some" is not one of none, latest or all`},
		{[]string{"--schedule", "0 2 * * *", "--catch-up-window", "0s"}, nil, "--catch-up-window 0s: must be positive"},
		{nil, map[string]string{"LEASEWRAP_SCHEDULE": "@every 0s"}, "invalid LEASEWRAP_SCHEDULE (--schedule)"},
		{nil, map[string]string{"LEASEWRAP_SCHEDULE": "@daily", "LEASEWRAP_CATCH_UP": "x"}, "invalid LEASEWRAP_CATCH_UP (--catch-up)"},
	} {
		_, err := parse(t, tc.env, append(append([]string{"--job", "j"}, tc.args...), "--", "true")...)
		var ee *cmdutil.ExitError
		if !errors.As(err, &ee) || ee.Code != cmdutil.ExitUsage || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q %v: got %v, want one line with status 64 containing %q", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestScheduleSettingsAreRead(t *testing.T) {
	o, err := parse(t, map[string]string{"LEASEWRAP_TIMEZONE": "Europe/Berlin", "LEASEWRAP_CATCH_UP_WINDOW": "2h"},
		"--job", "j", "--schedule", "30 2 * * *", "--catch-up", "none", "--once", "--", "true")
	if err != nil {
		t.Fatal(err)
	}
	if o.sched.Spec() != "CRON_TZ=Europe/Berlin 30 2 * * *" || !o.once || o.catchUp.Policy != schedule.CatchUpNone ||
		o.catchUp.Window != 2*time.Hour {
		t.Errorf("got %q once=%v %+v", o.sched.Spec(), o.once, o.catchUp)
	}
}
