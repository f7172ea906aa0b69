//go:build linux

package runner_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/runner"
	"github.com/redbite/leasewrap/signals"
)

// The tests of orphans do not run in parallel: an orphan cannot be traced
// to its run, so it belongs to every run of the process at that moment.

// daemonLoop is a shell loop that appends to a file until it is killed,
// after writing its pid to another; ignoreTerm makes it ignore SIGTERM.
func daemonLoop(pidFile, out string, ignoreTerm bool) string {
	trap := ""
	if ignoreTerm {
		trap = `trap "" TERM; `
	}
	return trap + `echo $$ > ` + pidFile + `; while :; do echo x >> ` + out + `; sleep 0.05; done`
}

// shellChild runs script with sh -c; its stdout is read line by line.
func shellChild(t *testing.T, script string) *child {
	t.Helper()
	c := newChild(t, "")
	c.cmd.Path, c.cmd.Args = "/bin/sh", []string{"sh", "-c", script}
	return c
}

// waitFor is the shell loop that waits for files to be non-empty.
func waitFor(files ...string) string {
	var tests []string
	for _, f := range files {
		tests = append(tests, "[ ! -s "+f+" ]")
	}
	return `while ` + strings.Join(tests, " || ") + `; do sleep 0.01; done; `
}

// daemonPid reads the daemon's pid, and kills it at the end of a failed
// test, where Run may have left it running.
func daemonPid(t *testing.T, pidFile string) int {
	t.Helper()
	pid := lwtest.ReadPid(t, pidFile)
	t.Cleanup(func() {
		if t.Failed() {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	})
	return pid
}

// assertStopped checks that the daemon is gone, reaped, and writes no more.
func assertStopped(t *testing.T, pid int, out string) {
	t.Helper()
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("daemon %d still exists after Run returned (kill 0: %v)", pid, err)
	}
	// Writes every 50ms: a file unchanged for 300ms has no writer left.
	size := fileSize(t, out)
	deadline := time.Now().Add(5 * time.Second)
	for stable := time.Now(); time.Since(stable) < 300*time.Millisecond; time.Sleep(10 * time.Millisecond) {
		if s := fileSize(t, out); s != size {
			size, stable = s, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still grows 5s after Run returned", out)
		}
	}
	for _, p := range liveDescendants(t) {
		t.Errorf("process %d (parent %d, group %d) outlived Run", p.Pid, p.PPid, p.Pgid)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func liveDescendants(t *testing.T) []signals.Process {
	t.Helper()
	procs, err := signals.Processes()
	if err != nil {
		t.Fatal(err)
	}
	var live []signals.Process
	for _, p := range signals.Descendants(procs, os.Getpid(), nil) {
		if !p.Zombie {
			live = append(live, p)
		}
	}
	return live
}

func TestSetsidDaemonIsStoppedWhenTheChildExits(t *testing.T) {
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pid"), filepath.Join(dir, "out")
	c := shellChild(t, `setsid sh -c '`+daemonLoop(pidFile, out, false)+`' </dev/null >/dev/null 2>&1 & `+
		waitFor(pidFile, out)+`echo ready; exit 0`)
	r := start(t, c, newFakeLease(time.Hour), 5*time.Second, 0)
	c.expect(t, "ready")
	pid := daemonPid(t, pidFile)
	res := r.wait(t)
	if res.Status != 0 || res.Lost != nil {
		t.Errorf("result %+v, want the child's 0", res)
	}
	assertStopped(t, pid, out)
}

func TestSetsidDaemonIgnoringSIGTERMIsKilledWhenTheLeaseIsLost(t *testing.T) {
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pid"), filepath.Join(dir, "out")
	c := shellChild(t, `setsid sh -c '`+daemonLoop(pidFile, out, true)+`' </dev/null >/dev/null 2>&1 & `+
		waitFor(pidFile, out)+`echo ready; exec sleep 1000`)
	l := newFakeLease(time.Hour)
	const grace = 400 * time.Millisecond
	r := start(t, c, l, grace, 0)
	c.expect(t, "ready")
	pid := daemonPid(t, pidFile)
	lost := time.Now()
	l.lose(errStolen)
	res := r.wait(t)
	if took := time.Since(lost); took < grace {
		t.Errorf("Run returned %s after the loss, before the daemon's %s grace", took, grace)
	}
	if res.Status != 128+int(unix.SIGTERM) || res.Lost == nil {
		t.Errorf("result %+v, want status 143 and code 75", res)
	}
	assertStopped(t, pid, out)
}

func TestDoubleForkedDaemonIsStoppedWhenTheChildExits(t *testing.T) {
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pid"), filepath.Join(dir, "out")
	// fork, setsid, fork, and the middle process exits: the classic daemon.
	// The loop's pid file is written by its parent, which exits at once.
	daemon := strings.ReplaceAll(daemonLoop("/dev/null", out, false), `"`, `\"`)
	c := shellChild(t, `setsid sh -c 'sh -c "`+daemon+`" </dev/null >/dev/null 2>&1 & echo $! > `+pidFile+`' </dev/null; `+
		waitFor(pidFile, out)+`echo ready; exit 0`)
	r := start(t, c, newFakeLease(time.Hour), 5*time.Second, 0)
	c.expect(t, "ready")
	pid := daemonPid(t, pidFile)
	if res := r.wait(t); res.Status != 0 {
		t.Errorf("code %d, want the child's 0", res.Status)
	}
	assertStopped(t, pid, out)
}

// A stopped leftover is reaped by leasewrap at once, not left to PID 1 as a
// zombie that holds the group "alive" until PID 1 gets round to it or the
// grace is over: 1-2 s per stop where PID 1 reaps slowly, as in some
// containers (where it reaps promptly this test cannot tell the two apart).
func TestLeftoverThatStopsOnSIGTERMDoesNotCostTheGrace(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := shellChild(t, `sleep 1000 & echo $! > `+pidFile+`; echo ready; exit 0`)
	const grace = 5 * time.Second
	r := start(t, c, newFakeLease(time.Hour), grace, 0)
	c.expect(t, "ready")
	pid := daemonPid(t, pidFile)
	exited := time.Now()
	if res := r.wait(t); res.Status != 0 {
		t.Errorf("code %d, want the child's 0", res.Status)
	}
	if took := time.Since(exited); took > time.Second {
		t.Errorf("Run took %s to stop a leftover that dies on SIGTERM (grace %s)", took, grace)
	}
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("leftover %d not reaped after Run returned (kill 0: %v)", pid, err)
	}
}

// A child that leaves nothing behind ends its run without a read of the
// process table: leasewrap, a subreaper with no child left, has no
// descendant left, so one kill(2) on the child's group proves the run is
// over. On a busy host the table holds thousands of processes.
func TestARunThatLeavesNothingBehindReadsNoProcessTable(t *testing.T) {
	reads := runner.CountProcessTableReads(t)
	res := supervisor.Run(exec.Command("/bin/true"), newFakeLease(time.Hour), runner.Config{Log: zerolog.Nop()})
	if !res.Started || res.Status != 0 {
		t.Fatalf("result %+v, want true's 0", res)
	}
	if n := reads(); n != 0 {
		t.Errorf("the process table was read %d times after true exited, want 0", n)
	}
}

// The stop of what a child left behind ends at the reap of its last
// process, not at a later poll: here the polls never come.
func TestStopEndsAtTheReapOfTheLastLeftoverWithoutAPoll(t *testing.T) {
	waits := runner.FreezePollClock(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The leftover ignores SIGTERM and the grace is an hour: only the test
	// ends it.
	c := shellChild(t, `trap "" TERM; sleep 1000 & echo $! > `+pidFile+`; echo ready; exit 0`)
	r := start(t, c, newFakeLease(2*time.Hour), time.Hour, 0)
	c.expect(t, "ready")
	pid := daemonPid(t, pidFile)
	select {
	case <-waits: // the stop found the leftover alive and waits
	case res := <-r.res:
		t.Fatalf("Run returned %+v with the leftover %d alive", res, pid)
	case <-time.After(20 * time.Second):
		t.Fatal("the stop of the leftover never waited")
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if res := r.wait(t); res.Status != 0 {
		t.Errorf("code %d, want the child's 0", res.Status)
	}
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("leftover %d not reaped after Run returned (kill 0: %v)", pid, err)
	}
}
