package faulttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/testchild"
	"github.com/redbite/leasewrap/lease"
)

// The failover scenarios run three wrappers on a primary and a streaming
// standby (throwaway clusters, never the shared server), connected with one
// multi-host connection string and target_session_attrs=read-write, so that
// each wrapper finds the new primary by itself. The primary is crashed
// (immediate shutdown) and the standby promoted; the crashed node comes
// back as a standby of the new primary (a fresh base backup) for the next
// failover, so every second failover is a failback. Under
// --require-replicated it comes back before a new leader is awaited: the
// new primary confirms no take or renewal until a standby streams from it.

// failoverTTL is longer than the other scenarios' TTL, so that a leader
// rides out a crash and a promotion on a loaded machine (a renewal has
// failoverTTL - grace - 5% to succeed); renewal, grace and retry are the
// same, and so is the bound of an overlap, renew + grace.
const failoverTTL = 6 * time.Second

// failoverTable is the lease table on the pair's own servers.
const failoverTable = "lease_failover"

// failovers is how many failovers a scenario injects: two (a failover and
// its failback) in CI, and in long mode (LEASEWRAP_FAULT_TRIALS above 1)
// LEASEWRAP_FAULT_TRIALS of them, and no fewer than minimum.
func failovers(t *testing.T, minimum int) int {
	if os.Getenv("LEASEWRAP_FAULT_TRIALS") == "" {
		return 2
	}
	if n := trials(t); n > 1 {
		return max(n, minimum)
	}
	return 2
}

// A synchronous standby has every acknowledged commit, so a failover loses
// no lease write: no overlap, tokens rise, and a leader rides out the
// failover with the same child and token; a lease taken just before the
// crash is the new primary's too.
func TestFailoverSynchronous(t *testing.T) {
	t.Parallel()
	n := failovers(t, 5)
	n += n % 2 // end failed back, on the first node
	r := newReplicated(t, pgtest.StartPair(t, true))
	rep := &report{}
	for i := range n {
		kind := []string{"steady", "handover"}[i%2]
		r.failover(rep, kind, i == n-1)
	}
	r.rotate()
	r.stop()
	r.check("failover-sync", rep, false)
	r.checkUnique()
	r.summary("failover-sync", rep)
}

// An asynchronous standby can miss the last lease writes: the takes that
// were lost must not hand the same token out again, and an overlap, which
// a lost renewal allows, stays within renew interval + grace.
func TestFailoverAsynchronous(t *testing.T) {
	t.Parallel()
	r := newReplicated(t, pgtest.StartPair(t, false))
	rep := r.asynchronous()
	r.check("failover-async", rep, true)
	r.checkUnique()
	for _, o := range rep.overlaps {
		if o > renew+grace {
			t.Errorf("children overlapped by %s, more than renew interval + grace (%s)", o, renew+grace)
		}
	}
	t.Logf("overlaps: %v (bound %s)", rep.overlaps, renew+grace)
	r.summary("failover-async", rep)
}

// With --require-replicated the same failovers of an asynchronous pair
// cause no overlap at all: a take starts its child, and a renewal extends
// the leader's deadline, only once the standby has replayed it, so the
// new primary has every lease a child runs under. No take that started a
// child is lost, and no holder finds its row older than it wrote.
func TestFailoverAsynchronousRequireReplicated(t *testing.T) {
	t.Parallel()
	r := newReplicated(t, pgtest.StartPair(t, false), "--require-replicated")
	rep := r.asynchronous()
	r.check("failover-async-replicated", rep, false)
	r.checkUnique()
	if r.regressed > 0 {
		t.Errorf("%d holders found their lease row older than they had written, under --require-replicated", r.regressed)
	}
	t.Logf("overlaps: %v", rep.overlaps)
	r.summary("failover-async-replicated", rep)
}

// asynchronous runs the asynchronous failovers: two in CI, at least ten in
// long mode, then a rotation, and stops the wrappers.
func (r *replicated) asynchronous() *report {
	n := failovers(r.t, 10)
	rep := &report{}
	for i := range n {
		kind := []string{"lost-take", "lag", "burst"}[i%3]
		r.failover(rep, kind, i == n-1)
	}
	r.rotate()
	r.stop()
	return rep
}

