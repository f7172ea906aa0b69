package faulttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/testchild"
)

// The Patroni scenarios run leasewrap against a high-availability
// PostgreSQL as users run it: three nodes under Patroni with etcd
// (throwaway, pgtest.StartPatroni), every wrapper on the multi-host
// connection string with target_session_attrs=read-write. At once: three
// --wait wrappers of one job, three --wait --slots 2 wrappers of another,
// three --schedule '@every 2s' schedulers of a third. Patroni moves the
// primary under them (a switchover) or fails over after a fault on the
// primary; the histories must show no overlap, no fencing token twice,
// no scheduled time run twice, whenever synchronous_mode or
// --require-replicated keeps every lease write a wrapper acts on on the
// new primary. Without either the same is counted, not required.

// Faults on the primary.
const (
	haSwitchover  = "switchover"    // planned: POST /switchover
	haKillPG      = "kill-postgres" // its PostgreSQL SIGKILLed
	haKillPatroni = "kill-patroni"  // its Patroni SIGKILLed, started again once another node is primary
	haStopPatroni = "stop-patroni"  // its Patroni SIGSTOPped until another node is primary (longer than Patroni's TTL)
	haCutOff      = "cut"           // cut off from clients, standbys and etcd until another node is primary
)

// haMode is a configuration of the cluster and the wrappers.
type haMode struct {
	name string
	// sync is Patroni's synchronous_mode; require adds --require-replicated.
	sync, require bool
	// short are the faults a default run injects, one each.
	short []string
}

// safe reports whether the mode promises exclusion across a failover.
func (m haMode) safe() bool { return m.sync || m.require }

// haModes are the configurations: CI runs each mode's short faults once;
// long mode (LEASEWRAP_FAULT_TRIALS=N) runs every fault N times in each.
var haModes = []haMode{
	{name: "sync", sync: true, short: []string{haSwitchover, haKillPG}},
	{name: "async-replicated", require: true, short: []string{haKillPatroni}},
	{name: "sync-replicated", sync: true, require: true},
	{name: "async"},
}

var haFaults = []string{haSwitchover, haKillPG, haKillPatroni, haStopPatroni, haCutOff}

// haTTL is the wrappers' TTL: a leader rides out a switchover or a
// PostgreSQL restart (seconds); a failover that waits for Patroni's own
// TTL (10 s) to pass it does not.
const haTTL = failoverTTL

// TestPatroni runs each mode's faults on one Patroni cluster, in turn.
// It does not run in parallel with the other scenarios: its seven server
// processes and nine wrappers would load the machine under their timing
// bounds.
func TestPatroni(t *testing.T) {
	n := 0
	if s := os.Getenv("LEASEWRAP_FAULT_TRIALS"); s != "" {
		n = trials(t)
	}
	kinds := haKinds(t)
	pc := pgtest.StartPatroni(t, 3, false)
	for i, mode := range haModes {
		faults := mode.short
		if n > 0 {
			faults = nil
			for range n {
				faults = append(faults, kinds...)
			}
		}
		if len(faults) == 0 {
			continue
		}
		t.Run(mode.name, func(t *testing.T) {
			pc.SetSynchronous(t, mode.sync)
			w := startHA(t, pc, mode, i)
			for _, kind := range faults {
				w.fault(kind)
			}
			w.finish()
		})
	}
}

// haKinds are the faults a long run injects in turn: every one, or those
// LEASEWRAP_HA_FAULTS lists (comma-separated), so that a long run can
// repeat a few of them (`-run 'TestPatroni$/^sync$'` picks the mode).
func haKinds(t *testing.T) []string {
	s := os.Getenv("LEASEWRAP_HA_FAULTS")
	if s == "" {
		return haFaults
	}
	kinds := strings.Split(s, ",")
	for _, k := range kinds {
		if !slices.Contains(haFaults, k) {
			t.Fatalf("LEASEWRAP_HA_FAULTS: unknown fault %q; want some of %s", k, strings.Join(haFaults, ","))
		}
	}
	return kinds
}

