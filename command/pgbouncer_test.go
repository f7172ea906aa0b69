package command

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// throughPgBouncer starts a PgBouncer of the test's own in transaction
// mode in front of d's database and returns a connection string to it.
func (d db) throughPgBouncer(t *testing.T) string {
	t.Helper()
	cfg := d.pool.Config().ConnConfig
	bouncer := pgtest.StartPgBouncer(t, fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, bouncer, cfg.Database)
}

// Every command works through PgBouncer in transaction pooling mode, which
// keeps no session state between statements (no named prepared statements,
// no LISTEN): standbys fall back to polling.
func TestThroughPgBouncerInTransactionMode(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	url := d.throughPgBouncer(t)
	store := []string{"--database-url", url, "--table", d.table}

	migrate := lw(t, nil, append([]string{"migrate"}, store...)...)
	migrate.Expect(t, `created table "`+d.table+`"`)
	if got := migrate.Wait(t, 10*time.Second); got != 0 {
		t.Fatalf("migrate exited %d", got)
	}
	// The leader renews a few times (every 300ms) through the pooler, and
	// its command ends once the standby stands by, which on a busy machine
	// can take longer than that.
	done := filepath.Join(t.TempDir(), "done")
	leader := lw(t, []string{child("ready sleep:1500ms await:" + done + " exit:0")}, d.args("--database-url", url, "--job", "j", "--id", "leader", "--", self())...)
	leader.Expect(t, "ready")
	// A standby there polls, as the docs say (LISTEN needs a session).
	standby := lw(t, []string{child("ready exit:0")}, d.args("--database-url", url, "--job", "j", "--wait", "--listen=false", "--", self())...)
	standby.WaitLog(t, "standing by: lease held by another instance")
	if err := os.WriteFile(done, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := leader.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("leader exited %d", got)
	}
	standby.Expect(t, "ready")
	if got := standby.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("standby exited %d", got)
	}
	for _, e := range leader.LogEntries(t) {
		if e["message"] == "renewal failed" {
			t.Errorf("a renewal failed through PgBouncer: %v", e["error"])
		}
	}

	status := lw(t, nil, append([]string{"status", "--job", "j"}, store...)...)
	if got := status.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("status exited %d", got)
	}
	holder := lw(t, []string{child("ready block")}, d.args("--database-url", url, "--job", "k", "--id", "h", "--", self())...)
	holder.Expect(t, "ready")
	release := lw(t, nil, append([]string{"release", "--job", "k", "--id", "h"}, store...)...)
	if got := release.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("release exited %d", got)
	}
	if got := holder.Wait(t, 10*time.Second); got != 75 {
		t.Errorf("released holder exited %d, want 75", got)
	}
}

// A listening standby behind a pooler in transaction mode hears no
// release: it finds out from a notification of its own that never
// arrives, says so once, and polls, so that it takes the lease within
// retry intervals of a clean release rather than at the expiry (60s here).
func TestStandbyBehindPgBouncerPollsWhenItCannotHear(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	url := d.throughPgBouncer(t)

	done := filepath.Join(t.TempDir(), "done")
	leader := lw(t, []string{child("ready await:" + done + " exit:0")}, d.argsTTL("60s", "--database-url", url, "--job", "j", "--id", "leader", "--", self())...)
	leader.Expect(t, "ready")
	standby := lw(t, []string{child("ready exit:0")}, d.argsTTL("60s", "--database-url", url, "--job", "j", "--wait", "--", self())...)
	const deaf = "standing by without notifications: the database connection does not keep a session (a pooler in transaction mode?); looking every retry interval"
	standby.WaitLog(t, deaf)
	if err := os.WriteFile(done, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := leader.Wait(t, 10*time.Second); got != 0 {
		t.Errorf("leader exited %d", got)
	}
	// Half the expiry: slack for a busy machine, and still a failure for
	// a standby that waits for the lease to run out.
	if got := standby.Wait(t, 30*time.Second); got != 0 {
		t.Errorf("standby exited %d", got)
	}
	if said := count(t, standby, deaf); said != 1 {
		t.Errorf("the standby said %d times that it cannot hear notifications, want once", said)
	}
}

// A scheduler listening for requested runs behind a pooler in transaction
// mode hears no request either: it finds out as a standby does, says so
// once, and looks for requests every retry interval, so that a trigger is
// taken rather than left for its next time (a year away here).
func TestSchedulerBehindPgBouncerPollsWhenItCannotHear(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	url := d.throughPgBouncer(t)

	record := filepath.Join(t.TempDir(), "runs")
	p := lw(t, []string{child("record:" + record + " exit:0")}, d.args("--database-url", url, "--id", "pooled",
		"--job", "j", "--schedule", farSchedule, "--", self())...)
	const deaf = "waiting for requested runs without notifications: the database connection does not keep a session (a pooler in transaction mode?); looking every retry interval"
	p.WaitLog(t, deaf)
	if code, out := d.trigger(t, "--job", "j"); code != 0 || !strings.Contains(out, "taken by scheduler pooled,") {
		t.Fatalf("trigger exited %d, want 0 naming the scheduler that took it: %s", code, out)
	}
	waitRuns(t, record, 1)
	stop(t, p)
	if said := count(t, p, deaf); said != 1 {
		t.Errorf("the scheduler said %d times that it cannot hear notifications, want once", said)
	}
}
