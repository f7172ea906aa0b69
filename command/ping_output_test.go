package command

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// When leasewrap's own stderr goes away (`leasewrap ... 2>&1 | head`), the
// command's stderr, which --ping-output turns into a pipe, is still read to
// the end: the command runs to its own exit instead of blocking in write for
// ever under a lease renewed all along, and the final ping keeps its output
// and says what happened.
func TestPingOutputKeepsDrainingWhenStderrCloses(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	m := lwtest.NewMonitor(t, nil)
	start := filepath.Join(t.TempDir(), "go")
	// A megabyte is far more than a pipe holds: a copy that stopped at the
	// first failed write would leave the command blocked.
	script := `while [ ! -e "$0" ]; do sleep 0.05; done; head -c 1000000 /dev/zero | tr '\0' x >&2; echo END >&2; exit 3`
	cmd := exec.Command(binary, d.args("--job", "closed-stderr", "--ping-url", m.URL+"/check", "--ping-output",
		"--", "sh", "-c", script, start)...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	sc := bufio.NewScanner(r)
	for sc.Scan() && !strings.Contains(sc.Text(), `"acquired"`) {
	}
	r.Close() // as head does once it has read enough
	if err := os.WriteFile(start, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if cmd.ProcessState.ExitCode() != 3 {
			t.Fatalf("leasewrap ended with %v, want the command's exit status 3", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("leasewrap still running 60s after its stderr closed: the command is blocked writing to a pipe nobody reads")
	}
	var got []string
	pgtest.Eventually(t, 5*time.Second, "the final ping", func() bool { got = m.Lines(); return len(got) >= 2 })
	final := got[len(got)-1]
	if !strings.HasPrefix(final, "POST /check/3 ") || !strings.Contains(final, "xxxxEND\n") ||
		!strings.Contains(final, "could not be copied to leasewrap's own") {
		t.Errorf("final ping %.80q...%q, want status 3, the end of the output and a word on the closed stderr",
			final, final[max(0, len(final)-200):])
	}
}
