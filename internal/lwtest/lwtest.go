// Package lwtest runs the real leasewrap binary in tests: it builds it once,
// starts it with a scripted child, reads the child's output and leasewrap's
// JSON logs, and parses the run history the child records. It also holds
// the helpers several packages' tests share: an HTTP get, a stand-in ping
// monitor and an inspect.Reader.
package lwtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/stall"
	"github.com/redbite/leasewrap/internal/testchild"
)

// Build compiles leasewrap into dir (with -race when the tests themselves
// run with it) and returns the binary's path. It uses the shipped binary's
// build tag, urfave_cli_no_docs, so that tests run what users run.
func Build(dir string) (string, error) {
	binary := filepath.Join(dir, "leasewrap")
	args := []string{"build", "-tags", "urfave_cli_no_docs", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/redbite/leasewrap")...)
	build.Stderr = os.Stderr
	return binary, build.Run()
}

// Child returns the environment entry that makes the test binary a scripted
// child (see package testchild).
func Child(script string) string { return testchild.Env + "=" + script }

// Self is the test binary, to run as the scripted child.
func Self() string { return os.Args[0] }

// Proc is one running leasewrap with its child's stdout read line by line
// and its logs kept.
type Proc struct {
	Cmd    *exec.Cmd
	Lines  chan string   // the child's stdout, closed at its end
	Logs   *SyncBuffer   // leasewrap's stderr
	Exited chan struct{} // closed once leasewrap has exited
	code   int
}

// SyncBuffer is a bytes.Buffer safe for one writer and many readers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start runs binary with args; env entries are added to the test's own (the
// child's script goes there, see Child). It is killed when the test ends.
func Start(t testing.TB, binary string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), testchild.NoRaceExitDelay), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{Cmd: cmd, Lines: make(chan string, 64), Logs: &SyncBuffer{}, Exited: make(chan struct{})}
	cmd.Stderr = p.Logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.Lines <- sc.Text()
		}
		close(p.Lines)
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			p.code = exit.ExitCode()
			if ws := exit.Sys().(syscall.WaitStatus); ws.Signaled() {
				p.code = 128 + int(ws.Signal())
			}
		}
		close(p.Exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.Exited
		if t.Failed() {
			t.Logf("leasewrap %q logs:\n%s", args, p.Logs)
		}
	})
	return p
}

// Every wait below is bounded against a hang, not timed: its timeout
// stretches by what this process and leasewrap waited for a core
// meanwhile (stall.Window), so that a starved machine is not a failure.

// pollEvery is how often a wait looks again.
const pollEvery = 10 * time.Millisecond

// Window opens a stall window over this process and leasewrap: a bound on
// leasewrap's timers adds what the window measured (Window.Late).
func (p *Proc) Window() *stall.Window { return stall.Open(p.Cmd.Process.Pid) }

// Wait returns leasewrap's exit status, failing the test after timeout.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	window := p.Window()
	for {
		select {
		case <-p.Exited:
			return p.code
		case <-time.After(pollEvery):
			if !window.Within(timeout) {
				t.Fatalf("leasewrap still running after %s (+%s stalled)", timeout, window.Stalled())
			}
		}
	}
}

// Expect waits for the child to print want.
func (p *Proc) Expect(t testing.TB, want string) {
	t.Helper()
	expectLine(t, p.Lines, want, p.Window(), 15*time.Second)
}

// ExpectLine reads lines until one is want, failing the test if they end or
// the timeout passes first.
func ExpectLine(t testing.TB, lines <-chan string, want string, timeout time.Duration) {
	t.Helper()
	expectLine(t, lines, want, stall.Open(), timeout)
}

func expectLine(t testing.TB, lines <-chan string, want string, window *stall.Window, timeout time.Duration) {
	t.Helper()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("output ended before %q", want)
			}
			if line == want {
				return
			}
		case <-time.After(pollEvery):
			if !window.Within(timeout) {
				t.Fatalf("no %q within %s (+%s stalled)", want, timeout, window.Stalled())
			}
		}
	}
}

// LogEntries parses leasewrap's JSON log lines.
func (p *Proc) LogEntries(t testing.TB) []map[string]any {
	t.Helper()
	var entries []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(p.Logs.String()), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		entries = append(entries, e)
	}
	return entries
}

