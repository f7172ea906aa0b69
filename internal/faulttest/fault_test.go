package faulttest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/stall"
	"github.com/redbite/leasewrap/internal/testchild"
)

// scenario is one kind of fault, injected into the leader's wrapper once per
// trial.
type scenario struct {
	name string
	// bound is how soon after the fault a new holder must take the lease.
	bound time.Duration
	// allowOverlap marks the documented exception: a frozen wrapper.
	allowOverlap bool
	// slots, when more than one, runs the job with --slots on one wrapper
	// more than slots.
	slots  int
	inject func(c *cluster, leader *member)
	// after checks the trial once the next child started, and restarts the
	// faulted wrapper.
	after func(c *cluster, leader *member, old, next lwtest.Interval, f fault)
}

// fault is when a trial's fault was injected: on CLOCK_MONOTONIC, as the
// children record their runs, and as the start of a stall window over this
// process, every wrapper and the faulted leader's child.
type fault struct {
	at     int64
	window *stall.Window
}

func (sc scenario) run(t *testing.T) {
	t.Parallel()
	addr, user, db, table := sharedDB(t)
	c := newSlotsCluster(t, addr, user, db, table, max(sc.slots+1, 3), max(sc.slots, 1))
	rep := &report{}
	c.waitRun(max(sc.slots, 1)-1, 15*time.Second)
	for range trials(t) {
		runs := c.runs()
		old := runs[len(runs)-1]
		leader := c.holderOf(old)
		f := fault{at: testchild.Monotonic(), window: c.window(old.Pid)}
		c.faulted = leader
		sc.inject(c, leader)
		// The bound is checked on the new holder's take, from its own
		// "acquired" log line: how fast its child then starts on a busy
		// machine does not enter it. Waiting for that child is only bounded
		// against a hang. The order of events (the old child dead before
		// the new one starts, tokens rising) is checked by c.check, with no
		// allowance.
		next := c.waitRun(len(runs), sc.bound+slack+20*time.Second)
		took := c.acquiredAt(next).Sub(f.window.Start())
		late, stalled := f.window.Late(took, sc.bound+slack)
		if late {
			t.Errorf("%s took the lease %s after the fault, want within %s (+%s slack, +%s the test and the wrappers waited for a core)",
				next.Holder, took, sc.bound, slack, stalled)
		}
		t.Logf("%s took the lease %s after the fault (%s stalled)", next.Holder, took.Round(time.Millisecond), stalled.Round(time.Millisecond))
		rep.failovers = append(rep.failovers, time.Duration(next.Start-f.at))
		sc.after(c, leader, old, next, f)
		c.faulted = nil
		rep.trials++
	}
	c.stop()
	c.check(sc.name, rep, sc.allowOverlap)
}

// A crashed leader: its child dies with it (parent-death signal), and a
// standby takes over once the lease expires.
func TestLeaderKilled(t *testing.T) {
	scenario{
		name:   "sigkill",
		bound:  ttl + retry,
		inject: func(c *cluster, m *member) { _ = m.proc.Cmd.Process.Kill() },
		after:  afterKill,
	}.run(t)
}

// With --slots 2, three wrappers: two run, one stands by. A crashed
// holder's slot goes to the standby once its lease expires, and at no
// instant do more than two children run.
func TestSlotHolderKilled(t *testing.T) {
	scenario{
		name:   "sigkill-slots2",
		slots:  2,
		bound:  ttl + retry,
		inject: func(c *cluster, m *member) { _ = m.proc.Cmd.Process.Kill() },
		after:  afterKill,
	}.run(t)
}

// afterKill checks that the child of a SIGKILLed wrapper died with it, by
// the parent-death signal: within a second but for what this process and
// the child waited for a core (the test sees the death by polling).
func afterKill(c *cluster, m *member, old, next lwtest.Interval, f fault) {
	died := time.Duration(c.waitEnd(old, time.Second) - f.at)
	if late, stalled := f.window.Late(died, time.Second); late {
		c.t.Errorf("child outlived its SIGKILLed wrapper by %s (+%s stalled)", died, stalled)
	}
	c.expectExit(m, 128+int(syscall.SIGKILL))
}

