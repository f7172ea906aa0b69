package main

import (
	"bufio"
	"bytes"
	"context"
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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/testchild"
)

// binary is the leasewrap built once for all tests of this package.
var (
	binary     string
	buildFlags []string
)

func TestMain(m *testing.M) {
	testchild.Main()
	dir, err := os.MkdirTemp("", "leasewrap-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "leasewrap")
	build := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", binary, ".")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build leasewrap:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running leasewrap with its child's stdout read line by line
// and its JSON logs kept.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string
	logs   *syncBuffer
	exited chan struct{}
	code   int
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lw starts leasewrap with args; env entries are added to the test's own.
// The test child's script, if any, goes in env as testchild.Env.
func lw(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), testchild.NoRaceExitDelay), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 64), logs: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			p.code = exit.ExitCode()
			if ws := exit.Sys().(syscall.WaitStatus); ws.Signaled() {
				p.code = 128 + int(ws.Signal())
			}
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("leasewrap %q logs:\n%s", args, p.logs)
		}
	})
	return p
}

// wait returns leasewrap's exit status, failing the test after timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("leasewrap still running after %s", timeout)
		return -1
	}
}

// expect waits for the child to print want.
func (p *proc) expect(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("output ended before %q", want)
			}
			if line == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q in time", want)
		}
	}
}

// logEntries parses leasewrap's JSON log lines.
func (p *proc) logEntries(t *testing.T) []map[string]any {
	t.Helper()
	var entries []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(p.logs.String()), "\n") {
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

// waitLog waits for a log entry with the given message and returns it.
func (p *proc) waitLog(t *testing.T, message string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, e := range p.logEntries(t) {
			if e["message"] == message {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q log line in time", message)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// db is a test's database and lease table, with leasewrap's common flags.
type db struct {
	pool  *pgxpool.Pool
	table string
}

func newDB(t *testing.T) db {
	pool := pgtest.Pool(t)
	return db{pool: pool, table: pgtest.Table(t, pool)}
}

// args returns leasewrap's arguments for this table with JSON logs, fast
// timings (TTL 2s, renew 300ms, grace 500ms, retry 100ms), then extra.
func (d db) args(extra ...string) []string {
	return append([]string{"--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json",
		"--ttl", "2s", "--renew-interval", "300ms", "--grace", "500ms", "--retry-interval", "100ms"}, extra...)
}

func (d db) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	sql = strings.ReplaceAll(sql, "TABLE", pgx.Identifier{d.table}.Sanitize())
	if _, err := d.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// expiresIn reads how long the database still considers the job's lease live.
func (d db) expiresIn(t *testing.T, job string) time.Duration {
	t.Helper()
	var micros int64
	err := d.pool.QueryRow(context.Background(), `SELECT (extract(epoch FROM expires_at - now()) * 1000000)::bigint FROM `+
		pgx.Identifier{d.table}.Sanitize()+` WHERE job_name = $1`, job).Scan(&micros)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(micros) * time.Microsecond
}

func (d db) holder(t *testing.T, job string) string {
	t.Helper()
	var h string
	err := d.pool.QueryRow(context.Background(), `SELECT holder FROM `+pgx.Identifier{d.table}.Sanitize()+
		` WHERE job_name = $1`, job).Scan(&h)
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return "" // no row, or no table yet
	}
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// child returns the environment entry that makes the test binary a scripted child.
func child(script string) string { return testchild.Env + "=" + script }

// self is the test binary, run as the scripted child.
func self() string { return os.Args[0] }

// interval is one child's run as recorded by testchild's record step.
type interval struct {
	start, end int64 // CLOCK_MONOTONIC ns; end is 0 when the child was killed
	token      int64
	holder     string
	pid        int
}

// readHistory parses a record file in order of starts.
func readHistory(t *testing.T, path string) []interval {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs []interval
	open := map[int]int{} // pid -> index in runs
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 5 && fields[0] == "start":
			ns, _ := strconv.ParseInt(fields[1], 10, 64)
			token, _ := strconv.ParseInt(fields[2], 10, 64)
			pid, _ := strconv.Atoi(fields[4])
			open[pid] = len(runs)
			runs = append(runs, interval{start: ns, token: token, holder: fields[3], pid: pid})
		case len(fields) == 3 && fields[0] == "end":
			ns, _ := strconv.ParseInt(fields[1], 10, 64)
			pid, _ := strconv.Atoi(fields[2])
			if i, ok := open[pid]; ok {
				runs[i].end = ns
			}
		default:
			t.Fatalf("bad history line %q", sc.Text())
		}
	}
	return runs
}

// processGone reports whether pid has exited (or is a zombie waiting for
// its parent to reap it).
func processGone(pid int) bool {
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

// waitGone polls until pid has exited, failing after timeout.
func waitGone(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running after %s", pid, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
