package command

import (
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// TestCommandCannotReadThePassword runs a command that looks for the
// database password where a process of the same user could find it: in
// leasewrap's environment (/proc/$PPID/environ) and in its own. It must
// find neither. Root reads every process's environment, so as root
// leasewrap and its command run as nobody (setpriv, from util-linux).
func TestCommandCannotReadThePassword(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux keeps a process's environment from the same user")
	}
	t.Parallel()
	const password = "s3cretPW42"
	u, err := url.Parse(pgtest.URL())
	if err != nil || u.User == nil {
		t.Fatalf("LEASEWRAP_TEST_DATABASE_URL must be a URL with a user for this test: %q", pgtest.URL())
	}
	u.User = url.UserPassword(u.User.Username(), password) // trust authentication ignores it
	d := newDB(t)

	bin, args := binary, []string(nil)
	if os.Geteuid() == 0 {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			pgtest.Missing(t, "setpriv is not installed (Debian package util-linux)")
		}
		bin, args = setpriv, []string{"--reuid=65534", "--regid=65534", "--clear-groups", worldExecutable(t, binary)}
	}
	// The command says whose environment it reads (its parent's command
	// line, world-readable), then tries to read it.
	script := `echo "parent: $(tr '\0' ' ' </proc/$PPID/cmdline)"
if cat /proc/$PPID/environ >/dev/null 2>&1; then echo "environ: readable"; else echo "environ: unreadable"; fi
cat /proc/$PPID/environ 2>&1 | tr '\0' '\n'
env
echo done`
	args = append(args, "--table", d.table, "--log-format", "json", "--job", "secret",
		"--", "sh", "-c", script)
	p := lwtest.Start(t, bin, []string{"LEASEWRAP_DATABASE_URL=" + u.String(), "DATABASE_URL=", "PGPASSWORD="}, args...)
	var lines []string
	for deadline := time.After(20 * time.Second); ; {
		line, ok := "", false
		select {
		case line, ok = <-p.Lines:
		case <-deadline:
			t.Fatalf("the command still runs after 20s; it printed:\n%s", shown(lines, password))
		}
		if !ok {
			break
		}
		lines = append(lines, line)
	}
	if got := p.Wait(t, 20*time.Second); got != 0 {
		t.Fatalf("exit status %d, want 0; the command printed:\n%s", got, shown(lines, password))
	}
	out := strings.Join(lines, "\n")
	printed := shown(lines, password)
	if !slices.ContainsFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "parent: ") && strings.Contains(l, "--job secret")
	}) {
		t.Fatalf("the command's parent is not leasewrap; it printed:\n%s", printed)
	}
	if !slices.Contains(lines, "done") {
		t.Fatalf("the command did not finish its script; it printed:\n%s", printed)
	}
	if !slices.Contains(lines, "environ: unreadable") || !strings.Contains(out, "Permission denied") {
		t.Errorf("the command could read leasewrap's environment, want permission denied; it printed:\n%s", printed)
	}
	if strings.Contains(out, password) {
		t.Errorf("the command found the password; it printed:\n%s", printed)
	}
	if strings.Contains(p.Logs.String(), password) {
		t.Errorf("leasewrap's output holds the password:\n%s", p.Logs)
	}
}

// shown is what the command printed, for a failure message, with the
// values of the environment left out (the test's own, which may hold a
// CI system's secrets) except where one holds the test's password.
func shown(lines []string, password string) string {
	var b strings.Builder
	for _, l := range lines {
		if name, value, ok := strings.Cut(l, "="); ok && !strings.ContainsAny(name, " :") && !strings.Contains(value, password) {
			l = name + "=..."
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// worldExecutable copies the leasewrap under test to a directory every user
// can enter, for running it as another user: the test's temporary
// directories are root's alone.
func worldExecutable(t *testing.T, path string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "leasewrap-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	copied := filepath.Join(dir, "leasewrap")
	dst, err := os.OpenFile(copied, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return copied
}