// A frozen leader (the documented exception): its child runs on while the
// lease expires and a standby takes over. Once thawed, the wrapper must kill
// its child at once, and the child's token must be older than the new one.
func TestLeaderFrozen(t *testing.T) {
	scenario{
		name:         "sigstop",
		bound:        ttl + retry,
		allowOverlap: true,
		inject:       func(c *cluster, m *member) { _ = m.proc.Cmd.Process.Signal(syscall.SIGSTOP) },
		after: func(c *cluster, m *member, old, next lwtest.Interval, f fault) {
			if wait := ttl + time.Second - since(f.at); wait > 0 {
				time.Sleep(wait) // stay frozen for longer than the TTL
			}
			thawed, window := testchild.Monotonic(), c.window(old.Pid)
			_ = m.proc.Cmd.Process.Signal(syscall.SIGCONT)
			took := time.Duration(c.waitEnd(old, 2*time.Second) - thawed)
			if late, stalled := window.Late(took, 500*time.Millisecond); late {
				t.Errorf("thawed wrapper took %s to kill its child (+%s stalled)", took, stalled)
			}
			if old.Token >= next.Token {
				t.Errorf("frozen child's token %d is not older than the new leader's %d", old.Token, next.Token)
			}
			c.expectExit(m, 75)
		},
	}.run(t)
}

// The leader alone loses the database: its child must be dead before any
// other child starts.
func TestLeaderCutOff(t *testing.T) {
	for _, kind := range []string{"cut", "blackhole", "slow"} {
		t.Run(kind, func(t *testing.T) {
			scenario{
				name:  "db-" + kind,
				bound: ttl + retry,
				inject: func(c *cluster, m *member) {
					switch kind {
					case "cut":
						m.proxy.Cut()
					case "blackhole":
						m.proxy.Blackhole()
					case "slow":
						m.proxy.SetLatency(ttl + time.Second)
					}
				},
				after: func(c *cluster, m *member, old, next lwtest.Interval, f fault) {
					if end := c.end(old); end == 0 || end >= next.Start {
						t.Errorf("cut-off leader's child was not dead before the next child started")
					}
					m.proxy.Restore()
					c.expectExit(m, 75)
				},
			}.run(t)
		})
	}
}

// SIGTERM to the leader's wrapper (a deploy, a scale-down): the child gets
// it, the wrapper exits with the child's status, and a standby takes over
// within the retry interval.
func TestLeaderTerminated(t *testing.T) {
	scenario{
		name:   "sigterm",
		bound:  retry,
		inject: func(c *cluster, m *member) { _ = m.proc.Cmd.Process.Signal(syscall.SIGTERM) },
		after: func(c *cluster, m *member, old, next lwtest.Interval, f fault) {
			if c.find(old.Pid).End == 0 {
				t.Error("child did not record its own exit after SIGTERM")
			}
			c.expectExit(m, 128+int(syscall.SIGTERM))
		},
	}.run(t)
}

// With --slots 2, three wrappers: a slot holder told to stop hands its
// slot to the standby queued for the job in its release, within a retry
// interval, and at no instant do more than two children run.
func TestSlotHolderTerminated(t *testing.T) {
	scenario{
		name:   "sigterm-slots2",
		slots:  2,
		bound:  retry,
		inject: func(c *cluster, m *member) { _ = m.proc.Cmd.Process.Signal(syscall.SIGTERM) },
		after: func(c *cluster, m *member, old, next lwtest.Interval, f fault) {
			c.expectExit(m, 128+int(syscall.SIGTERM))
		},
	}.run(t)
}

// PostgreSQL itself goes away under the wrappers (a throwaway cluster, never
// the shared one): trials alternate between a quick restart, which the
// leader should ride out, and an outage longer than the TTL, which it must
// not: its child has to be dead before the lease expires. Either way a
// holder must renew within TTL + retry of the server being back, with no
// overlap.
func TestDatabaseRestarted(t *testing.T) {
	t.Parallel()
	pg := pgtest.StartCluster(t)
	c := newCluster(t, pg.Addr(), "postgres", "postgres", "lease_restart", 3)
	rep := &report{}
	c.waitRun(0, 15*time.Second)
	for trial := range trials(t) {
		before := len(c.runs())
		faultAt := testchild.Monotonic()
		if trial%2 == 0 {
			pg.Restart(t)
		} else {
			pg.Stop(t)
			time.Sleep(ttl + time.Second) // the outage itself
			pg.Start(t)
		}
		waitRenewedAfterRestart(c, pg.URL())
		rep.failovers = append(rep.failovers, since(faultAt))
		runs := c.waitHolderRuns(pg.URL())
		// A leader that lost the lease exited 75: replace it.
		for _, m := range c.members {
			select {
			case <-m.proc.Exited:
				c.expectExit(m, 75)
			default:
			}
		}
		rep.trials++
		t.Logf("trial %d (%s): %d new children", trial+1, map[bool]string{true: "restart", false: "outage"}[trial%2 == 0], len(runs)-before)
	}
	c.stop()
	c.check("pg-restart", rep, false)
}

