package runner_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/stall"
	"github.com/redbite/leasewrap/internal/testchild"
	"github.com/redbite/leasewrap/runner"
)

// supervisor runs every child of the tests, as leasewrap runs all of its
// own through one: the tests that run children at once must not take each
// other's for orphans.
var supervisor = runner.NewSupervisor()

func TestMain(m *testing.M) {
	testchild.Main()
	stall.Watch()
	zerolog.TimeFieldFormat = time.RFC3339Nano // log times to time the runner by
	os.Exit(m.Run())
}

// fakeLease lets a test end the lease at will; its deadline is on the
// monotonic clock.
type fakeLease struct {
	done          chan struct{}
	once          sync.Once
	mu            sync.Mutex
	err           error
	deadline      time.Time
	grace, margin time.Duration
}

func newFakeLease(validFor time.Duration) *fakeLease {
	return &fakeLease{done: make(chan struct{}), deadline: time.Now().Add(validFor)}
}

func (f *fakeLease) Done() <-chan struct{} { return f.done }
func (f *fakeLease) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
func (f *fakeLease) Grace() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.grace
}
func (f *fakeLease) KillIn() time.Duration { return f.Remaining() - f.margin }
func (f *fakeLease) Remaining() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Until(f.deadline)
}
func (f *fakeLease) setTimings(grace, margin time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grace, f.margin = grace, margin
}
func (f *fakeLease) setValidFor(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline = time.Now().Add(d)
}
func (f *fakeLease) lose(err error) {
	f.once.Do(func() {
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
		close(f.done)
	})
}

var errStolen = errors.New("lease lost: taken over")

// child is a scripted child process with its stdout read line by line.
type child struct {
	cmd   *exec.Cmd
	lines chan string
	w     *os.File // the write end of the child's stdout
}

func newChild(t *testing.T, script string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), testchild.Env+"="+script, testchild.NoRaceExitDelay)
	return newChildCmd(t, cmd)
}

// newShellChild runs a shell script as the child: a process whose end the
// kernel tears down at once, where a race-built test binary can take a
// loaded machine hundreds of milliseconds to unmap after SIGKILL.
func newShellChild(t *testing.T, script string) *child {
	t.Helper()
	return newChildCmd(t, exec.Command("/bin/sh", "-c", script))
}

func newChildCmd(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	c := &child{cmd: cmd, lines: make(chan string, 64), w: w}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { w.Close(); r.Close() })
	return c
}

// rest returns the lines c printed that no expect read, once c has exited
// (Run has returned): closing the pipe's write end ends the reading.
func (c *child) rest() []string {
	c.w.Close()
	var lines []string
	for line := range c.lines {
		lines = append(lines, line)
	}
	return lines
}

// expect waits for the child to print want, failing after a deadline.
func (c *child) expect(t *testing.T, want string) {
	t.Helper()
	lwtest.ExpectLine(t, c.lines, want, 10*time.Second)
}

type run struct {
	res  chan runner.Result
	sigs chan os.Signal
}

// start runs c under l, whose grace and margin it sets.
func start(t *testing.T, c *child, l *fakeLease, grace, margin time.Duration) *run {
	t.Helper()
	l.setTimings(grace, margin)
	r := &run{res: make(chan runner.Result, 1), sigs: make(chan os.Signal, 4)}
	go func() {
		r.res <- supervisor.Run(c.cmd, l, runner.Config{Signals: r.sigs, Log: zerolog.New(io.Discard)})
	}()
	return r
}

func (r *run) wait(t *testing.T) runner.Result {
	t.Helper()
	select {
	case res := <-r.res:
		return res
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return runner.Result{}
	}
}

func TestExitStatusPassesThrough(t *testing.T) {
	t.Parallel()
	for _, code := range []int{0, 1, 2, 42, 255} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			res := start(t, newChild(t, "exit:"+strconv.Itoa(code)), newFakeLease(time.Hour), time.Second, 0).wait(t)
			if res.Status != code || res.Lost != nil {
				t.Errorf("result %+v, want status and code %d", res, code)
			}
		})
	}
}

func TestDeathBySignalIs128PlusN(t *testing.T) {
	t.Parallel()
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGKILL} {
		name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := start(t, newChild(t, "kill:"+name), newFakeLease(time.Hour), time.Second, 0).wait(t)
			if want := 128 + int(sig); res.Status != want {
				t.Errorf("code %d, want %d", res.Status, want)
			}
		})
	}
}