// haWorkload is the wrappers of one mode, and what the faults did.
type haWorkload struct {
	t     *testing.T
	pc    *pgtest.PatroniCluster
	mode  haMode
	wait  *cluster // --wait wrappers of one job
	slots *cluster // --wait --slots 2 wrappers of another
	sched *cluster // schedulers of a third (members only: their runs overlap by design)
	rep   report
	// patroni are Patroni's own times from the fault to a writable new
	// primary, by fault; recovery leasewrap's to a command running under
	// a lease written on it.
	patroni, recovery map[string][]time.Duration
	// extra is leasewrap's own share of recovery: from the new primary
	// taking writes (and, under --require-replicated, a standby
	// streaming from it) to the command running.
	extra map[string][]time.Duration
	// exits counts the wrappers' exit statuses during the faults.
	exits map[int]int
	// takenBack counts faults after which the old primary was primary
	// again although another node had been promoted.
	takenBack int
}

func startHA(t *testing.T, pc *pgtest.PatroniCluster, mode haMode, i int) *haWorkload {
	w := &haWorkload{t: t, pc: pc, mode: mode,
		patroni: map[string][]time.Duration{}, recovery: map[string][]time.Duration{}, extra: map[string][]time.Duration{}, exits: map[int]int{}}
	group := func(name string, slots int) *cluster {
		table := fmt.Sprintf("lw_ha%d_%s", i, name)
		migrate(t, pc.DSN(), table)
		return &cluster{t: t, table: table, history: filepath.Join(t.TempDir(), name), dead: map[int]int64{}, slots: slots}
	}
	w.wait, w.slots, w.sched = group("wait", 1), group("slots", 2), group("sched", 1)
	for _, g := range []*cluster{w.wait, w.slots, w.sched} {
		for k := range 3 {
			m := &member{index: k}
			g.members = append(g.members, m)
			w.start(g, m)
		}
	}
	for _, g := range []*cluster{w.wait, w.slots} {
		for _, m := range g.members {
			g.waitReady(m, func(m *member) { w.start(g, m) })
		}
	}
	w.wait.waitRun(0, 15*time.Second)
	return w
}

// start (re)starts m of group g under a new holder id.
func (w *haWorkload) start(g *cluster, m *member) {
	g.starts++
	m.id = fmt.Sprintf("m%d-%d", m.index, g.starts)
	args := []string{"--database-url", w.pc.DSN(), "--table", g.table, "--job", "work", "--id", m.id, "--log-format", "json",
		"--ttl", haTTL.String(), "--renew-interval", renew.String(), "--grace", grace.String(), "--retry-interval", retry.String()}
	child := "trap record:" + g.history + " block"
	switch {
	case g == w.sched:
		args = append(args, "--schedule", "@every 2s")
		child = "trap record:" + g.history + " sleep:200ms"
	case g.slots > 1:
		args = append(args, "--wait", "--slots", strconv.Itoa(g.slots))
	default:
		args = append(args, "--wait")
	}
	if w.mode.require {
		args = append(args, "--require-replicated")
	}
	m.proc = lwtest.Start(w.t, binary, []string{lwtest.Child(child)}, append(args, "--", lwtest.Self())...)
}

// restartExited starts again every wrapper that exited, counting why.
func (w *haWorkload) restartExited() {
	for _, g := range []*cluster{w.wait, w.slots, w.sched} {
		for _, m := range g.members {
			select {
			case <-m.proc.Exited:
				w.exits[m.proc.Code()]++
				w.start(g, m)
			default:
			}
		}
	}
}