// replicated is the wrappers on a pair, and what its failovers did.
type replicated struct {
	*cluster
	pair *pgtest.Pair
	// lostTakes counts failovers after which the new primary did not have
	// the take made just before the crash; lostLeases the wrappers that
	// exited 75 because the lease they held was gone on the new primary;
	// rodeOut the failovers the last child lived through.
	lostTakes, lostLeases, rodeOut int
	// regressed counts the lost takes whose holder reported the row as
	// having lost a committed write.
	regressed int
	// repeats counts children whose token an earlier child had.
	repeats int
	// extra are more flags for every wrapper; require is set when they
	// hold --require-replicated.
	extra   []string
	require bool
}

func newReplicated(t *testing.T, pair *pgtest.Pair, extra ...string) *replicated {
	r := &replicated{pair: pair, cluster: &cluster{t: t, table: failoverTable,
		history: filepath.Join(t.TempDir(), "history"), dead: map[int]int64{}},
		extra: extra, require: slices.Contains(extra, "--require-replicated")}
	// The table is made first: these scenarios are about failover, and
	// wrappers that start together on a database without the table are
	// TestColdStart's.
	migrate(t, pair.DSN(), failoverTable)
	for i := range 3 {
		m := &member{index: i}
		r.members = append(r.members, m)
		r.start(m)
	}
	for _, m := range r.members {
		r.waitReady(m, r.start)
	}
	r.waitRun(0, 15*time.Second)
	return r
}

// migrate creates table with leasewrap migrate.
func migrate(t *testing.T, dsn, table string) {
	t.Helper()
	p := lwtest.Start(t, binary, nil, "migrate", "--database-url", dsn, "--table", table, "--log-format", "json")
	if code := p.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("leasewrap migrate exited %d:\n%s", code, p.Logs)
	}
}

// takeBound is how soon after a release a standby's child starts: within
// the retry interval, and under --require-replicated also after the
// standby confirmed the take, which a take may wait for until work would
// have to stop (TTL - grace - 5%), before it is handed back.
func (r *replicated) takeBound() time.Duration {
	if r.require {
		return retry + failoverTTL - grace - lease.SafetyMargin(failoverTTL) + slack
	}
	return retry + slack
}

// start (re)starts m's wrapper under a new holder id, on the pair's
// multi-host connection string.
func (r *replicated) start(m *member) {
	r.starts++
	m.id = fmt.Sprintf("m%d-%d", m.index, r.starts)
	args := []string{"--database-url", r.pair.DSN(), "--table", r.table, "--job", "work", "--id", m.id, "--wait", "--log-format", "json",
		"--ttl", failoverTTL.String(), "--renew-interval", renew.String(), "--grace", grace.String(), "--retry-interval", retry.String()}
	args = append(append(args, r.extra...), "--", lwtest.Self())
	m.proc = lwtest.Start(r.t, binary, []string{lwtest.Child("trap record:" + r.history + " block")}, args...)
	r.register(m)
}

// failover runs one trial of kind:
//   - steady: the primary crashes while the leader renews;
//   - handover: the leader is terminated, and the primary crashes the moment
//     the next child started;
//   - lost-take: the same, with replication held back first, so that the
//     new primary has neither the release nor the take;
//   - lag: replication is held back for longer than the TTL while the
//     leader renews, so that the lease has expired on the new primary;
//   - burst: a burst of writes runs when the leader is terminated and the
//     primary crashes right after the take, so that the standby lags as it
//     would under load.
//
// Unless last, the crashed node then rejoins as a standby.
func (r *replicated) failover(rep *report, kind string, last bool) {
	t := r.t
	t.Helper()
	runs := r.runs()
	old := runs[len(runs)-1]
	if r.end(old) != 0 {
		t.Fatalf("no child runs before failover %d", rep.trials+1)
	}
	leader := r.holderOf(old)
	var terminated *member
	acked := old // the last take a wrapper was told of
	var unconfirmed int64
	switch kind {
	case "lag":
		r.pair.HoldBack()
		time.Sleep(failoverTTL + renew) // the lag itself
	case "lost-take":
		r.pair.HoldBack()
	}
	stopBurst := func() {}
	if kind == "burst" {
		stopBurst = r.burst()
	}
	if kind != "steady" && kind != "lag" {
		_ = leader.proc.Cmd.Process.Signal(syscall.SIGTERM)
		terminated = leader
		if r.require && kind == "lost-take" {
			unconfirmed = r.waitUnconfirmedTake(old)
		} else {
			acked = r.waitRun(len(runs), r.takeBound())
		}
	}
	crashed := testchild.Monotonic()
	promoted := r.pair.Failover(t)
	promotion := since(crashed)
	stopBurst()
	if r.require {
		// The new primary confirms nothing until a standby streams from it.
		r.pair.Rejoin(t)
	}
	// The standby's copy of an older lease may be live for up to a TTL.
	next, at := r.waitLeader(promoted, failoverTTL+retry+slack)
	rep.failovers = append(rep.failovers, time.Duration(at-crashed))
	for _, run := range r.runs() {
		if unconfirmed != 0 && run.Token == unconfirmed {
			t.Errorf("failover %d (%s): %s started a child under a take (token %d) that no standby had replayed",
				rep.trials+1, kind, run.Holder, run.Token)
		}
	}
	if next.Pid == acked.Pid {
		r.rodeOut++
	} else if r.pair.Sync {
		t.Errorf("failover %d (%s): the child of %s (token %d) did not ride out the failover; %s runs (token %d)",
			rep.trials+1, kind, acked.Holder, acked.Token, next.Holder, next.Token)
	}
	r.replaceStopped(terminated, next, acked)
	rep.trials++
	t.Logf("failover %d (%s): %s had token %d before the crash; promoted in %s; %s leads with token %d after %s",
		rep.trials, kind, acked.Holder, acked.Token, promotion.Round(time.Millisecond), next.Holder, next.Token,
		time.Duration(at-crashed).Round(time.Millisecond))
	if !last && !r.require {
		r.pair.Rejoin(t)
	}
}

