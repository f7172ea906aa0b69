//go:build linux

package examples

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireTool returns the path of an executable found on PATH. A missing one
// skips the test, or fails it under CI=true, where CI is expected to have
// installed it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found under CI=true: CI must install it (see .ci/run)", name)
		}
		t.Skipf("%s not installed", name)
	}
	return path
}

// repoFile returns the contents of a file of the repository, by its path
// from the repository's root.
func repoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// buildLeasewrap compiles leasewrap into dir and returns the binary's path.
func buildLeasewrap(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "leasewrap")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/redbite/leasewrap").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// replaceAll replaces every old, which must occur in s, with new.
func replaceAll(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("example no longer contains %q: update the test", old)
	}
	return strings.ReplaceAll(s, old, new)
}

// run is one life of the worker script, as it recorded it.
type run struct {
	start, end int64 // wall clock, ns since the epoch; end 0 if none written
	pid        int
	token      int64
	holder     string
}

// readHistory parses the worker script's record file, in order of starts.
func readHistory(t *testing.T, path string) []run {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs []run
	byPid := map[int]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 5 && fields[0] == "start":
			var r run
			var err1, err2, err3 error
			r.start, err1 = strconv.ParseInt(fields[1], 10, 64)
			r.pid, err2 = strconv.Atoi(fields[2])
			r.token, err3 = strconv.ParseInt(fields[3], 10, 64)
			if err := errors.Join(err1, err2, err3); err != nil {
				t.Fatalf("bad history line %q: %v", sc.Text(), err)
			}
			r.holder = fields[4]
			byPid[r.pid] = len(runs)
			runs = append(runs, r)
		case len(fields) == 3 && fields[0] == "end":
			ns, err1 := strconv.ParseInt(fields[1], 10, 64)
			pid, err2 := strconv.Atoi(fields[2])
			if err := errors.Join(err1, err2); err != nil {
				t.Fatalf("bad history line %q: %v", sc.Text(), err)
			}
			i, ok := byPid[pid]
			if !ok {
				t.Fatalf("history: end of pid %d that never started", pid)
			}
			runs[i].end = ns
		default:
			t.Fatalf("bad history line %q", sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].start < runs[j].start })
	return runs
}

// gone reports whether pid has exited (or is a zombie not yet reaped).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	state, _, ok := procStat(pid)
	return !ok || state == "Z" || state == "X"
}

// procStat returns a process's state letter and parent pid from /proc.
func procStat(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return fields[0], ppid, err == nil
}

// processes returns the live processes whose argument list satisfies match.
func processes(match func(argv []string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if match(argv) && !gone(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// poll calls cond every 20ms until it returns true, failing the test with
// what after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
