package command

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/stall"
)

// get fetches path from a wrapper's HTTP address and returns status and body.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	code, body, _ := lwtest.Get(t, "http://"+addr, path)
	return code, body
}

// httpAddr is the address a wrapper logged it serves on.
func httpAddr(t *testing.T, p *lwtest.Proc) string {
	t.Helper()
	return p.WaitLog(t, "serving /livez, /readyz, /healthz, /leader and /metrics")["http_addr"].(string)
}

// waitStatus polls path until it answers want.
func waitStatus(t *testing.T, addr, path string, want int) string {
	t.Helper()
	var code int
	var body string
	pgtest.Eventually(t, 10*time.Second, fmt.Sprintf("%s answering %d", path, want), func() bool {
		code, body = get(t, addr, path)
		return code == want
	})
	return body
}

func TestHealthLeaderAndMetrics(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	proxy, viaProxy := pgtest.Proxied(t, d.pool)
	// The standby's first connect should succeed (a --wait that cannot
	// connect at start stands by for the database, and says so): 1 s is
	// too little on a loaded machine, and 5 s still leaves the reconnect
	// after the blackhole within the 10 s that /healthz is given to
	// recover.
	viaProxy = strings.Replace(viaProxy, "connect_timeout=1", "connect_timeout=5", 1)

	leader := lw(t, []string{child("ignore-term ready block")}, d.args("--job", "j", "--id", "leader", "--http-addr", "127.0.0.1:0", "--", self())...)
	leader.Expect(t, "ready")
	// The standby's TTL is short, for its health to go stale quickly below,
	// but not 2s: that leaves its first take 1.4s to answer, twice, which a
	// loaded machine can miss, and a --wait whose first take fails counts
	// the database unreachable (checked at 0 below). 4s leaves it 3.3s.
	standby := lw(t, []string{child("ready")}, d.argsTTL("4s", "--database-url", viaProxy, "--job", "j", "--wait", "--http-addr", "127.0.0.1:0", "--", self())...)
	standby.WaitLog(t, "standing by: lease held by another instance")
	leaderAddr, standbyAddr := httpAddr(t, leader), httpAddr(t, standby)

	if body := waitStatus(t, leaderAddr, "/leader", 200); !strings.Contains(body, `"fencing_token":1`) || !strings.Contains(body, `"holder":"leader"`) {
		t.Errorf("/leader on the leader: %s", body)
	}
	if body := waitStatus(t, leaderAddr, "/leader", 200); !strings.Contains(body, `"self":"leader"`) {
		t.Errorf("/leader on the leader does not name itself as self: %s", body)
	}
	// A standby names itself, as self, and no holder: its own id there
	// would read as the leader's.
	if body := waitStatus(t, standbyAddr, "/leader", 503); !strings.Contains(body, `"self":"`) ||
		!strings.Contains(body, `"leader":false`) || strings.Contains(body, `"holder"`) {
		t.Errorf("/leader on the standby: %s, want self and no holder", body)
	}
	waitStatus(t, leaderAddr, "/healthz", 200)
	waitStatus(t, standbyAddr, "/healthz", 200)
	// Series exist from the start, next to the Go runtime's and the process's.
	waitMetrics(t, standbyAddr, `leasewrap_renewals_total{lease="j",result="failed"} 0`,
		`leasewrap_lease_row_regressions_total{lease="j"} 0`, `leasewrap_database_unreachable_total{lease="j"} 0`,
		"go_goroutines ", "process_cpu_seconds_total ")
	// HEAD answers at once (curl -I), with no body.
	client := &http.Client{Timeout: 2 * time.Second}
	if resp, err := client.Head("http://" + leaderAddr + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("HEAD /healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	waitMetrics(t, leaderAddr, `leasewrap_is_leader{lease="j"} 1`, `leasewrap_child_starts_total{lease="j"} 1`,
		`leasewrap_acquisitions_total{lease="j"} 1`, `leasewrap_renewals_total{lease="j",result="ok"}`)
	waitMetrics(t, standbyAddr, `leasewrap_is_leader{lease="j"} 0`)

	// A standby cut off from the database is unhealthy once its last
	// contact is older than the TTL (4s).
	proxy.Blackhole()
	waitStatus(t, standbyAddr, "/healthz", 503)
	proxy.Restore()
	waitStatus(t, standbyAddr, "/healthz", 200)

	// Losing the lease shows in the leader's metrics.
	// The child ignores SIGTERM and so runs on for the grace: the loss must
	// show in the metrics meanwhile.
	d.exec(t, `UPDATE TABLE SET holder = 'thief', fencing_token = fencing_token + 1`)
	waitStatus(t, leaderAddr, "/leader", 503)
	waitMetrics(t, leaderAddr, `leasewrap_lease_losses_total{lease="j"} 1`, `leasewrap_renewals_total{lease="j",result="lost"} 1`)
	leader.Expect(t, "signal SIGTERM")
	if got := leader.Wait(t, 10*time.Second); got != 75 {
		t.Errorf("leader exited %d, want 75", got)
	}
	// The listener closes with the wrapper.
	if conn, err := net.DialTimeout("tcp", leaderAddr, time.Second); err == nil {
		conn.Close()
		t.Error("the HTTP listener outlived the wrapper")
	}
}

// waitMetrics polls /metrics until it shows every one of want.
func waitMetrics(t *testing.T, addr string, want ...string) {
	t.Helper()
	window := stall.Open()
	for {
		_, m := get(t, addr, "/metrics")
		missing := ""
		for _, w := range want {
			if !strings.Contains(m, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if !window.Within(10 * time.Second) {
			t.Fatalf("metrics never showed %s (10s, +%s stalled):\n%s", missing, window.Stalled(), m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A scheduler between its scheduled times sends no statement, yet its
// health check holds: the connection that listens for requested runs is
// pinged every renew interval (300ms), which keeps the contact recent,
// and when that connection goes silent the scheduler notices, polls, and
// turns unhealthy once the database stays out of reach. A scheduler that
// does not listen (--listen=false) looks for requests every retry
// interval, which keeps its contact recent the same way.
func TestIdleSchedulerStaysHealthy(t *testing.T) {
	t.Parallel()
	for _, listen := range []bool{true, false} {
		t.Run(fmt.Sprintf("listen=%v", listen), func(t *testing.T) {
			t.Parallel()
			d := newDB(t)
			proxy, viaProxy := pgtest.Proxied(t, d.pool)
			p := lw(t, nil, d.args("--database-url", viaProxy, "--job", "j", "--schedule", farSchedule,
				fmt.Sprintf("--listen=%v", listen), "--http-addr", "127.0.0.1:0", "--log-level", "debug", "--", "true")...)
			p.WaitLog(t, "scheduler started")
			addr := httpAddr(t, p)
			// Half as long again as the TTL (6s), after which a contact is stale.
			for until := time.Now().Add(9 * time.Second); time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
				if code, body := get(t, addr, "/healthz"); code != 200 {
					t.Fatalf("an idle scheduler's /healthz answered %d: %s", code, body)
				}
			}
			proxy.Blackhole()
			if listen {
				p.WaitLog(t, "listening connection for requested runs lost; polling for now")
			}
			waitStatus(t, addr, "/healthz", 503)
			proxy.Restore()
			waitStatus(t, addr, "/healthz", 200)
			stop(t, p)
		})
	}
}
