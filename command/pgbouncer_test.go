package command

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
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

// A standby and a scheduler behind a pooler in transaction mode find out
// that they cannot listen without leaving a LISTEN behind on the server
// connections the pooler lends to everyone: one would keep sending
// notifications to whichever client it serves next (PgBouncer logs "got
// packet 'A' from server when not linked" and drops the connection, or
// worse). Once they stopped, no server connection of the pooler listens.
func TestBehindPgBouncerNoServerConnectionIsLeftListening(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	url := d.throughPgBouncer(t)

	leader := lw(t, []string{child("ready block")}, d.argsTTL("60s", "--database-url", url, "--job", "j", "--id", "leader", "--", self())...)
	leader.Expect(t, "ready")
	const deaf = "without notifications: the database connection does not keep a session (a pooler in transaction mode?); looking every retry interval"
	var waiting []*lwtest.Proc
	for _, id := range []string{"s1", "s2"} {
		standby := lw(t, []string{child("ready exit:0")}, d.argsTTL("60s", "--database-url", url, "--job", "j", "--id", id, "--wait", "--", self())...)
		standby.WaitLog(t, "standing by "+deaf)
		waiting = append(waiting, standby)
	}
	scheduler := lw(t, []string{child("exit:0")}, d.args("--database-url", url, "--id", "sched", "--job", "k", "--schedule", farSchedule, "--", self())...)
	scheduler.WaitLog(t, "waiting for requested runs "+deaf)
	for _, p := range append(waiting, scheduler, leader) {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		p.Wait(t, 15*time.Second)
	}
	if left := listeningServers(t, url); len(left) > 0 {
		t.Errorf("server connections of the pooler still listen: %v", left)
	}
}

// listeningServers asks every server connection of the PgBouncer at url
// (pgtest.PgBouncerPoolSize clients, each holding one in a transaction)
// which channels it listens on, and returns those that listen on any, by
// backend pid.
func listeningServers(t *testing.T, url string) map[int32][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left := map[int32][]string{}
	for range pgtest.PgBouncerPoolSize {
		conn, err := pgx.Connect(ctx, url+"&default_query_exec_mode=simple_protocol")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var pid int32
		var channels []string
		if err := tx.QueryRow(ctx, "SELECT pg_backend_pid(), array(SELECT pg_listening_channels())").Scan(&pid, &channels); err != nil {
			t.Fatal(err)
		}
		if len(channels) > 0 {
			left[pid] = channels
		}
	}
	return left
}
