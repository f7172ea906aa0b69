package command

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/testchild"
)

// underTerminal runs leasewrap with args in a pseudo-terminal (script(1)),
// lets interact type into it, and returns every line it showed.
func underTerminal(t *testing.T, env []string, args []string, interact func(tty io.Writer, screen *bufio.Scanner)) []string {
	t.Helper()
	if _, err := exec.LookPath("script"); err != nil {
		pgtest.Missing(t, "script(1) is needed for a pseudo-terminal (Debian package bsdutils)")
	}
	cmd := exec.Command("script", "-qec", strings.Join(append([]string{binary}, args...), " "), "/dev/null")
	cmd.Env = append(append(os.Environ(), testchild.NoRaceExitDelay), env...)
	tty, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan []string)
	go func() {
		screen := bufio.NewScanner(out)
		interact(tty, screen)
		var seen []string
		for screen.Scan() {
			seen = append(seen, strings.TrimSpace(screen.Text()))
		}
		lines <- seen
	}()
	select {
	case seen := <-lines:
		_ = cmd.Wait()
		return seen
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("leasewrap under a terminal did not finish")
		return nil
	}
}

// From an interactive terminal the child is in the foreground: it can read
// the terminal (a background group would be stopped by SIGTTIN), and Ctrl-C
// reaches it exactly once.
func TestChildOwnsTheTerminal(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	t.Run("reads stdin", func(t *testing.T) {
		seen := underTerminal(t, nil, d.args("--job", "tty-read", "--", "sh", "-c", "'read l; echo got:$l'"),
			func(tty io.Writer, _ *bufio.Scanner) { io.WriteString(tty, "hello\n") })
		if !contains(seen, "got:hello") {
			t.Errorf("child did not read the terminal: %q", seen)
		}
	})
	t.Run("ctrl-c once", func(t *testing.T) {
		seen := underTerminal(t, []string{child("trap ready block")}, d.args("--job", "tty-int", "--", self()),
			func(tty io.Writer, screen *bufio.Scanner) {
				for screen.Scan() && strings.TrimSpace(screen.Text()) != "ready" {
				}
				tty.Write([]byte{3}) // Ctrl-C
			})
		n := 0
		for _, line := range seen {
			if strings.HasSuffix(line, "signal SIGINT") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("child saw SIGINT %d times, want once: %q", n, seen)
		}
	})
}

// As PID 1 (a container entrypoint) leasewrap reaps the orphans its child
// leaves, during the run and after it, and still reports the child's status.
// Both verdicts follow events, not the machine's speed: the orphan's exit
// (its /proc entry goes once it is reaped, a zombie keeps it), and whether
// leasewrap had to escalate to SIGKILL for the process left behind.
func TestPID1ReapsOrphans(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		pgtest.Missing(t, "unshare --pid needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		pgtest.Missing(t, "unshare(1) is needed to run leasewrap as PID 1 (Debian package util-linux)")
	}
	if err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").Run(); err != nil {
		pgtest.Missing(t, "unshare --pid does not work here: %v", err)
	}
	d := newDB(t)
	orphan := filepath.Join(t.TempDir(), "orphan")
	// An orphan that exits during the run must be reaped: its /proc entry
	// goes (a zombie would keep it; the wait is only a bound for a hang).
	// One still running when the child exits (sleep 300, which dies on
	// SIGTERM) is stopped with the group at once: unreaped, its zombie would
	// keep the group alive until the grace ran out and SIGKILL was sent.
	script := `(sleep 0.1 & echo $! > ` + orphan + `); pid=$(cat ` + orphan + `); i=0; ` +
		`while [ -e /proc/$pid ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; ` +
		`echo zombies=$(grep -l '^State:.*Z' /proc/[0-9]*/status | wc -l); sleep 300 & exit 7`
	cmd := exec.Command("unshare", append([]string{"--pid", "--fork", "--mount-proc", binary},
		d.args("--job", "pid1", "--ttl", "10s", "--grace", "5s", "--", "sh", "-c", script)...)...)
	cmd.Env = append(os.Environ(), testchild.NoRaceExitDelay)
	var logs lwtest.SyncBuffer
	cmd.Stderr = &logs
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if got := cmd.ProcessState.ExitCode(); got != 7 {
		t.Errorf("exit %d, want the child's 7", got)
	}
	if !strings.Contains(string(out), "zombies=0") {
		t.Errorf("an orphan stayed a zombie under leasewrap as PID 1: %q", out)
	}
	if !strings.Contains(logs.String(), "child left processes behind; stopping them") {
		t.Errorf("leasewrap did not see the process left behind:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "child did not stop in time; sending SIGKILL") {
		t.Errorf("the leftover process was not reaped when SIGTERM ended it:\n%s", logs.String())
	}
}

func contains(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// A log reader that goes away (a closed pipe on stderr) must not kill the
// wrapper: that would orphan the child and lose its status.
func TestClosedStderrDoesNotKillTheWrapper(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	cmd := exec.Command(binary, d.args("--job", "epipe", "--log-level", "debug", "--", self())...)
	cmd.Env = append(os.Environ(), child("sleep:300ms exit:3"), testchild.NoRaceExitDelay)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // every write to stderr now fails with EPIPE
	cmd.Stderr = w
	err = cmd.Run()
	w.Close()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("leasewrap ended with %v, want the child's exit status 3", err)
	}
	if in := d.expiresIn(t, "epipe"); in > 0 {
		t.Errorf("lease still held for %s: it was not released", in)
	}
}
