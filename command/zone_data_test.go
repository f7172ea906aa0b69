package command

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/lwtest"
)

// Two hosts whose zone data give Europe/Berlin different offsets would run
// one wall-clock time twice: a crontab line with the other data is refused
// with 64, and a scheduler stands by running nothing, each saying why.
func TestSchedulersWithOtherZoneDataAreRefused(t *testing.T) {
	t.Parallel()
	// Zone data in which "Europe/Berlin" is another zone's rules, as a
	// host whose tzdata predates a change of rules.
	other, err := os.ReadFile("/usr/share/zoneinfo/Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "Europe"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Europe", "Berlin"), other, 0o644); err != nil {
		t.Fatal(err)
	}
	d := newDB(t)
	args := d.args("--job", "j", "--schedule", "24 16 * * *", "--timezone", "Europe/Berlin", "--", "true")
	first := lw(t, nil, args...)
	first.WaitLog(t, "scheduler started")
	// A crontab line is refused; a scheduler stands by, running nothing.
	once := lw(t, []string{"ZONEINFO=" + dir}, append(args[:len(args)-2:len(args)-2], "--once", "--", "true")...)
	if code := once.Wait(t, 15*time.Second); code != cmdutil.ExitUsage {
		t.Fatalf("a --once line with other zone data exited %d, want 64; logs: %s", code, once.Logs)
	}
	if !strings.Contains(once.Logs.String(), "other zone data") {
		t.Errorf("the refusal does not say the zone data differ: %s", once.Logs)
	}
	second := lw(t, []string{"ZONEINFO=" + dir}, args...)
	standing := second.WaitLog(t, "standing by: the job runs on another schedule; this instance runs nothing until the job's is its own")
	if msg, _ := standing["error"].(string); !strings.Contains(msg, "other zone data") {
		t.Errorf("the scheduler standing by does not say the zone data differ: %v", standing)
	}
	// The same zone data are accepted.
	third := lw(t, nil, args...)
	third.WaitLog(t, "scheduler started")
	for _, p := range []*lwtest.Proc{first, second, third} {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		if code := p.Wait(t, 15*time.Second); code != 0 {
			t.Errorf("a scheduler stopped between runs exited %d, want 0", code)
		}
	}
}