// waitUnconfirmedTake waits until a standby has taken the lease after old
// on the primary, where replication is held back, and returns the take's
// token: no child may ever start under it, for no standby has replayed it.
func (r *replicated) waitUnconfirmedTake(old lwtest.Interval) int64 {
	t := r.t
	t.Helper()
	conn := r.pair.Conn(t)
	defer conn.Close(context.Background())
	window := r.window()
	for {
		var token int64
		err := conn.QueryRow(context.Background(), `SELECT fencing_token FROM `+failoverTable+`
WHERE job_name = 'work' AND released_at IS NULL AND expires_at > now()`).Scan(&token)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if err == nil && token > old.Token {
			return token
		}
		if !window.Within(retry + slack) {
			t.Fatalf("no standby took the lease on the primary within %s of the release (+%s stalled)", retry+slack, window.Stalled())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLeader waits until a holder has renewed or taken the lease on the
// primary since promoted and its child runs, and returns that run and when
// it was seen (CLOCK_MONOTONIC).
func (r *replicated) waitLeader(promoted time.Time, within time.Duration) (lwtest.Interval, int64) {
	t := r.t
	t.Helper()
	conn := r.pair.Conn(t)
	defer conn.Close(context.Background())
	window := r.window()
	for {
		var holder string
		var token int64
		err := conn.QueryRow(context.Background(), `SELECT holder, fencing_token FROM `+failoverTable+`
WHERE job_name = 'work' AND renewed_at >= $1 AND expires_at > now()`, promoted).Scan(&holder, &token)
		switch {
		case err == nil:
			runs := r.runs()
			if last := runs[len(runs)-1]; last.Holder == holder && last.Token == token && r.end(last) == 0 {
				return last, testchild.Monotonic()
			}
		case !errors.Is(err, pgx.ErrNoRows):
			t.Fatal(err)
		}
		if !window.Within(within) {
			t.Fatalf("no holder renewed or took the lease on the new primary within %s of the promotion (+%s stalled)",
				within, window.Stalled())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replaceStopped waits until every child but the leader's has ended, then
// restarts the wrappers that had to stop: terminated (status 143) and, on
// an asynchronous pair, those whose lease was gone on the new primary
// (status 75). Any other wrapper must still run: it reconnected by itself.
// A take just before the crash (acked, if terminated is set) was lost when
// its holder exits 75: the standby's copy of the lease was live.
func (r *replicated) replaceStopped(terminated *member, leader, acked lwtest.Interval) {
	t := r.t
	t.Helper()
	for _, run := range r.runs() {
		if run.Pid != leader.Pid {
			r.waitEnd(run, renew+grace+slack)
		}
	}
	for _, m := range r.members {
		stopped := m == terminated
		for _, run := range r.runs() {
			stopped = stopped || run.Holder == m.id && run.Pid != leader.Pid
		}
		if !stopped {
			select {
			case <-m.proc.Exited:
				t.Errorf("wrapper %s exited %d during the failover", m.id, m.proc.Code())
			default:
				continue
			}
		}
		code := m.proc.Wait(t, 15*time.Second)
		switch {
		case m == terminated && code == 128+int(syscall.SIGTERM):
		case m != terminated && !r.pair.Sync && code == 75:
			r.lostLeases++
			if terminated != nil && m.id == acked.Holder {
				r.lostTake(m, acked)
			}
		default:
			t.Errorf("wrapper %s exited %d", m.id, code)
		}
		r.start(m)
		r.waitReady(m, r.start)
	}
}

// takenOver is how a renewal reports a row that another holder took.
var takenOver = regexp.MustCompile(`taken over by "[^"]*" with token (\d+)`)

// lostTake checks why m, whose take the new primary did not have, lost
// the lease: the row had gone back (ErrRowRegressed), another holder had
// already taken the row again with a newer token, or the new primary came
// too late and the lease ran out locally. A takeover reported with an
// older token than m's own is a lost write misreported.
func (r *replicated) lostTake(m *member, acked lwtest.Interval) {
	r.lostTakes++
	for _, e := range m.proc.LogEntries(r.t) {
		msg, _ := e["error"].(string)
		if e["message"] != "lease lost" {
			continue
		}
		switch match := takenOver.FindStringSubmatch(msg); {
		case strings.Contains(msg, lease.ErrRowRegressed.Error()):
			r.regressed++
		case match != nil:
			if token, _ := strconv.ParseInt(match[1], 10, 64); token <= acked.Token {
				r.t.Errorf("wrapper %s lost its take (token %d) in the failover and reported it as a takeover with token %d, not as %q",
					m.id, acked.Token, token, lease.ErrRowRegressed)
			}
		case strings.Contains(msg, "no renewal succeeded in time"):
		default:
			r.t.Errorf("wrapper %s lost its take in the failover: %s", m.id, msg)
		}
		return
	}
	r.t.Errorf("wrapper %s exited 75 without logging why it lost the lease", m.id)
}

// burst writes to a scratch table on the primary, chunk after chunk, until
// the returned function is called; it returns once two chunks are in.
func (r *replicated) burst() (stop func()) {
	t := r.t
	t.Helper()
	conn := r.pair.Conn(t)
	if _, err := conn.Exec(context.Background(), `CREATE TABLE IF NOT EXISTS scratch (id int, pad text)`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var chunks atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			// About 5 MB of WAL a chunk.
			if _, err := conn.Exec(ctx, `INSERT INTO scratch SELECT g, repeat(md5(g::text), 32) FROM generate_series(1, 5000) g`); err != nil {
				return // the primary crashed
			}
			chunks.Add(1)
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); chunks.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the write burst did not get going")
		}
	}
	return func() {
		cancel()
		<-done
		conn.Close(context.Background())
	}
}

// rotate makes every wrapper lead once more after the last failover, by
// terminating each leader in turn: each found the current primary by
// itself, and a standby takes over within the retry interval.
func (r *replicated) rotate() {
	t := r.t
	t.Helper()
	led := map[*member]bool{}
	for {
		runs := r.runs()
		m := r.holderOf(runs[len(runs)-1])
		if led[m] {
			t.Fatalf("wrapper %s leads a second time in the rotation", m.id)
		}
		if led[m] = true; len(led) == len(r.members) {
			return
		}
		_ = m.proc.Cmd.Process.Signal(syscall.SIGTERM)
		r.waitRun(len(runs), r.takeBound())
		if code := m.proc.Wait(t, 15*time.Second); code != 128+int(syscall.SIGTERM) {
			t.Errorf("terminated wrapper %s exited %d", m.id, code)
		}
	}
}

// checkUnique fails the test if two children got the same token.
func (r *replicated) checkUnique() {
	seen := map[int64]string{}
	for _, run := range r.runs() {
		if other, ok := seen[run.Token]; ok {
			r.t.Errorf("fencing token %d went to both %s and %s", run.Token, other, run.Holder)
			r.repeats++
		}
		seen[run.Token] = run.Holder
	}
}

// summary prints what the failovers lost and who rode them out.
func (r *replicated) summary(name string, rep *report) {
	line := fmt.Sprintf("scenario %-14s failovers=%d lost-takes=%d (%d reported as a lost write) leases-lost=%d rode-out=%d repeated-tokens=%d",
		name, rep.trials, r.lostTakes, r.regressed, r.lostLeases, r.rodeOut, r.repeats)
	r.t.Log(line)
	fmt.Println(line)
}
