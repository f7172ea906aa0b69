package command

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// A standby that meets a read-only server after its first contact (a
// failover under way) keeps trying, logs the first failure and not every
// retry, and /healthz says what is wrong.
func TestReadOnlyAfterFirstContactIsRetriedQuietly(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	ctx := context.Background()
	role := d.table + "_ro"
	r := pgx.Identifier{role}.Sanitize()
	d.exec(t, `CREATE ROLE `+r+` LOGIN`)
	t.Cleanup(func() {
		d.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
		d.pool.Exec(ctx, `DROP OWNED BY `+r+`; DROP ROLE `+r)
	})
	leader := lw(t, []string{child("trap ready block")}, d.args("--job", "j", "--", self())...)
	leader.Expect(t, "ready")
	d.exec(t, `GRANT USAGE ON SCHEMA public TO `+r+`; GRANT SELECT, INSERT, UPDATE ON TABLE TO `+r+`;
GRANT SELECT, INSERT, DELETE ON "`+d.table+`_history" TO `+r)
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(pgtest.URL(), "://"+cfg.ConnConfig.User+"@", "://"+role+"@", 1)
	standby := lw(t, []string{child("ready block")}, d.args("--database-url", url, "--job", "j", "--wait", "--http-addr", "127.0.0.1:0",
		"--log-level", "debug", "--", self())...)
	standby.WaitLog(t, "standing by: lease held by another instance")
	addr := httpAddr(t, standby)

	// The standby's role turns read-only, as a demoted primary would.
	d.exec(t, `ALTER ROLE `+r+` SET default_transaction_read_only = on`)
	d.exec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '`+role+`'`)
	_ = leader.Cmd.Process.Signal(syscall.SIGTERM)
	if got := leader.Wait(t, 10*time.Second); got != 143 {
		t.Fatalf("leader exited %d", got)
	}
	// The first failure may be the connection the test ended; the
	// retries after it meet the read-only server.
	var code int
	var body string
	pgtest.Eventually(t, 10*time.Second, "/healthz naming the read-only server", func() bool {
		code, body = get(t, addr, "/healthz")
		return code == 503 && strings.Contains(body, "read-only")
	})
	// Some twenty retries (every 100ms) later, one log line for the
	// read-only server, and at most one before it for the connection the
	// test ended (a standby that used it after the test did).
	var warned []string
	retried := 0
	pgtest.Eventually(t, 10*time.Second, "twenty retries of the read-only take", func() bool {
		warned, retried = nil, 0
		for _, e := range standby.LogEntries(t) {
			switch e["message"] {
			case "cannot use the lease store; retrying":
				msg, _ := e["error"].(string)
				warned = append(warned, msg)
			case "still cannot use the lease store; retrying":
				retried++
			}
		}
		return retried >= 20
	})
	readOnly := 0
	for _, msg := range warned {
		switch {
		case strings.Contains(msg, "read-only"):
			readOnly++
		case !strings.Contains(msg, "terminating connection due to administrator command"):
			t.Errorf("logged %q, want it to say read-only", msg)
		}
	}
	if readOnly != 1 || len(warned) > 2 {
		t.Errorf("warnings over %d retries: %q, want one naming the read-only server", retried, warned)
	}
	select {
	case <-standby.Exited:
		t.Errorf("the standby gave up (exit %d) instead of waiting out the failover", standby.Code())
	default:
	}
}