func TestCommandNotFoundOrNotExecutable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noShebang := filepath.Join(dir, "garbage")
	if err := os.WriteFile(noShebang, []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want int
	}{
		{"leasewrap-no-such-command", runner.StatusNotFound},
		{filepath.Join(dir, "missing"), runner.StatusNotFound},
		{plain, runner.StatusNotExecutable},
		{dir, runner.StatusNotExecutable},
	} {
		_, err := runner.LookPath(tc.name)
		var exit *runner.StartError
		if !errors.As(err, &exit) || exit.Status != tc.want {
			t.Errorf("LookPath(%q) = %v, want exit %d", tc.name, err, tc.want)
		}
	}
	// Found and marked executable, but the kernel cannot run it.
	res := supervisor.Run(exec.Command(noShebang), newFakeLease(time.Hour), runner.Config{Log: zerolog.Nop()})
	if res.Status != runner.StatusNotExecutable {
		t.Errorf("unrunnable file: code %d, want 126", res.Status)
	}
}

func TestSignalsAreForwardedToTheChild(t *testing.T) {
	t.Parallel()
	for _, end := range []unix.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM} {
		t.Run(unix.SignalName(end), func(t *testing.T) {
			t.Parallel()
			c := newChild(t, "trap ready block")
			r := start(t, c, newFakeLease(time.Hour), time.Second, 0)
			c.expect(t, "ready")
			for _, sig := range []unix.Signal{unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH} {
				r.sigs <- sig
				c.expect(t, "signal "+unix.SignalName(sig))
			}
			r.sigs <- end
			c.expect(t, "signal "+unix.SignalName(end))
			if res := r.wait(t); res.Status != 128+int(end) {
				t.Errorf("code %d after forwarded %s, want %d", res.Status, unix.SignalName(end), 128+int(end))
			}
		})
	}
}

func TestLeaseLossSendsSIGTERMAndExits75(t *testing.T) {
	t.Parallel()
	c := newChild(t, "trap ready block")
	l := newFakeLease(time.Hour)
	r := start(t, c, l, 5*time.Second, 0)
	c.expect(t, "ready")
	l.lose(errStolen)
	c.expect(t, "signal SIGTERM")
	res := r.wait(t)
	if res.Status != 143 || !errors.Is(res.Lost, errStolen) {
		t.Errorf("result %+v, want status 143, code 75 and the loss reason", res)
	}
}

func TestChildIgnoringSIGTERMIsKilledAfterGraceWithItsGrandchildren(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	c := newChild(t, "ignore-term grandchild:"+pidFile+" ready block")
	l := newFakeLease(time.Hour)
	const grace = 400 * time.Millisecond
	r := start(t, c, l, grace, 0)
	c.expect(t, "ready")
	grandchild := lwtest.ReadPid(t, pidFile)
	lost := time.Now()
	l.lose(errStolen)
	c.expect(t, "signal SIGTERM")
	res := r.wait(t)
	took := time.Since(lost)
	if res.Status != 128+int(unix.SIGKILL) {
		t.Errorf("result %+v, want status 137 and code 75", res)
	}
	if took < grace {
		t.Errorf("SIGKILL came %s after SIGTERM, before the %s grace", took, grace)
	}
	if !lwtest.ProcessGone(grandchild) {
		t.Errorf("grandchild %d still runs after Run returned", grandchild)
	}
}

func TestChildIsKilledBeforeTheDeadlineEvenWithinGrace(t *testing.T) {
	t.Parallel()
	// The deadline is the runner's to keep, not the teardown of a large
	// process: the child is a shell that ignores SIGTERM.
	c := newShellChild(t, `trap '' TERM; echo ready; while :; do sleep 1; done`)
	l := newFakeLease(time.Hour)
	const validFor, margin = time.Second, 500 * time.Millisecond
	r := start(t, c, l, time.Hour, margin)
	c.expect(t, "ready")
	l.setValidFor(validFor)
	lost := time.Now()
	l.lose(errors.New("no renewal succeeded in time"))
	res := r.wait(t)
	left, stalled := l.Remaining(), stall.Since(lost)
	if res.Status != 128+int(unix.SIGKILL) {
		t.Errorf("status %d, want 137", res.Status)
	}
	// SIGKILL is due with the 500ms margin left; the child must be reaped
	// well before the deadline. The runner runs in this process, so a
	// machine that kept this process from a core kept the runner too: what
	// the stall meter saw since the loss comes off the margin it must keep.
	if left < margin/2-stalled {
		t.Errorf("child reaped with only %s left before the deadline (this process stalled %s)", left, stalled)
	}
}

func TestNoChildStartsOnALeaseInDoubt(t *testing.T) {
	t.Parallel()
	l := newFakeLease(time.Hour)
	l.lose(errStolen)
	res := supervisor.Run(exec.Command("/bin/true"), l, runner.Config{Log: zerolog.Nop()})
	if res.Started {
		t.Errorf("result %+v, want not started and exit 75", res)
	}
}