// fault injects one fault of kind on the primary of a whole cluster,
// measures Patroni's failover (the fault to a writable new primary) and
// leasewrap's recovery (the fault to a --wait child running under a lease
// written on it), undoes the fault and waits until the cluster is whole.
func (w *haWorkload) fault(kind string) {
	t := w.t
	t.Helper()
	old := w.pc.WaitStreaming(t, len(w.pc.Nodes)-1, w.mode.sync)
	w.restartExited()
	leading := w.waitLeading()
	at, atWall := testchild.Monotonic(), time.Now()
	not := old // the new primary must be another node
	switch kind {
	case haSwitchover:
		w.pc.Switchover(t, old)
	case haKillPG:
		old.KillPostgres(t)
		not = nil // Patroni may start it again as the primary
	case haKillPatroni:
		old.KillPatroni(t, syscall.SIGKILL)
	case haStopPatroni:
		old.KillPatroni(t, syscall.SIGSTOP)
	case haCutOff:
		old.CutOff()
	}
	next, promoted := w.pc.WaitPromoted(t, not, time.Minute)
	writable := testchild.Monotonic()
	if promoted.IsZero() {
		promoted = atWall
	}
	streams := streamingFrom(next)
	// Without a watchdog, a primary whose Patroni is gone stays writable
	// until Patroni returns and demotes it: it returns at once.
	old.Revive(t)
	// Under --require-replicated no lease write counts before a standby
	// streams from the new primary (a renewal made before then commits,
	// unconfirmed, and counts as failed): leasewrap's share starts then.
	ready := writable
	var streaming streamed
	if w.mode.require {
		if streaming = <-streams; streaming.at > writable {
			ready, promoted = streaming.at, streaming.since
		}
	}
	run, recovered := w.waitRecovered(next, promoted, at, atWall)
	if !w.mode.require {
		streaming = <-streams
	}
	failover, recovery := time.Duration(writable-at), time.Duration(recovered-at)
	extra := time.Duration(recovered - ready)
	w.patroni[kind] = append(w.patroni[kind], failover)
	w.recovery[kind] = append(w.recovery[kind], recovery)
	w.extra[kind] = append(w.extra[kind], extra)
	w.rep.failovers = append(w.rep.failovers, recovery)
	w.rep.trials++
	how := "taken over"
	if run.Pid == leading.Pid {
		how = "rode out"
	}
	t.Logf("fault %d (%s): primary %s -> %s; Patroni writable after %s, a standby streaming after %s; command running after %s (%s, extra %s)",
		w.rep.trials, kind, old.Name, next.Name, failover.Round(time.Millisecond), time.Duration(streaming.at-at).Round(time.Millisecond),
		recovery.Round(time.Millisecond), how, extra.Round(time.Millisecond))
	if whole := w.pc.WaitStreaming(t, len(w.pc.Nodes)-1, w.mode.sync); whole == old && kind != haKillPG {
		// Seen with a SIGSTOPped Patroni: resumed, it took the leader key
		// back from the node Patroni had promoted meanwhile.
		w.takenBack++
		t.Logf("fault %d (%s): %s is the primary again, after %s had been promoted", w.rep.trials, kind, old.Name, next.Name)
	}
}

// streamed is when a standby was first seen streaming from a new
// primary (CLOCK_MONOTONIC; when the look gave up after a minute if none
// did), and since when one can have been (the wall clock at the start of
// the last look that saw none).
type streamed struct {
	at    int64
	since time.Time
}

// streamingFrom looks at node until a standby streams from it, or it is
// a standby again, and sends when.
func streamingFrom(node *pgtest.PatroniNode) <-chan streamed {
	ch := make(chan streamed, 1)
	go func() {
		deadline := time.Now().Add(time.Minute)
		since := time.Now()
		for look := since; look.Before(deadline); look = time.Now() {
			if streams, primary := node.Streams(); streams || !primary {
				break
			}
			since = look
			time.Sleep(20 * time.Millisecond)
		}
		ch <- streamed{at: testchild.Monotonic(), since: since}
	}()
	return ch
}

