package command

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/testchild"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/monitor"
)

// A wrapper whose loops are stuck answers 503 on /livez once none turned
// within monitor.StuckAfter, while its HTTP server still serves: here a
// scheduler whose log pipe is full (a log collector that stopped
// reading), so that every goroutine that logs, its loop and the lease's
// keeper among them, blocks in a write to stderr.
func TestLivezFailsWhenTheLoopIsStuck(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	const ttl = 3 * time.Second
	bound := monitor.StuckAfter(lease.DeriveTimings(ttl))
	// Debug logs: a line at every renewal and every run.
	cmd := exec.Command(binary, d.argsTTL(ttl.String(), "--job", "j", "--schedule", "@every 1s", "--log-level", "debug",
		"--http-addr", "127.0.0.1:0", "--", self())...)
	cmd.Env = append(os.Environ(), testchild.NoRaceExitDelay, child("exit:0"))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		r.Close()
		w.Close()
	})

	// Read the logs until the scheduler has run a time, noting where it
	// serves.
	var (
		addr string
		logs bytes.Buffer
	)
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 1<<16), 1<<20)
	for ran := false; addr == "" || !ran; {
		if !lines.Scan() {
			t.Fatalf("leasewrap's logs ended (%v) before it ran a time:\n%s", lines.Err(), logs.String())
		}
		logs.Write(append(lines.Bytes(), '\n'))
		var e map[string]any
		if json.Unmarshal(lines.Bytes(), &e) != nil {
			continue
		}
		if a, ok := e["http_addr"].(string); ok {
			addr = a
		}
		ran = ran || e["message"] == "child exited"
	}
	t.Logf("ran; serving on %s", addr)
	if code, body := get(t, addr, "/livez"); code != 200 {
		t.Fatalf("/livez while running: %d %q, want 200", code, body)
	}

	// Stop reading, and fill the pipe: leasewrap's next log line blocks.
	// (The write end is in blocking mode since exec passed it on: it is
	// full once a write has been stuck for a while.)
	var lastWrite atomic.Int64
	lastWrite.Store(time.Now().UnixNano())
	go func() {
		for chunk := bytes.Repeat([]byte("x"), 4096); ; lastWrite.Store(time.Now().UnixNano()) {
			if _, err := w.Write(chunk); err != nil {
				return // the test ended and closed the read end
			}
		}
	}()
	pgtest.Eventually(t, 30*time.Second, "the log pipe full", func() bool {
		return time.Since(time.Unix(0, lastWrite.Load())) > time.Second
	})
	t.Log("pipe full")
	stuck := time.Unix(0, lastWrite.Load())
	var body string
	pgtest.Eventually(t, bound+30*time.Second, "/livez answering 503", func() bool {
		var code int
		code, body = get(t, addr, "/livez")
		return code == 503
	})
	if waited := time.Since(stuck); waited < bound-2*time.Second {
		t.Errorf("/livez failed %s after the loop stuck, before the bound of %s", waited.Round(time.Millisecond), bound)
	}
	if !strings.Contains(body, "stuck") {
		t.Errorf("/livez: %q, want it to say the process is stuck", body)
	}
	select {
	case err := <-exited:
		t.Fatalf("leasewrap exited (%v), want it stuck", err)
	default:
	}
}

// The exporter through a database outage: /livez (and /healthz) stay
// 200, as a restart would not bring the database back; /readyz answers
// 503 with the failure while it cannot read the jobs, and 200 once it can.
func TestExporterProbesThroughAnOutage(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	if got := lw(t, nil, d.args("--job", "j", "--", "true")...).Wait(t, 30*time.Second); got != 0 {
		t.Fatalf("creating the tables: exit %d", got)
	}
	proxy, viaProxy := pgtest.Proxied(t, d.pool)
	_, addr := d.exporter(t, viaProxy)
	probes(t, addr, "the database answering", 200, 200)
	proxy.Cut()
	if body := waitStatus(t, addr, "/readyz", 503); !strings.Contains(body, "cannot read the jobs") {
		t.Errorf("/readyz during the outage: %q, want the failure", body)
	}
	for _, path := range []string{"/livez", "/healthz"} {
		if code, body := get(t, addr, path); code != 200 {
			t.Errorf("%s during the outage: %d %q, want 200", path, code, body)
		}
	}
	proxy.Restore()
	waitStatus(t, addr, "/readyz", 200)
}
