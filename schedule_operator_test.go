package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// An operator empties the claims table just after a time ran; a crontab
// line fired a moment later, still within that time's grace, must not
// run it again: the lease row's mark still accounts for it.
func TestEmptiedClaimsDoNotRunTheTimeThatJustRan(t *testing.T) {
	t.Parallel()
	for _, empty := range []string{"TRUNCATE ", "DELETE FROM "} {
		t.Run(empty, func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			records := filepath.Join(t.TempDir(), "records")
			// @every 20s: a grace of ten seconds, roomy on a busy machine.
			args := d.args("--job", "j", "--schedule", "@every 20s", "--", self())
			first := lw(t, []string{child("trap record:" + records + " exit:0")}, args...)
			first.WaitLog(t, "released")
			_ = first.Cmd.Process.Signal(syscall.SIGTERM)
			first.Wait(t, 15*time.Second)
			d.exec(t, empty+pgx.Identifier{d.table+"_schedule"}.Sanitize())
			// A crontab line fired now: it decides, and exits.
			again := lw(t, []string{child("trap record:" + records + " exit:0")},
				d.args("--job", "j", "--schedule", "@every 20s", "--once", "--", self())...)
			if code := again.Wait(t, 15*time.Second); code != 0 {
				t.Fatalf("the --once line exited %d", code)
			}
			if runs := readHistory(t, records); len(runs) != 1 {
				t.Fatalf("%d runs, want the time run once", len(runs))
			}
		})
	}
}
