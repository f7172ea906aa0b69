package command

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// The lines a --wait standby logs while it cannot reach the database.
const (
	cannotReach  = "cannot reach the database; standing by and trying again every retry interval"
	stillCannot  = "still cannot reach the database"
	reached      = "reached the database"
	waitPassword = "lw-wait-s3cret"
)

// withURL is args with its connection string replaced by dsn.
func withURL(args []string, dsn string) []string {
	args = slices.Clone(args)
	i := slices.Index(args, "--database-url")
	args[i+1] = dsn
	return args
}

// withPassword is dsn with a password, which the test server (trusting the
// test user) ignores, and which must never be printed.
func withPassword(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), waitPassword)
	return u.String()
}

// refusingURL is a connection string to a loopback port that refuses
// connections.
func refusingURL(t *testing.T) string {
	t.Helper()
	return "postgres://postgres:" + waitPassword + "@" + pgtest.RefusedAddr(t) + "/test?sslmode=disable&connect_timeout=5"
}

// count is how many of p's log lines have message.
func count(t *testing.T, p *lwtest.Proc, message string) int {
	t.Helper()
	n := 0
	for _, e := range p.LogEntries(t) {
		if e["message"] == message {
			n++
		}
	}
	return n
}

// unreachableCount is leasewrap_database_unreachable_total on addr's
// /metrics (-1: not there).
func unreachableCount(t *testing.T, addr string) float64 {
	t.Helper()
	_, m := get(t, addr, "/metrics")
	for _, line := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(line, `leasewrap_database_unreachable_total{lease="j"} `); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			return n
		}
	}
	return -1
}

// wantRefused wants p, a run that does not stand by (what says which),
// to exit 69 at once for its database, without standing by for it and
// without printing the password; it returns the failure p logged.
func wantRefused(t *testing.T, p *lwtest.Proc, what string) map[string]any {
	t.Helper()
	if got := p.Wait(t, 15*time.Second); got != 69 {
		t.Errorf("exit %d, want 69", got)
	}
	e := p.WaitLog(t, "lease store unavailable")
	if n := count(t, p, cannotReach); n != 0 {
		t.Errorf("%s stood by for the database", what)
	}
	noPassword(t, p)
	return e
}

// wantNoSuchDatabase wants p refused for good by a server that says its
// database does not exist (3D000): waiting will not mend that.
func wantNoSuchDatabase(t *testing.T, p *lwtest.Proc) {
	t.Helper()
	e := wantRefused(t, p, "a run told its database does not exist")
	if msg, _ := e["error"].(string); !strings.Contains(msg, "3D000") {
		t.Errorf("failed with %q, want the server's 3D000 (no such database)", msg)
	}
}

// noPassword fails the test if p printed the connection's password.
func noPassword(t *testing.T, p *lwtest.Proc) {
	t.Helper()
	if strings.Contains(p.Logs.String(), waitPassword) {
		t.Errorf("the password is in the logs:\n%s", p.Logs)
	}
}

// A --wait standby that cannot reach the database at its start stands by
// for it: it says so once, counts each failed attempt, answers 503 on
// /readyz, /healthz and /leader meanwhile but 200 on /livez, and once the
// database is back it takes the lease and runs the command as any
// standby would.
func TestWaitStandsByForAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	proxy, viaProxy := pgtest.Proxied(t, d.pool)
	viaProxy = strings.Replace(viaProxy, "connect_timeout=1", "connect_timeout=5", 1)
	// The proxy takes each connection and closes it at once, as a server
	// that is going down does.
	proxy.Cut()
	p := lw(t, []string{child("ready exit:0")}, withURL(d.args("--job", "j", "--wait", "--log-level", "debug",
		"--http-addr", "127.0.0.1:0", "--", self()), withPassword(t, viaProxy))...)
	addr := httpAddr(t, p)
	warned := p.WaitLog(t, cannotReach)
	if host := warned["database"]; host != proxy.Addr() {
		t.Errorf("the warning names database %v, want %s", host, proxy.Addr())
	}
	if ri := warned["retry_interval"]; ri != "100ms" {
		t.Errorf("the warning says retry_interval %v, want 100ms", ri)
	}
	// Further attempts, every retry interval, are counted and logged at
	// debug; the warning is not repeated.
	p.WaitLog(t, stillCannot)
	pgtest.Eventually(t, 10*time.Second, "two failed attempts counted", func() bool {
		return unreachableCount(t, addr) >= 2
	})
	if body := waitStatus(t, addr, "/healthz", 503); !strings.Contains(body, "failed to connect") {
		t.Errorf("/healthz while unreachable: %q, want the failure", body)
	} else if strings.Contains(body, waitPassword) {
		t.Errorf("/healthz shows the password: %q", body)
	}
	if body := waitStatus(t, addr, "/leader", 503); !strings.Contains(body, `"leader":false`) {
		t.Errorf("/leader while unreachable: %q", body)
	}
	// Live, not ready: a restart would not bring the database back.
	probes(t, addr, "standing by", 200, 503)

	proxy.Restore()
	p.WaitLog(t, reached)
	p.Expect(t, "ready")
	if got := p.Wait(t, 15*time.Second); got != 0 {
		t.Errorf("exit %d, want 0", got)
	}
	if n := count(t, p, cannotReach); n != 1 {
		t.Errorf("%d %q lines, want 1", n, cannotReach)
	}
	if n := count(t, p, "acquired"); n != 1 {
		t.Errorf("%d acquired lines, want 1", n)
	}
	if holder := d.holder(t, "j"); holder == "" {
		t.Error("no lease row: the command ran without taking the lease")
	}
	noPassword(t, p)
}