// waitLeading waits until a child of the --wait job runs, and returns it.
func (w *haWorkload) waitLeading() lwtest.Interval {
	w.t.Helper()
	var run lwtest.Interval
	pgtest.Eventually(w.t, 30*time.Second, "a running --wait child", func() bool {
		w.restartExited()
		runs := w.wait.runs()
		if len(runs) == 0 {
			return false
		}
		run = runs[len(runs)-1]
		return w.wait.end(run) == 0
	})
	return run
}

// waitRecovered waits until the job's lease on primary was taken or
// renewed since promoted (when it can first have taken writes) and the
// holder's child runs, and returns the run and when (CLOCK_MONOTONIC): the
// child's start if it started after the fault at (atWall on the wall
// clock), else the renewal's own time on the database clock (this
// machine's), not when the harness saw it. A primary that changed again
// meanwhile is found again.
func (w *haWorkload) waitRecovered(primary *pgtest.PatroniNode, promoted time.Time, at int64, atWall time.Time) (lwtest.Interval, int64) {
	t := w.t
	t.Helper()
	start := time.Now()
	for {
		var holder string
		var token int64
		var renewed time.Time
		err := w.leaseOn(primary, promoted, &holder, &token, &renewed)
		if err == nil {
			runs := w.wait.runs()
			if last := runs[len(runs)-1]; last.Holder == holder && last.Token == token && w.wait.end(last) == 0 {
				if last.Start > at {
					return last, last.Start
				}
				return last, at + renewed.Sub(atWall).Nanoseconds()
			}
		} else if !errors.Is(err, pgx.ErrNoRows) {
			primary = w.pc.WaitWritable(t, nil, time.Minute)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("no --wait child ran under a lease written on %s within a minute\n%s", primary.Name, w.pc.Status())
		}
		w.restartExited()
		time.Sleep(20 * time.Millisecond)
	}
}

// leaseOn reads the --wait job's live lease on node, if renewed since,
// and when it was renewed.
func (w *haWorkload) leaseOn(node *pgtest.PatroniNode, since time.Time, holder *string, token *int64, renewed *time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, node.URL())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var (
		standby bool
		h       *string
		tok     *int64
		at      *time.Time
	)
	err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), l.holder, l.fencing_token, l.renewed_at