// waitRenewedAfterRestart waits until a holder renews or takes the lease on
// the restarted server.
func waitRenewedAfterRestart(c *cluster, url string) {
	c.t.Helper()
	conn := connect(c.t, url)
	defer conn.Close(context.Background())
	var back time.Time
	if err := conn.QueryRow(context.Background(), `SELECT now()`).Scan(&back); err != nil {
		c.t.Fatal(err)
	}
	window := c.window()
	for liveHolder(c.t, conn, back) == "" {
		if !window.Within(ttl + retry + slack) {
			c.t.Fatalf("no holder renewed the lease within %s of the restart (+%s stalled)", ttl+retry+slack, window.Stalled())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitHolderRuns waits until the last child in the history runs and is the
// child of the lease's holder of the moment, and returns the history. The
// holder that renewed after the restart need not be that holder: a starved
// leader may lose its lease after renewing, legitimately; c.check judges
// that by what must hold (no overlap, tokens rising). A new holder takes
// the lease within TTL + retry of such a loss.
func (c *cluster) waitHolderRuns(url string) []lwtest.Interval {
	c.t.Helper()
	conn := connect(c.t, url)
	defer conn.Close(context.Background())
	window := c.window()
	for {
		runs := c.runs()
		last := runs[len(runs)-1]
		holder := liveHolder(c.t, conn, time.Time{})
		if last.Holder == holder && c.end(last) == 0 {
			return runs
		}
		if !window.Within(ttl + retry + slack) {
			c.t.Fatalf("the lease is %q's, but the last child is %s's (ended: %v), after %s (+%s stalled)",
				holder, last.Holder, c.end(last) != 0, ttl+retry+slack, window.Stalled())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// connect opens a connection to url, for the caller to close.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// liveHolder is who holds the restart scenario's lease, if it was renewed
// or taken after since, else "".
func liveHolder(t *testing.T, conn *pgx.Conn, since time.Time) string {
	t.Helper()
	var holder string
	err := conn.QueryRow(context.Background(), `SELECT holder FROM lease_restart
WHERE job_name = 'work' AND expires_at > now() AND renewed_at > $1`, since).Scan(&holder)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return holder
}

// Fifty wrappers start at the same moment against a database without the
// lease table: all exit cleanly, the table is created once, one child runs.
//
// Not parallel: fifty race-enabled wrappers and children saturate two cores
// for seconds, and the scenarios measure failover times against bounds.
// Sequential tests run before any parallel one starts.
func TestColdStart(t *testing.T) {
	addr, user, db, table := sharedDB(t)
	const n = 50
	history := t.TempDir() + "/history"
	url := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", user, addr, db)
	procs := make([]*lwtest.Proc, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// --hold-for keeps the lease past the child's end, so a wrapper that
			// starts late on a busy machine sits out too.
			procs[i] = lwtest.Start(t, binary, []string{lwtest.Child("record:" + history + " sleep:1s")},
				"--database-url", url, "--table", table, "--job", "cold", "--hold-for", "1m", "--log-format", "json", "--", lwtest.Self())
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for i, p := range procs {
		if got := p.Wait(t, 60*time.Second); got != 0 {
			t.Errorf("wrapper %d exited %d, want 0", i, got)
		}
		for _, e := range p.LogEntries(t) {
			if e["message"] == fmt.Sprintf("created table %q", table) {
				created++
			}
		}
	}
	if created != 1 {
		t.Errorf("%d wrappers created the table, want 1", created)
	}
	runs := lwtest.ReadHistory(t, history)
	if len(runs) != 1 {
		t.Errorf("%d children ran, want exactly 1", len(runs))
	}
	fmt.Printf("scenario %-14s wrappers=%d runs=%d tables created=%d\n", "cold-start", n, len(runs), created)
}