// What ends a standby that cannot reach the database, and what does not
// make it stand by at all.
func TestUnreachableDatabaseEnds(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	t.Run("--wait-timeout", func(t *testing.T) {
		t.Parallel()
		p := lw(t, []string{child("ready")}, withURL(d.args("--job", "j", "--wait", "--wait-timeout", "1s", "--", self()), refusingURL(t))...)
		if got := p.Wait(t, 15*time.Second); got != 124 {
			t.Errorf("exit %d, want 124", got)
		}
		p.WaitLog(t, cannotReach)
		p.WaitLog(t, "gave up standing by: --wait-timeout passed")
		noPassword(t, p)
	})

	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		p := lw(t, []string{child("ready")}, withURL(d.args("--job", "j", "--wait", "--", self()), refusingURL(t))...)
		p.WaitLog(t, cannotReach)
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if got := p.Wait(t, 15*time.Second); got != 143 {
			t.Errorf("exit %d, want 143", got)
		}
		p.WaitLog(t, "stopped by signal before the command started")
		noPassword(t, p)
	})

	t.Run("without --wait", func(t *testing.T) {
		t.Parallel()
		p := lw(t, []string{child("ready")}, withURL(d.args("--job", "j", "--", self()), refusingURL(t))...)
		wantRefused(t, p, "a cron run (no --wait)")
	})

	// The server answers, and says the database does not exist: waiting
	// will not mend that.
	t.Run("missing database", func(t *testing.T) {
		t.Parallel()
		u, err := url.Parse(pgtest.URL())
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/lw_no_such_database"
		p := lw(t, []string{child("ready")}, withURL(d.args("--job", "j", "--wait", "--", self()), withPassword(t, u.String()))...)
		wantNoSuchDatabase(t, p)
	})
}

// A --wait standby whose database takes no writes at its start (a
// failover under way: every host a standby until one is promoted) stands
// by for a primary rather than exiting 69, and runs once one is there:
// with target_session_attrs=read-write (pgx finds no primary) and without
// (the server refuses the take).
func TestWaitStandsByForAReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	for _, attrs := range []string{"", "&target_session_attrs=read-write"} {
		t.Run("attrs="+attrs, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			ctx := context.Background()
			migrate := lw(t, nil, "migrate", "--database-url", pgtest.URL(), "--table", d.table)
			if got := migrate.Wait(t, 10*time.Second); got != 0 {
				t.Fatalf("migrate exited %d", got)
			}
			role := d.table + "_ro"
			r := pgx.Identifier{role}.Sanitize()
			d.exec(t, `CREATE ROLE `+r+` LOGIN; ALTER ROLE `+r+` SET default_transaction_read_only = on;
GRANT USAGE ON SCHEMA public TO `+r+`; GRANT SELECT, INSERT, UPDATE ON TABLE TO `+r+`;
GRANT SELECT, INSERT, DELETE ON "`+d.table+`_history" TO `+r)
			t.Cleanup(func() {
				d.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
				d.pool.Exec(ctx, `DROP OWNED BY `+r+`; DROP ROLE `+r)
			})
			u, err := url.Parse(pgtest.URL() + attrs)
			if err != nil {
				t.Fatal(err)
			}
			u.User = url.UserPassword(role, waitPassword)
			const readOnly = "the database takes no writes (a standby, or a failover under way); standing by and trying again every retry interval"
			p := lw(t, []string{child("ready exit:0")}, withURL(d.args("--job", "j", "--wait", "--log-level", "debug", "--", self()), u.String())...)
			p.WaitLog(t, readOnly)
			p.WaitLog(t, "the database still takes no writes")

			// The primary is there: new sessions of the role take writes.
			d.exec(t, `ALTER ROLE `+r+` RESET default_transaction_read_only`)
			d.exec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '`+role+`'`)
			p.WaitLog(t, reached)
			p.Expect(t, "ready")
			if got := p.Wait(t, 15*time.Second); got != 0 {
				t.Errorf("exit %d, want 0", got)
			}
			if n := count(t, p, readOnly); n != 1 {
				t.Errorf("%d %q lines, want 1", n, readOnly)
			}
			noPassword(t, p)
		})
	}
}

// Under --require-replicated a --wait standby whose primary has no
// standby streaming (a failover under way: nobody follows the new primary
// yet) stands by, saying so once, until --wait-timeout ends it (124); a
// cron instance still refuses with 69 and writes nothing.
func TestWaitStandsByForAStandbyToConfirm(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	const standingBy = "no standby streams from the primary to confirm a take (--require-replicated); standing by and trying again every retry interval"
	p := lw(t, nil, d.args("--job", "j", "--require-replicated", "--wait", "--wait-timeout", "3s", "--", "true")...)
	p.WaitLog(t, standingBy)
	if got := p.Wait(t, 20*time.Second); got != 124 {
		t.Errorf("--wait --require-replicated without a streaming standby: exit %d, want 124 from --wait-timeout", got)
	}
	if n := count(t, p, standingBy); n != 1 {
		t.Errorf("said it stands by %d times, want once", n)
	}
	cron := lw(t, nil, d.args("--job", "j", "--require-replicated", "--", "true")...)
	if got := cron.Wait(t, 20*time.Second); got != 69 {
		t.Errorf("--require-replicated without a streaming standby, no --wait: exit %d, want 69", got)
	}
	var rows int
	if err := d.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{d.table}.Sanitize()).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d lease rows (%v), want nothing written", rows, err)
	}
}