FROM (SELECT) x LEFT JOIN `+pgx.Identifier{w.wait.table}.Sanitize()+` l
  ON l.job_name = 'work' AND l.renewed_at >= $1 AND l.expires_at > now()`, since).Scan(&standby, &h, &tok, &at)
	switch {
	case err != nil:
		return err
	case standby:
		// The node promoted lost the primary role again (a frozen
		// Patroni resumed and took its leader key back).
		return errNotPrimary
	case h == nil:
		return pgx.ErrNoRows
	}
	*holder, *token, *renewed = *h, *tok, *at
	return nil
}

// errNotPrimary is leaseOn's error for a node that is a standby again.
var errNotPrimary = errors.New("no longer the primary")

// finish stops every wrapper and checks the histories: with synchronous
// mode or --require-replicated, no overlap, no token twice, no scheduled
// time run twice; without, the same counted.
func (w *haWorkload) finish() {
	t := w.t
	t.Helper()
	w.restartExited()
	for _, g := range []*cluster{w.wait, w.slots, w.sched} {
		g.stop()
	}
	name := "patroni-" + w.mode.name
	w.wait.check(name, &w.rep, !w.mode.safe())
	slotRep := &report{}
	if w.mode.safe() {
		w.slots.check(name+"-slots", slotRep, false)
	}
	repeats := repeatedTokens(w.slots.runs()) + repeatedTokens(w.sched.runs())
	twice := w.scheduledTwice()
	unaccounted, recordedTwice := w.scheduleAccounts()
	if w.mode.safe() && (repeats > 0 || twice > 0 || unaccounted > 0 || recordedTwice > 0) {
		t.Errorf("%d fencing tokens handed out twice, %d scheduled times run more than once, %d claimed without a history row, %d with more than one",
			repeats, twice, unaccounted, recordedTwice)
	}
	for _, kind := range haFaults {
		if len(w.patroni[kind]) == 0 {
			continue
		}
		pw, pm := spread(w.patroni[kind])
		rw, rm := spread(w.recovery[kind])
		ew, em := spread(w.extra[kind])
		line := fmt.Sprintf("scenario %s %-13s faults=%d patroni-failover worst=%s median=%s leasewrap-recovery worst=%s median=%s extra worst=%s median=%s",
			name, kind, len(w.patroni[kind]), pw, pm, rw, rm, ew, em)
		t.Log(line)
		fmt.Println(line)
	}
	line := fmt.Sprintf("scenario %s overlaps=%d slot-overlaps=%d repeated-tokens=%d times-run-twice=%d unaccounted=%d recorded-twice=%d scheduled-runs=%d exits=%v primary-taken-back=%d",
		name, len(w.rep.overlaps), len(slotRep.overlaps), repeats, twice, unaccounted, recordedTwice, len(w.sched.runs()), w.exits, w.takenBack)
	t.Log(line)
	fmt.Println(line)
}

// repeatedTokens counts the runs whose fencing token an earlier run had.
func repeatedTokens(runs []lwtest.Interval) int {
	seen := map[int64]bool{}
	n := 0
	for _, r := range runs {
		if seen[r.Token] {
			n++
		}
		seen[r.Token] = true
	}
	return n
}

// scheduledTwice counts the scheduled times more than one child ran.
func (w *haWorkload) scheduledTwice() int {
	by := map[time.Time][]lwtest.Interval{}
	for _, r := range w.sched.runs() {
		if r.ScheduledAt.IsZero() {
			w.t.Errorf("scheduled child of %s (pid %d) was not told its scheduled time", r.Holder, r.Pid)
			continue
		}
		by[r.ScheduledAt.UTC()] = append(by[r.ScheduledAt.UTC()], r)
	}
	twice := 0
	var times []time.Time
	for at, runs := range by {
		if len(runs) > 1 {
			twice++
			times = append(times, at)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	for _, at := range times {
		w.t.Logf("%s ran %d times: %v", at.Format(time.TimeOnly), len(by[at]), by[at])
	}
	return twice
}

// scheduleAccounts reads on the primary how many claimed times of the
// schedulers' job have no history row, and how many have several.
func (w *haWorkload) scheduleAccounts() (unaccounted, twice int) {
	t := w.t
	t.Helper()
	primary := w.pc.WaitWritable(t, nil, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, primary.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	claims, history := pgx.Identifier{w.sched.table + "_schedule"}.Sanitize(), pgx.Identifier{w.sched.table + "_history"}.Sanitize()
	leases := pgx.Identifier{w.sched.table}.Sanitize()
	// A run whose end was not recorded (its release lost in the failover)
	// is still open on the lease row: the next take records it as lost, in
	// the statement that takes. The schedulers were stopped before one
	// came, so it counts as accounted for.
	err = conn.QueryRow(ctx, `SELECT
  (SELECT count(*) FROM `+claims+` c WHERE c.job_name = 'work' AND NOT EXISTS (
    SELECT FROM `+history+` h WHERE h.job_name = c.job_name AND h.scheduled_at = c.scheduled_at)
    AND NOT EXISTS (SELECT FROM `+leases+` l WHERE l.job_name = c.job_name AND l.last_scheduled_at = c.scheduled_at
      AND l.last_started_at IS NOT NULL AND l.last_finished_at IS NULL)),
  (SELECT count(*) FROM (SELECT scheduled_at FROM `+history+` WHERE job_name = 'work' AND scheduled_at IS NOT NULL
    GROUP BY scheduled_at HAVING count(*) > 1) d)`).Scan(&unaccounted, &twice)
	if err != nil {
		t.Fatal(err)
	}
	return unaccounted, twice
}
