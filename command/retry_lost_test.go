package command

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// slowRenewal overrides args' fast timings: no renewal is due while a
// test runs, and the holder does not listen for a release (which would
// have its keeper renew at once), so what ends the retries is the
// statement that starts the next attempt (or records the last), not the
// keeper.
var slowRenewal = []string{"--ttl", "1m", "--renew-interval", "20s", "--grace", "5s", "--retry-interval", "1s", "--listen=false"}

// historyRuns returns holder's runs as "attempt:exit:outcome", oldest
// first (exit "-" when there is none).
func (d db) historyRuns(t *testing.T, holder string) []string {
	t.Helper()
	rows, err := d.pool.Query(context.Background(), `SELECT attempt, exit_code, outcome FROM `+
		pgx.Identifier{d.table + "_history"}.Sanitize()+` WHERE holder = $1 ORDER BY attempt`, holder)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out     []string
		attempt int
		code    *int
		outcome string
	)
	_, err = pgx.ForEachRow(rows, []any{&attempt, &code, &outcome}, func() error {
		exit := "-"
		if code != nil {
			exit = fmt.Sprint(*code)
		}
		out = append(out, fmt.Sprintf("%d:%s:%s", attempt, exit, outcome))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A lease released by an operator, deleted, or taken over by a new leader
// after a failed attempt ends the retries: the next attempt never starts
// beside the new leader, leasewrap exits 75 with the lease-lost line, and
// the history closes the run once, as stopped (the operator's release) or
// lost. The gate holds the first attempt until the change is made, so the
// change lands before the attempt is recorded and the next one starts;
// with SIGSTOP it lands in the retry wait itself.
func TestLostLeaseEndsTheRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// inWait: change the lease in the retry wait (the wrapper stopped
		// by SIGSTOP), not while the first attempt runs.
		inWait bool
		change func(t *testing.T, d db, record string)
		// want: the first holder's history.
		want []string
	}{
		{"release --force during the attempt", false, forceRelease, []string{"1:1:exited", "2:-:stopped"}},
		{"DELETE during the attempt", false, deleteRow, []string{"1:1:lost"}},
		{"release --force in the wait", true, forceRelease, []string{"1:1:exited", "2:-:stopped"}},
		{"DELETE in the wait", true, deleteRow, []string{"1:1:exited", "2:-:lost"}},
		{"new leader in the wait", true, newLeader, []string{"1:1:exited", "2:-:lost"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			dir := t.TempDir()
			record, gate := filepath.Join(dir, "record"), filepath.Join(dir, "gate")
			script := "record:" + record + " exit:1"
			args := append(d.args(slowRenewal...), "--id", "first", "--job", "j", "--retries", "2", "--")
			if tc.inWait {
				// Long enough for the test to see the wait begin and stop
				// the wrapper.
				args = slices.Insert(args, len(args)-1, "--retry-delay", "3s")
				args = append(args, self())
			} else {
				// The first attempt records its start, then fails once the
				// gate is there.
				script = "record:" + record
				args = slices.Insert(args, len(args)-1, "--retry-delay", "100ms")
				args = append(args, "sh", "-c", `"$0"; echo ready; while [ ! -e "$1" ]; do sleep 0.01; done; exit 1`, self(), gate)
			}
			p := lw(t, []string{child(script)}, args...)
			if tc.inWait {
				stopInWait(t, p, record)
				tc.change(t, d, record)
				if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			} else {
				p.Expect(t, "ready")
				tc.change(t, d, record)
				if err := os.WriteFile(gate, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := p.Wait(t, 30*time.Second); got != 75 {
				t.Errorf("exit %d, want 75", got)
			}
			if !slices.ContainsFunc(p.LogEntries(t), func(e map[string]any) bool { return e["message"] == "lease lost" }) {
				t.Error(`no "lease lost" log line`)
			}
			var first int
			for _, run := range readHistory(t, record) {
				if run.Holder == "first" {
					first++
				}
			}
			if first != 1 {
				t.Errorf("the first holder started %d attempts, want 1: a retry started after its lease was gone", first)
			}
			if got := d.historyRuns(t, "first"); !slices.Equal(got, tc.want) {
				t.Errorf("history of the first holder %q, want %q", got, tc.want)
			}
		})
	}
}

func forceRelease(t *testing.T, d db, _ string) {
	t.Helper()
	r := lw(t, nil, "release", "--force", "--yes", "--job", "j", "--database-url", pgtest.URL(), "--table", d.table)
	if got := r.Wait(t, 30*time.Second); got != 0 {
		t.Fatalf("release --force --yes exited %d", got)
	}
}

func deleteRow(t *testing.T, d db, _ string) {
	t.Helper()
	d.exec(t, `DELETE FROM TABLE`)
}

// newLeader force-releases the lease and starts a new leader, whose child
// runs until the test ends.
func newLeader(t *testing.T, d db, record string) {
	t.Helper()
	forceRelease(t, d, record)
	p := lw(t, []string{child("record:" + record + " ready block")},
		append(d.args(slowRenewal...), "--id", "second", "--job", "j", "--", self())...)
	p.Expect(t, "ready")
}

// stopInWait waits for leasewrap to begin its retry wait and stops it
// there with SIGSTOP (SIGCONT when the test ends, or by the caller).
func stopInWait(t *testing.T, p *lwtest.Proc, record string) {
	t.Helper()
	p.WaitLog(t, "the command failed; running it again, keeping the lease")
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cmd.Process.Signal(syscall.SIGCONT) })
	if n := len(readHistory(t, record)); n != 1 {
		t.Fatalf("%d attempts started before the wrapper was stopped in its retry wait, want 1", n)
	}
}

