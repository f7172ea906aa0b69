//go:build linux

package command

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// openPty opens a pseudo-terminal: the side the test reads, and the
// terminal a process writes to.
func openPty(t *testing.T) (master, tty *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

// consoleLogs runs a cron-style leasewrap whose stderr is a terminal, or a
// pipe, and returns what it logged.
func consoleLogs(t *testing.T, d db, terminal bool, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	format := "auto"
	if !terminal {
		format = "console"
	}
	cmd := exec.CommandContext(ctx, binary, "--database-url", pgtest.URL(), "--table", d.table, "--log-format", format,
		"--job", "colour", "--", "true")
	cmd.Env = append(os.Environ(), env...)
	var pipe bytes.Buffer
	if !terminal {
		cmd.Stderr = &pipe
		if err := cmd.Run(); err != nil {
			t.Fatalf("leasewrap: %v: %s", err, pipe.String())
		}
		return pipe.String()
	}
	master, tty := openPty(t)
	cmd.Stderr = tty
	if err := cmd.Run(); err != nil {
		t.Fatalf("leasewrap: %v", err)
	}
	tty.Close()
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for {
		// Reading the master after the terminal closed ends with EIO.
		n, err := master.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return out.String()
}

// The console format has colours on a terminal only, and not with NO_COLOR
// set (no-color.org).
func TestConsoleColoursOnlyOnATerminalWithoutNoColor(t *testing.T) {
	d := newDB(t)
	const esc = "\x1b["
	if out := consoleLogs(t, d, true); !strings.Contains(out, esc) || !strings.Contains(out, "acquired") {
		t.Errorf("console logs on a terminal have no colour: %q", out)
	}
	if out := consoleLogs(t, d, true, "NO_COLOR=1"); strings.Contains(out, esc) || !strings.Contains(out, "acquired") {
		t.Errorf("console logs with NO_COLOR=1: %q, want no escape sequence", out)
	}
	if out := consoleLogs(t, d, false); strings.Contains(out, esc) || !strings.Contains(out, "acquired") {
		t.Errorf("--log-format console on a pipe: %q, want no escape sequence", out)
	}
}