func TestProcessesLeftBehindAreStoppedBeforeRunReturns(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	c := newChild(t, "grandchild:"+pidFile+" exit:0")
	res := start(t, c, newFakeLease(time.Hour), 300*time.Millisecond, 0).wait(t)
	if res.Status != 0 {
		t.Errorf("code %d, want the child's 0", res.Status)
	}
	if pid := lwtest.ReadPid(t, pidFile); !lwtest.ProcessGone(pid) {
		t.Errorf("grandchild %d outlived Run", pid)
	}
}

func TestOutsideSIGTERMStopsAChildIgnoringItAfterGrace(t *testing.T) {
	t.Parallel()
	c := newChild(t, "ignore-term ready block")
	const grace = 2 * time.Second
	var logs lwtest.SyncBuffer
	sigs := make(chan os.Signal, 4)
	res := make(chan runner.Result, 1)
	go func() {
		l := newFakeLease(time.Hour)
		l.setTimings(grace, 0)
		res <- supervisor.Run(c.cmd, l, runner.Config{Signals: sigs, Log: zerolog.New(&logs).With().Timestamp().Logger()})
	}()
	c.expect(t, "ready")
	sent := time.Now()
	sigs <- unix.SIGTERM
	c.expect(t, "signal SIGTERM")
	// A second one, well into the grace, is forwarded but moves nothing.
	time.Sleep(grace * 6 / 10)
	sigs <- unix.SIGTERM
	c.expect(t, "signal SIGTERM")
	var got runner.Result
	select {
	case got = <-res:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return: SIGTERM from outside never escalated")
	}
	took := time.Since(sent)
	if got.Status != 128+int(unix.SIGKILL) || got.Lost != nil {
		t.Errorf("result %+v, want the child's own 137", got)
	}
	if took < grace {
		t.Errorf("Run returned %s after SIGTERM, before the %s grace", took, grace)
	}
	// Had the second signal restarted the grace, SIGKILL would come at 1.6x.
	// Timed by the runner's own log lines, so that how fast this test and
	// the child are scheduled does not enter it.
	const want = "received SIGTERM, stopping the command (grace 2s)"
	termed, killed := logTime(t, logs.String(), "info", want), logTime(t, logs.String(), "warn", "child did not stop in time; sending SIGKILL")
	if took := killed.Sub(termed); took > grace*145/100 {
		t.Errorf("SIGKILL came %s after SIGTERM, want within [%s, %s]", took, grace, grace*145/100)
	}
}

// logTime returns the time of the JSON log line with level and message.
func logTime(t *testing.T, logs, level, message string) time.Time {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if e["level"] == level && e["message"] == message {
			return lwtest.EntryTime(t, e)
		}
	}
	t.Fatalf("no %s line %q in logs:\n%s", level, message, logs)
	return time.Time{}
}

// A child that runs past MaxRuntime is stopped as for a lost lease: SIGTERM,
// then SIGKILL after the grace if it ignores it. The verdict needs the
// child's trap in place before the stop (else SIGTERM's default action ends
// it, whatever the runner does): the child says so by printing "ready" or
// the signal it trapped. A run stopped before that, on a machine too busy
// to start the child within MaxRuntime, is tried again with twice the
// MaxRuntime; nothing is judged from it.
func TestMaxRuntimeStopsAHungChild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script string
		status int
	}{{"trap ready block", 128 + int(unix.SIGTERM)}, {"ignore-term ready block", 128 + int(unix.SIGKILL)}} {
		t.Run(tc.script, func(t *testing.T) {
			t.Parallel()
			const grace = 300 * time.Millisecond
			for maxRuntime := 300 * time.Millisecond; maxRuntime <= 5*time.Second; maxRuntime *= 2 {
				c := newChild(t, tc.script)
				l := newFakeLease(time.Hour)
				l.setTimings(grace, 0)
				res := make(chan runner.Result, 1)
				began := time.Now()
				go func() {
					res <- supervisor.Run(c.cmd, l, runner.Config{MaxRuntime: maxRuntime, Log: zerolog.New(io.Discard)})
				}()
				var got runner.Result
				select {
				case got = <-res:
				case <-time.After(20 * time.Second):
					t.Fatal("Run did not return: --max-runtime never stopped the child")
				}
				took := time.Since(began)
				if lines := c.rest(); !slices.Contains(lines, "ready") && !slices.Contains(lines, "signal SIGTERM") {
					t.Logf("child stopped before its trap was in place (MaxRuntime %s, output %q): trying again", maxRuntime, lines)
					continue
				}
				if !got.TimedOut || got.Status != tc.status || got.Lost != nil {
					t.Errorf("result %+v, want timed out with status %d", got, tc.status)
				}
				if took < maxRuntime {
					t.Errorf("stopped after %s, before --max-runtime %s", took, maxRuntime)
				}
				return
			}
			t.Fatal("the child never got its trap in place before --max-runtime, even at 5s")
		})
	}
}
