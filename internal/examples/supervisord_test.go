//go:build linux

package examples

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// Timings given to the replicas through the environment line, and the slack
// a loaded machine gets on the handoff after the leader's lease expired.
const (
	ttl           = 3 * time.Second
	retryInterval = 200 * time.Millisecond
	handoffSlack  = 2 * time.Second
)

// workerScript records each of its lives in HISTORY ("start NS TOKEN HOLDER
// PID", and "end NS PID" on SIGTERM, as lwtest.ReadHistory reads them) and
// otherwise idles.
const workerScript = `#!/bin/sh
echo "start $(date +%s%N) $LEASEWRAP_FENCING_TOKEN $LEASEWRAP_HOLDER $$" >> HISTORY
trap 'echo "end $(date +%s%N) $$" >> HISTORY; exit 0' TERM
while :; do sleep 0.05; done
`

// TestSupervisordThreeReplicas runs examples/supervisord.conf (numprocs=3,
// --wait) against the test database, SIGKILLs the leader's leasewrap and
// checks that exactly one worker runs at any time, that a standby takes over
// within the retry interval (+ slack) of the killed leader's expiry, and that a supervisorctl shutdown
// stops the worker with SIGTERM and releases the lease.
func TestSupervisordThreeReplicas(t *testing.T) {
	supervisord := requireTool(t, "supervisord")
	supervisorctl := requireTool(t, "supervisorctl")
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)

	dir := t.TempDir()
	bin, err := lwtest.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	history := filepath.Join(dir, "history")
	script := filepath.Join(dir, "worker.sh")
	if err := os.WriteFile(script, []byte(strings.ReplaceAll(workerScript, "HISTORY", strconv.Quote(history))), 0o755); err != nil {
		t.Fatal(err)
	}

	// The example's program section, pointed at this test's binary, script,
	// logs, database and table, after a header that gives supervisord its own
	// socket, pid file and log in dir.
	conf := repoFile(t, "examples/supervisord.conf")
	conf = replaceAll(t, conf, "/usr/bin/leasewrap", bin)
	conf = replaceAll(t, conf, "/opt/worker/run", script)
	conf = replaceAll(t, conf, "/var/log/supervisor/", dir+"/")
	env := fmt.Sprintf(`environment=LEASEWRAP_DATABASE_URL="%s",LEASEWRAP_TABLE="%s",`+
		`LEASEWRAP_TTL="%s",LEASEWRAP_RENEW_INTERVAL="500ms",LEASEWRAP_GRACE="1s",`+
		`LEASEWRAP_RETRY_INTERVAL="%s",LEASEWRAP_LOG_FORMAT="json"`,
		strings.ReplaceAll(pgtest.URL(), "%", "%%"), table, ttl, retryInterval)
	lines := strings.Split(conf, "\n")
	n := 0
	for i, line := range lines {
		if strings.HasPrefix(line, "environment=") {
			lines[i] = env
			n++
		}
	}
	if n != 1 {
		t.Fatalf("examples/supervisord.conf has %d environment= lines, want 1: update the test", n)
	}
	sock := filepath.Join(dir, "s.sock")
	header := fmt.Sprintf(`[supervisord]
nodaemon=true
logfile=%[1]s/supervisord.log
pidfile=%[1]s/supervisord.pid
childlogdir=%[1]s

[unix_http_server]
file=%[2]s

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://%[2]s

`, dir, sock)
	confPath := filepath.Join(dir, "supervisord.conf")
	if err := os.WriteFile(confPath, []byte(header+strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}

	sup := startSupervisord(t, supervisord, supervisorctl, confPath, dir)

	// Three wrappers up for startsecs, and one worker started.
	var pids []int
	poll(t, 30*time.Second, "3 RUNNING replicas and a worker started", func() bool {
		pids = sup.runningPids(t)
		return len(pids) == 3 && len(lwtest.ReadHistory(t, history)) > 0
	})
	isWorker := func(argv []string) bool { return len(argv) >= 2 && argv[1] == script }
	runs := lwtest.ReadHistory(t, history)
	if workers := processes(isWorker); len(runs) != 1 || len(workers) != 1 {
		t.Fatalf("want exactly one worker running, got %d started, processes %v", len(runs), workers)
	}
	first := runs[0]
	_, wrapper, ok := procStat(first.Pid)
	if !ok || !slices.Contains(pids, wrapper) {
		t.Fatalf("worker %d's parent %d is not one of supervisord's replicas %v", first.Pid, wrapper, pids)
	}

	// Crash the leader's wrapper. Its worker dies by the parent-death signal,
	// without writing "end": the moment it is seen gone stands for its end.
	if err := syscall.Kill(wrapper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	poll(t, 2*time.Second, "the killed leader's worker to die", func() bool { return lwtest.ProcessGone(first.Pid) })
	firstGone := time.Now().UnixNano()

	poll(t, ttl+retryInterval+handoffSlack+10*time.Second, "a standby's worker to start", func() bool { return len(lwtest.ReadHistory(t, history)) > 1 })
	runs = lwtest.ReadHistory(t, history)
	second := runs[1]
	// The handoff is timed on the database clock, from the killed leader's
	// expiry (its run closed as lost at the expiry the take found) to the
	// standby's take: how fast the worker then starts does not enter it.
	expired, taken := takeover(t, pool, table, first.Holder)
	handoff := taken.Sub(expired)
	t.Logf("standby took the lease %s after the killed leader's expired (%s after SIGKILL)", handoff, time.Since(killedAt))
	if handoff < 0 {
		t.Errorf("standby took the lease %s before the killed leader's expired", -handoff)
	}
	if bound := retryInterval + handoffSlack; handoff > bound {
		t.Errorf("standby took over %s after the killed leader's lease expired, want at most %s", handoff, bound)
	}
	if second.Start <= firstGone {
		t.Errorf("second worker started before the first was seen gone (%s early)", time.Duration(firstGone-second.Start))
	}
	if second.Token <= first.Token || second.Holder == first.Holder {
		t.Errorf("takeover kept token %d / holder %s (was %d / %s)", second.Token, second.Holder, first.Token, first.Holder)
	}
	if workers := processes(isWorker); len(runs) != 2 || !slices.Equal(workers, []int{second.Pid}) {
		t.Fatalf("want only worker %d running, got %d started, processes %v", second.Pid, len(runs), workers)
	}

	// supervisord restarts the killed replica, which stands by.
	poll(t, 15*time.Second, "3 RUNNING replicas again", func() bool { return len(sup.runningPids(t)) == 3 })
	if runs = lwtest.ReadHistory(t, history); len(runs) != 2 {
		t.Fatalf("a restarted standby started a worker: %d runs", len(runs))
	}

	// Shutdown: stopsignal TERM reaches the worker through leasewrap, which
	// releases the lease before stopwaitsecs.
	sup.shutdown(t)
	runs = lwtest.ReadHistory(t, history)
	last := runs[len(runs)-1]
	if last.End == 0 {
		t.Errorf("worker %d wrote no end: SIGTERM did not reach it", last.Pid)
	}
	ends := []int64{firstGone}
	for _, r := range runs[1:] {
		ends = append(ends, r.End)
	}
	for i := 1; i < len(runs); i++ {
		if ends[i-1] == 0 || ends[i-1] >= runs[i].Start {
			t.Errorf("workers overlap: %+v ended at %d, %+v started", runs[i-1], ends[i-1], runs[i])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var released bool
	err = pool.QueryRow(ctx, "SELECT expires_at <= now() FROM "+pgx.Identifier{table}.Sanitize()+" WHERE job_name = $1", "worker").Scan(&released)
	if err != nil {
		t.Fatalf("read the lease: %v", err)
	}
	if !released {
		t.Errorf("lease still live after supervisord shut down: not released")
	}
}

// supervisor is a supervisord started by the test.
type supervisor struct {
	ctl    string // supervisorctl path
	conf   string
	dir    string
	exited chan struct{}
}

// startSupervisord runs supervisord in the foreground on conf. When the
// test ends, it is shut down if still running, and every process left whose
// arguments mention dir is killed and reported.
func startSupervisord(t *testing.T, supervisord, supervisorctl, conf, dir string) *supervisor {
	t.Helper()
	out, err := os.Create(filepath.Join(dir, "supervisord.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(supervisord, "-n", "-c", conf)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	// The test's own LEASEWRAP_* settings must not reach the replicas.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASEWRAP_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &supervisor{ctl: supervisorctl, conf: conf, dir: dir, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = exec.Command(s.ctl, "-c", s.conf, "shutdown").Run()
			select {
			case <-s.exited:
			case <-time.After(30 * time.Second):
				t.Errorf("supervisord did not shut down in 30s; killing it")
				_ = cmd.Process.Kill()
				<-s.exited
			}
		}
		for _, pid := range s.leftovers() {
			t.Errorf("process %d left running after supervisord exited; killing it", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			for _, name := range append([]string{filepath.Join(dir, "supervisord.out")}, logs...) {
				b, _ := os.ReadFile(name)
				t.Logf("%s:\n%s", filepath.Base(name), b)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "history"))
			t.Logf("history:\n%s", b)
		}
	})
	return s
}

// runningPids returns the pids of the replicas supervisorctl shows RUNNING.
func (s *supervisor) runningPids(t *testing.T) []int {
	t.Helper()
	// Exit status 3 means some process is not RUNNING: read the output anyway.
	out, _ := exec.Command(s.ctl, "-c", s.conf, "status").Output()
	var pids []int
	for _, line := range strings.Split(string(out), "\n") {
		// worker:worker_0   RUNNING   pid 1234, uptime 0:00:02
		f := strings.Fields(line)
		if len(f) >= 4 && f[1] == "RUNNING" && f[2] == "pid" {
			if pid, err := strconv.Atoi(strings.TrimSuffix(f[3], ",")); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// shutdown stops supervisord with supervisorctl and waits until it and
// everything it ran have exited.
func (s *supervisor) shutdown(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(s.ctl, "-c", s.conf, "shutdown").CombinedOutput(); err != nil {
		t.Fatalf("supervisorctl shutdown: %v\n%s", err, out)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("supervisord still running 30s after shutdown")
	}
	poll(t, 5*time.Second, "no process of the test left", func() bool { return len(s.leftovers()) == 0 })
}

// leftovers returns the live processes whose arguments mention the test's
// directory: supervisord, the replicas and the workers.
func (s *supervisor) leftovers() []int {
	return processes(func(argv []string) bool {
		return slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, s.dir) })
	})
}

// takeover reads, on the database clock, when the lease of holder's run
// expired (the take that followed closed the run as lost at that expiry)
// and when the current holder took it.
func takeover(t *testing.T, pool *pgxpool.Pool, table, holder string) (expired, taken time.Time) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT h.finished_at, l.acquired_at FROM `+
		pgx.Identifier{table + lease.HistorySuffix}.Sanitize()+` h JOIN `+pgx.Identifier{table}.Sanitize()+` l USING (job_name)
WHERE h.holder = $1 AND h.outcome = $2`, holder, lease.OutcomeLost).Scan(&expired, &taken)
	if err != nil {
		t.Fatalf("%s's run closed as lost, and its successor's take: %v", holder, err)
	}
	return expired, taken
}
