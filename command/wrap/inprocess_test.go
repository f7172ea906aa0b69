package wrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/redbite/leasewrap/command"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// The run loop's decisions (the exit status it gives, the attempts it
// makes, why it skips) run here in this test's own process through
// command.Run, with a real database and a real command, no binary built.
// This package's tests spawn nothing else: the wrapper makes the process
// a child subreaper that reaps every child.
func TestRunLoopInProcess(t *testing.T) {
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	run := func(t *testing.T, args ...string) (int, []map[string]any) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		argv := append([]string{"leasewrap", "--database-url", pgtest.URL(), "--table", table, "--log-format", "json",
			"--ttl", "6s", "--renew-interval", "300ms", "--grace", "500ms", "--retry-interval", "100ms"}, args...)
		code := command.Run(argv, &stdout, &stderr)
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			var e map[string]any
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("stderr line not JSON: %q", l)
			}
			lines = append(lines, e)
		}
		return code, lines
	}
	count := func(lines []map[string]any, msg string) int {
		n := 0
		for _, e := range lines {
			if e["message"] == msg {
				n++
			}
		}
		return n
	}

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