// A database that cannot be reached when the next attempt is due starts
// no attempt: leasewrap asks again until the lease would have to stop,
// then ends as for a lost lease.
func TestUnreachableDatabaseInTheRetryWaitStartsNoAttempt(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "record")
	proxy, url := pgtest.Proxied(t, d.pool)
	// A TTL longer than a statement's own timeout, so that a start that
	// gave up on the database would still come before the lease ends.
	args := append(d.args("--ttl", "10s", "--renew-interval", "3s", "--grace", "2s", "--retry-interval", "400ms"),
		"--database-url", url, "--job", "j", "--retries", "2", "--retry-delay", "1s", "--", self())
	p := lw(t, []string{child("record:" + record + " exit:1")}, args...)
	stopInWait(t, p, record)
	proxy.Blackhole()
	if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if got := p.Wait(t, 30*time.Second); got != 75 {
		t.Errorf("exit %d, want 75", got)
	}
	if n := len(readHistory(t, record)); n != 1 {
		t.Errorf("%d attempts started, want 1: a retry started on a lease the database could not confirm", n)
	}
	entries := p.LogEntries(t)
	for _, msg := range []string{"cannot confirm the lease to start the next attempt; trying again", "lease lost"} {
		if !slices.ContainsFunc(entries, func(e map[string]any) bool { return e["message"] == msg }) {
			t.Errorf("no %q log line", msg)
		}
	}
}

// A signal to end leasewrap in the retry wait ends the retries: no child
// runs then, so leasewrap exits 128+N as it does for a signal before the
// first attempt, hands the lease back, and the history keeps the failed
// attempt as it was.
func TestSignalInTheRetryWaitExits128PlusN(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	record := filepath.Join(t.TempDir(), "record")
	p := lw(t, []string{child("record:" + record + " exit:1")},
		append(d.args(), "--id", "first", "--job", "j", "--retries", "2", "--retry-delay", "10m", "--", self())...)
	p.WaitLog(t, "the command failed; running it again, keeping the lease")
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := p.Wait(t, 30*time.Second); got != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d", got, 128+int(syscall.SIGTERM))
	}
	if n := len(readHistory(t, record)); n != 1 {
		t.Errorf("%d attempts started, want 1", n)
	}
	if got, want := d.historyRuns(t, "first"), []string{"1:1:exited"}; !slices.Equal(got, want) {
		t.Errorf("history %q, want %q", got, want)
	}
	if left := d.expiresIn(t, "j"); left > 0 {
		t.Errorf("lease still live for %s after leasewrap exited", left)
	}
}