// WaitLog waits for a log entry with the given message and returns it,
// failing the test at once if leasewrap exits without logging it.
func (p *Proc) WaitLog(t testing.TB, message string) map[string]any {
	t.Helper()
	const timeout = 15 * time.Second
	window := p.Window()
	for {
		select {
		case <-p.Exited:
			// Its last lines are in the buffer now: one more look.
			if e := p.findLog(t, message); e != nil {
				return e
			}
			t.Fatalf("leasewrap exited %d without logging %q", p.code, message)
		default:
		}
		if e := p.findLog(t, message); e != nil {
			return e
		}
		if !window.Within(timeout) {
			t.Fatalf("no %q log line within %s (+%s stalled)", message, timeout, window.Stalled())
		}
		time.Sleep(pollEvery)
	}
}

// findLog returns the first log entry with message, or nil.
func (p *Proc) findLog(t testing.TB, message string) map[string]any {
	t.Helper()
	for _, e := range p.LogEntries(t) {
		if e["message"] == message {
			return e
		}
	}
	return nil
}

// Interval is one child's run as recorded by testchild's record step.
type Interval struct {
	Start, End int64 // CLOCK_MONOTONIC ns; End is 0 when the child was killed
	Token      int64
	Holder     string
	Pid        int
	// ScheduledAt is the scheduled time the run was for (zero: none).
	ScheduledAt time.Time
}

// ReadHistory parses a record file, in order of starts; a missing file is
// an empty history.
func ReadHistory(t testing.TB, path string) []Interval {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs []Interval
	open := map[int]int{} // pid -> index in runs
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case (len(fields) == 5 || len(fields) == 6) && fields[0] == "start":
			ns, _ := strconv.ParseInt(fields[1], 10, 64)
			token, _ := strconv.ParseInt(fields[2], 10, 64)
			pid, _ := strconv.Atoi(fields[4])
			open[pid] = len(runs)
			r := Interval{Start: ns, Token: token, Holder: fields[3], Pid: pid}
			if len(fields) == 6 {
				r.ScheduledAt, _ = time.Parse(time.RFC3339Nano, fields[5])
			}
			runs = append(runs, r)
		case len(fields) == 3 && fields[0] == "end":
			ns, _ := strconv.ParseInt(fields[1], 10, 64)
			pid, _ := strconv.Atoi(fields[2])
			if i, ok := open[pid]; ok {
				runs[i].End = ns
			}
		default:
			t.Fatalf("bad history line %q", sc.Text())
		}
	}
	return runs
}

// ProcessGone reports whether pid has exited (or is a zombie waiting for
// its parent to reap it).
func ProcessGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// WaitGone polls until pid has exited, failing after timeout.
func WaitGone(t testing.TB, pid int, timeout time.Duration) {
	t.Helper()
	window := stall.Open(pid)
	for !ProcessGone(pid) {
		if !window.Within(timeout) {
			t.Fatalf("process %d still running after %s (+%s stalled)", pid, timeout, window.Stalled())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ReadPid waits for a file to hold a process id and returns it.
func ReadPid(t testing.TB, path string) int {
	t.Helper()
	window := stall.Open()
	for {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		if !window.Within(10 * time.Second) {
			t.Fatalf("no pid in %s within 10s (+%s stalled)", path, window.Stalled())
		}
		time.Sleep(pollEvery)
	}
}

// Code is leasewrap's exit status once Exited is closed.
func (p *Proc) Code() int { return p.code }

// Main is a TestMain for packages that run the real binary: it turns the
// test binary into the scripted child when asked to (testchild.Main),
// starts the stall meter (stall.Since), builds leasewrap into a
// temporary directory and stores its path in *binary, runs the tests, and
// exits.
func Main(m *testing.M, binary *string) {
	testchild.Main()
	stall.Watch()
	dir, err := os.MkdirTemp("", "leasewrap-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *binary, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "build leasewrap:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// EntryTime is when leasewrap wrote the JSON log entry e, by its "time"
// field (the same machine's clock as the test's).
func EntryTime(t testing.TB, e map[string]any) time.Time {
	t.Helper()
	s, _ := e["time"].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("log entry %v: no time: %v", e, err)
	}
	return at
}
