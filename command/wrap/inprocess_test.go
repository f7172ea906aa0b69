package wrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// runInProcess runs leasewrap with args through command.Run, on table,
// with timings short enough for tests and JSON logs, and returns its exit
// status and log lines. Its last line may be the one that reports an
// error ("leasewrap: ..."), kept as a line with that message.
func runInProcess(t *testing.T, table string, args ...string) (int, []map[string]any) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	argv := append([]string{"leasewrap", "--database-url", pgtest.URL(), "--table", table, "--log-format", "json",
		"--ttl", "6s", "--renew-interval", "300ms", "--grace", "500ms", "--retry-interval", "100ms"}, args...)
	code := command.Run(argv, &stdout, &stderr)
	var lines []map[string]any
	all := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	for i, l := range all {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			if i < len(all)-1 || !strings.HasPrefix(l, "leasewrap: ") {
				t.Fatalf("stderr line not JSON: %q", l)
			}
			e = map[string]any{"message": l}
		}
		lines = append(lines, e)
	}
	return code, lines
}

// count is how many of lines say msg.
func count(lines []map[string]any, msg string) int {
	n := 0
	for _, e := range lines {
		if e["message"] == msg {
			n++
		}
	}
	return n
}

// The run loop's decisions (the exit status it gives, the attempts it
// makes, why it skips) run here in this test's own process through
// command.Run, with a real database and a real command, no binary built.
// This package's tests spawn nothing else: the wrapper makes the process
// a child subreaper that reaps every child.
func TestRunLoopInProcess(t *testing.T) {
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	run := func(t *testing.T, args ...string) (int, []map[string]any) { return runInProcess(t, table, args...) }
	t.Run("exit status passed through", func(t *testing.T) {
		code, lines := run(t, "--job", "ip-exit", "--", "sh", "-c", "exit 42")
		if code != 42 {
			t.Errorf("exit %d, want the command's 42", code)
		}
		if count(lines, "released") != 1 {
			t.Errorf("want one 'released' line, got %v", lines)
		}
	})
	t.Run("signal as 128+n", func(t *testing.T) {
		if code, _ := run(t, "--job", "ip-signal", "--", "sh", "-c", "kill -TERM $$"); code != 143 {
			t.Errorf("exit %d, want 143 for a command ended by SIGTERM", code)
		}
	})
	t.Run("max runtime is 124", func(t *testing.T) {
		code, _ := run(t, "--job", "ip-timeout", "--max-runtime", "300ms", "--", "sleep", "30")
		if code != 124 {
			t.Errorf("exit %d, want 124 for a command stopped by --max-runtime", code)
		}
	})
	t.Run("retries", func(t *testing.T) {
		code, lines := run(t, "--job", "ip-retry", "--retries", "2", "--retry-delay", "10ms", "--", "sh", "-c", "exit 3")
		if code != 3 {
			t.Errorf("exit %d, want the last attempt's 3", code)
		}
		if n := count(lines, "the command failed; running it again, keeping the lease"); n != 2 {
			t.Errorf("%d retry lines, want 2 for --retries 2", n)
		}
	})
	t.Run("skip while held", func(t *testing.T) {
		other, err := lease.New(pool, lease.WithTable(table), lease.WithHolder("other-host"))
		if err != nil {
			t.Fatal(err)
		}
		l, err := other.TryAcquire(context.Background(), "ip-held")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(context.Background(), nil)
		code, lines := run(t, "--job", "ip-held", "--skip-exit-code", "7", "--", "sh", "-c", "echo RAN")
		if code != 7 {
			t.Errorf("exit %d, want --skip-exit-code 7", code)
		}
		if n := count(lines, "skipped: lease held by another instance"); n != 1 {
			t.Errorf("want one skip line naming another instance, got %v", lines)
		}
	})
}

// The scheduler loop's decisions for a crontab line (--once) run here in
// process too: the time just due runs once with the command's exit status
// passed through, a line whose schedule is not the job's is refused, and
// a line fired far from any time of its schedule runs nothing.
func TestSchedulerLoopInProcess(t *testing.T) {
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	run := func(t *testing.T, args ...string) (int, []map[string]any) { return runInProcess(t, table, args...) }

	t.Run("the time just due runs, its exit status passed through", func(t *testing.T) {
		// @every 2s: the latest time is under its one second's lateness
		// bound, or the next is within its early bound: one runs.
		code, lines := run(t, "--job", "ip-once", "--schedule", "@every 2s", "--once", "--", "sh", "-c", "exit 5")
		if code != 5 {
			t.Errorf("exit %d, want the scheduled run's 5", code)
		}
		if count(lines, "scheduler started") != 1 || count(lines, "released") != 1 {
			t.Errorf("want one start and one release, got %v", lines)
		}
		if n := count(lines, "the command failed; running it again, keeping the lease"); n != 0 {
			t.Errorf("%d retries without --retries", n)
		}
	})
	t.Run("another schedule is a usage error", func(t *testing.T) {
		code, lines := run(t, "--job", "ip-once", "--schedule", "@every 3s", "--once", "--", "true")
		if code != 64 {
			t.Errorf("exit %d, want 64 for a --once line whose schedule is not the job's; %v", code, lines)
		}
		last, _ := lines[len(lines)-1]["message"].(string)
		if !strings.Contains(last, `refusing --schedule "@every 3s"`) || !strings.Contains(last, `runs on schedule "@every 2s"`) {
			t.Errorf("the last line does not name both schedules: %q", last)
		}
	})
	t.Run("a line far from its time runs nothing", func(t *testing.T) {
		// Thirteen hours after the minute of a daily spec.
		at := time.Now().UTC().Truncate(time.Minute).Add(-13 * time.Hour)
		spec := fmt.Sprintf("%d %d * * *", at.Minute(), at.Hour())
		code, lines := run(t, "--job", "ip-far", "--schedule", spec, "--timezone", "UTC", "--once", "--", "sh", "-c", "exit 9")
		if code != 0 {
			t.Errorf("exit %d, want 0 (nothing to run)", code)
		}
		ran := false
		for _, e := range lines {
			ran = ran || e["message"] == "released"
			if msg, _ := e["message"].(string); strings.HasPrefix(msg, "nothing to run: no scheduled time is just due") {
				return
			}
		}
		t.Errorf("no line saying no time is just due (ran: %v): %v", ran, lines)
	})
}
