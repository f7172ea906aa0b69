package command

import (
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// What a scheduler logs when the database fails it after its start.
const (
	schedulerCannotUse = "cannot use the lease store; the scheduled times are accounted for once it answers"
	schedulerAnswers   = "the lease store answers again"
)

// stillRunning fails the test if p has exited.
func stillRunning(t *testing.T, p *lwtest.Proc, when string) {
	t.Helper()
	select {
	case <-p.Exited:
		t.Fatalf("%s: leasewrap exited %d, want it still running", when, p.Code())
	default:
	}
}

// logIndex is the index of p's first log line with message at or after
// from, or -1.
func logIndex(t *testing.T, p *lwtest.Proc, message string, from int) int {
	t.Helper()
	entries := p.LogEntries(t)
	for i := max(from, 0); i < len(entries); i++ {
		if entries[i]["message"] == message {
			return i
		}
	}
	return -1
}

// probes asserts what addr's /livez, /readyz and /healthz answer.
func probes(t *testing.T, addr, when string, live, ready int) {
	t.Helper()
	if code, body := get(t, addr, "/livez"); code != live {
		t.Errorf("%s: /livez %d %q, want %d", when, code, body, live)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, body := get(t, addr, path); code != ready {
			t.Errorf("%s: %s %d %q, want %d", when, path, code, body, ready)
		}
	}
}

// A scheduler that cannot reach the database at its start (the server
// refuses, or does not answer at all) is a service: it stands by for it as
// a --wait standby does, saying so once and counting each failed attempt,
// live (/livez 200) but not ready (/readyz 503) meanwhile, and once the
// database is back it registers and runs its next scheduled time.
func TestSchedulerStandsByForAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"refused", "blackholed"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			proxy, viaProxy := pgtest.Proxied(t, d.pool)
			if fault == "refused" {
				proxy.Cut()
			} else {
				proxy.Blackhole()
			}
			p := lw(t, []string{child("ready exit:0")}, withURL(d.args("--job", "j", "--schedule", "@every 1s", "--log-level", "debug",
				"--http-addr", "127.0.0.1:0", "--", self()), withPassword(t, viaProxy))...)
			addr := httpAddr(t, p)
			p.WaitLog(t, cannotReach)
			p.WaitLog(t, stillCannot)
			pgtest.Eventually(t, 20*time.Second, "two failed attempts counted", func() bool {
				return unreachableCount(t, addr) >= 2
			})
			stillRunning(t, p, "standing by")
			probes(t, addr, "standing by", 200, 503)
			if body := waitStatus(t, addr, "/readyz", 503); !strings.Contains(body, "no recent contact") {
				t.Errorf("/readyz while unreachable: %q, want the failure", body)
			}
			if code, body := get(t, addr, "/leader"); code != 503 || !strings.Contains(body, `"leader":false`) {
				t.Errorf("/leader while unreachable: %d %q, want 503, not leading", code, body)
			}

			proxy.Restore()
			p.WaitLog(t, reached)
			p.WaitLog(t, "scheduler started")
			p.Expect(t, "ready") // a scheduled time ran
			probes(t, addr, "once the database answers", 200, 200)
			if n := count(t, p, cannotReach); n != 1 {
				t.Errorf("%d %q lines, want 1", n, cannotReach)
			}
			if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if got := p.Wait(t, 15*time.Second); got != 0 {
				t.Errorf("exit %d after SIGTERM, want 0", got)
			}
			noPassword(t, p)
		})
	}
}

// A scheduler already running rides out an outage (a restart or failover
// of the database): it says so once, stays up, and runs its times again
// once the database answers.
func TestSchedulerRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	proxy, viaProxy := pgtest.Proxied(t, d.pool)
	p := lw(t, []string{child("ready exit:0")}, withURL(d.args("--job", "j", "--schedule", "@every 1s",
		"--http-addr", "127.0.0.1:0", "--", self()), viaProxy)...)
	addr := httpAddr(t, p)
	p.Expect(t, "ready")
	proxy.Cut()
	p.WaitLog(t, schedulerCannotUse)
	pgtest.Eventually(t, 20*time.Second, "/readyz failing", func() bool {
		code, _ := get(t, addr, "/readyz")
		return code == 503
	})
	stillRunning(t, p, "during the outage")
	probes(t, addr, "during the outage", 200, 503)
	if n := unreachableCount(t, addr); n < 1 {
		t.Errorf("leasewrap_database_unreachable_total %v during the outage, want at least 1", n)
	}

	proxy.Restore()
	answers := -1
	pgtest.Eventually(t, 20*time.Second, "the scheduler running a time after the outage", func() bool {
		answers = logIndex(t, p, schedulerAnswers, 0)
		return answers >= 0 && logIndex(t, p, "acquired", answers) >= 0
	})
	stillRunning(t, p, "after the outage")
	if n := count(t, p, schedulerCannotUse); n != 1 {
		t.Errorf("%d %q lines, want 1", n, schedulerCannotUse)
	}
	probes(t, addr, "after the outage", 200, 200)
}

// What still ends a scheduler that cannot use its database at its start:
// a database that refuses it for good, a crontab line (--once), a signal
// and --wait-timeout.
func TestSchedulerUnreachableDatabaseEnds(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	t.Run("missing database", func(t *testing.T) {
		t.Parallel()
		u, err := url.Parse(pgtest.URL())
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/nonexistent_db"
		p := lw(t, []string{child("ready")}, withURL(d.args("--job", "j", "--schedule", "@every 1s", "--", self()), withPassword(t, u.String()))...)
		wantNoSuchDatabase(t, p)
	})

	t.Run("--once", func(t *testing.T) {
		t.Parallel()
		p := lw(t, []string{child("ready")}, withURL(d.args("--job", "j", "--schedule", "@every 1s", "--once", "--", self()), refusingURL(t))...)
		wantRefused(t, p, "a crontab line (--once)")
	})

	// Standing by, it has run nothing: it stops as between runs.
	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		p := lw(t, []string{child("ready")}, withURL(d.args("--job", "j", "--schedule", "@every 1s", "--", self()), refusingURL(t))...)
		p.WaitLog(t, cannotReach)
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if got := p.Wait(t, 15*time.Second); got != 0 {
			t.Errorf("exit %d, want 0", got)
		}
		p.WaitLog(t, "scheduler stopped by signal")
		noPassword(t, p)
	})

	t.Run("--wait-timeout", func(t *testing.T) {
		t.Parallel()
		p := lw(t, []string{child("ready")}, withURL(d.args("--job", "j", "--schedule", "@every 1s", "--wait-timeout", "1s", "--", self()), refusingURL(t))...)
		if got := p.Wait(t, 15*time.Second); got != 124 {
			t.Errorf("exit %d, want 124", got)
		}
		p.WaitLog(t, cannotReach)
		p.WaitLog(t, "gave up standing by: --wait-timeout passed")
		noPassword(t, p)
	})
}
