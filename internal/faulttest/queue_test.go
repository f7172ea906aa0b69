package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
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
	"github.com/redbite/leasewrap/internal/stall"
	"github.com/redbite/leasewrap/internal/tcpproxy"
	"github.com/redbite/leasewrap/lease"
)

// The queue scenarios start their wrappers one by one, each a standby
// that queues behind the ones before it (or the first, which takes the
// lease at once), and end each child when the test says so: the order of
// the queue and the moment of each release are the test's, and faults
// land on the queue's head, its holder or the database at the moment a
// handoff is due. Every scenario ends with the harness's checks (no two
// children overlap, tokens rise strictly in start order) and with
// checkRecorded (every run recorded once).

// firstExpiry is how long a standby handed the lease has to adopt it,
// with the harness's timings: a frozen or dead head of the queue costs
// the job this long.
var firstExpiry = lease.FirstExpiry(lease.Timings{TTL: ttl, RenewInterval: renew, RetryInterval: retry, Grace: grace})

// queueJob is one job whose wrappers the test starts one at a time, each
// with its own flags, through no proxy; each child runs until the test
// ends it (finish), or a signal does.
type queueJob struct {
	*cluster
	// pool reads the database the wrappers use.
	pool *pgxpool.Pool
	// url is the wrappers' and the operator's connection string.
	url string
	// ends holds the files that end the children (endFile).
	ends string
}

// newQueueJob makes the lease table (table) on the database at addr and
// returns the job, with no wrapper yet. A wrapper that exits is the
// scenario's to judge: none is started again behind its back (the
// cluster's restart stays nil).
func newQueueJob(t *testing.T, addr, user, dbName, table string, pool *pgxpool.Pool) *queueJob {
	q := &queueJob{
		cluster: &cluster{t: t, dbAddr: addr, dbUser: user, dbName: dbName, table: table,
			history: filepath.Join(t.TempDir(), "history"), dead: map[int]int64{}, slots: 1},
		pool: pool,
		url:  dbURL(user, addr, dbName),
		ends: t.TempDir(),
	}
	migrate(t, q.url, table)
	return q
}

// newSharedQueueJob is newQueueJob on a fresh table of the shared test
// database.
func newSharedQueueJob(t *testing.T) *queueJob {
	addr, user, db, table := sharedDB(t)
	return newQueueJob(t, addr, user, db, table, pgtest.Pool(t))
}

// add starts a wrapper of the job with the harness's timings and flags
// of its own, under the holder id q<n>; its child records its run and
// runs until the test finishes it.
func (q *queueJob) add(flags ...string) *member { return q.addVia(nil, flags...) }

// addVia is add with the wrapper connecting through proxy (nil:
// directly), so that a fault of that proxy is the wrapper's alone.
func (q *queueJob) addVia(proxy *tcpproxy.Proxy, flags ...string) *member {
	m := &member{index: len(q.members), proxy: proxy}
	m.id = fmt.Sprintf("q%d", m.index)
	url := q.url
	if proxy != nil {
		url = dbURL(q.dbUser, proxy.Addr(), q.dbName)
	}
	args := []string{"--database-url", url, "--table", q.table, "--job", "work", "--id", m.id, "--wait", "--log-format", "json",
		"--ttl", ttl.String(), "--renew-interval", renew.String(), "--grace", grace.String(), "--retry-interval", retry.String()}
	args = append(append(args, flags...), "--", lwtest.Self())
	m.proc = lwtest.Start(q.t, binary, []string{lwtest.Child("trap record:" + q.history + " await:" + q.endFile(m))}, args...)
	q.members = append(q.members, m)
	q.register(m)
	return m
}

// lead starts the job's first wrapper, which takes the free lease, and
// waits for its child.
func (q *queueJob) lead(flags ...string) (*member, lwtest.Interval) {
	q.t.Helper()
	m := q.add(flags...)
	r := q.waitRun(len(q.runs()), 15*time.Second)
	if r.Holder != m.id {
		q.t.Fatalf("the first child is %s's, want %s's", r.Holder, m.id)
	}
	return m, r
}

// enqueue starts a standby and waits until it is live in the queue.
func (q *queueJob) enqueue(flags ...string) *member {
	q.t.Helper()
	m := q.add(flags...)
	q.waitQueued(m)
	return m
}

// enqueueProxied is enqueue through a proxy of the standby's own
// (member.proxy), for faults of its connection alone.
func (q *queueJob) enqueueProxied(flags ...string) *member {
	q.t.Helper()
	m := q.addVia(tcpproxy.Start(q.t, q.dbAddr), flags...)
	q.waitQueued(m)
	return m
}

// waitQueued waits until m is live in the job's queue, failing at once if
// its wrapper exits.
func (q *queueJob) waitQueued(m *member) {
	q.t.Helper()
	pgtest.Eventually(q.t, 15*time.Second, m.id+" queued", func() bool {
		select {
		case <-m.proc.Exited:
			q.t.Fatalf("standby %s exited %d before it was queued", m.id, m.proc.Code())
		default:
		}
		return slices.Contains(q.queued(), m.id)
	})
}

// queued is the job's queue as the views show it: the holder ids of its
// live entries, in the order a release hands the lease on.
func (q *queueJob) queued() []string {
	q.t.Helper()
	var raw []byte
	q.read("the queue", `SELECT `+lease.QueueSQL("l")+` FROM `+q.quoted("")+` AS l WHERE job_name = 'work'`, nil, &raw)
	standbys, err := lease.ParseQueue(raw)
	if err != nil {
		q.t.Fatal(err)
	}
	var holders []string
	for _, s := range standbys {
		holders = append(holders, s.Holder)
	}
	return holders
}

// entries is the holder ids in the queue column itself, live or not.
func (q *queueJob) entries() []string {
	q.t.Helper()
	var holders []string
	q.read("the queue column", `SELECT coalesce(array_agg(e->>'holder'), '{}') FROM `+q.quoted("")+` AS l,
  jsonb_array_elements(coalesce(l.queue, '[]')) AS e WHERE job_name = 'work'`, nil, &holders)
	return holders
}

// backendOf is the backend pid that keeps m's entry live (m listens).
func (q *queueJob) backendOf(m *member) int {
	q.t.Helper()
	var pid *int
	q.read(m.id+"'s entry", `SELECT (e->>'pid')::integer FROM `+q.quoted("")+` AS l,
  jsonb_array_elements(l.queue) AS e WHERE job_name = 'work' AND e->>'holder' = $1`, []any{m.id}, &pid)
	if pid == nil {
		q.t.Fatalf("%s's entry has no backend: it does not listen", m.id)
	}
	return *pid
}

// backendAlive reports whether the server has a backend with pid.
func (q *queueJob) backendAlive(pid int) bool {
	q.t.Helper()
	var alive bool
	q.read("pg_stat_activity", `SELECT EXISTS (SELECT FROM pg_catalog.pg_stat_activity WHERE pid = $1)`, []any{pid}, &alive)
	return alive
}

// holderNow is who the lease row names as its holder.
func (q *queueJob) holderNow() string {
	q.t.Helper()
	var holder string
	q.read("the holder", `SELECT holder FROM `+q.quoted("")+` WHERE job_name = 'work'`, nil, &holder)
	return holder
}

// pinned reports whether m's entry is pinned (release --to).
func (q *queueJob) pinned(m *member) bool {
	q.t.Helper()
	var pinned bool
	q.read(m.id+"'s pin", `SELECT EXISTS (SELECT FROM `+q.quoted("")+` AS l, jsonb_array_elements(l.queue) AS e
  WHERE job_name = 'work' AND e->>'holder' = $1 AND (e->>'pinned')::boolean)`, []any{m.id}, &pinned)
	return pinned
}

// quoted is the lease table's name with suffix, quoted.
func (q *queueJob) quoted(suffix string) string { return pgx.Identifier{q.table + suffix}.Sanitize() }

// read runs a query of one row into dest, trying again for a while on an
// error: the throwaway server restarts under some scenarios, breaking the
// pool's connections.
func (q *queueJob) read(what, sql string, args []any, dest ...any) {
	q.t.Helper()
	pgtest.Eventually(q.t, 15*time.Second, "read "+what, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := q.pool.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
			q.t.Logf("read %s: %v", what, err)
			return false
		}
		return true
	})
}

// endFile is the file whose creation ends m's child.
func (q *queueJob) endFile(m *member) string { return filepath.Join(q.ends, "end-"+m.id) }

// finish ends m's child: it exits 0, and its wrapper releases the lease.
func (q *queueJob) finish(m *member) {
	q.t.Helper()
	if err := os.WriteFile(q.endFile(m), nil, 0o644); err != nil {
		q.t.Fatal(err)
	}
}

// member returns the member with holder id id.
func (q *queueJob) member(id string) *member {
	q.t.Helper()
	for _, m := range q.members {
		if m.id == id {
			return m
		}
	}
	q.t.Fatalf("no wrapper has the id %q", id)
	return nil
}

// kill SIGKILLs m's wrapper and waits for it to be gone.
func (q *queueJob) kill(m *member) {
	q.t.Helper()
	_ = m.proc.Cmd.Process.Kill()
	if code := m.proc.Wait(q.t, 10*time.Second); code != 128+int(syscall.SIGKILL) {
		q.t.Errorf("SIGKILLed wrapper %s exited %d", m.id, code)
	}
}

// killRacing SIGKILLs m's wrapper, which may have ended first on its own:
// a holder hears an operator's release at once, stops its command and
// exits 75 (its lease was released), and the signal can land after that.
func (q *queueJob) killRacing(m *member) {
	q.t.Helper()
	_ = m.proc.Cmd.Process.Kill()
	if code := m.proc.Wait(q.t, 10*time.Second); code != 128+int(syscall.SIGKILL) && code != 75 {
		q.t.Errorf("SIGKILLed wrapper %s, racing its release, exited %d; want %d, or 75 had it stopped first", m.id, code, 128+int(syscall.SIGKILL))
	}
}

// freeze SIGSTOPs m's wrapper and waits until it is stopped.
func (q *queueJob) freeze(m *member) {
	q.t.Helper()
	pid := m.proc.Cmd.Process.Pid
	_ = m.proc.Cmd.Process.Signal(syscall.SIGSTOP)
	pgtest.Eventually(q.t, 5*time.Second, m.id+" stopped", func() bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		return len(fields) > 0 && fields[0] == "T"
	})
}

// releaseTo starts leasewrap release --to m, as an operator would.
func (q *queueJob) releaseTo(m *member) *lwtest.Proc {
	return lwtest.Start(q.t, binary, nil, "release", "--database-url", q.url, "--table", q.table, "--job", "work", "--to", m.id)
}

// tookSince is how long after the window opened next's wrapper logged
// that it took the lease, and whether that is later than bound plus what
// the machine stalled meanwhile (reported as an error).
func (q *queueJob) tookSince(window *stall.Window, next lwtest.Interval, bound time.Duration, what string) time.Duration {
	q.t.Helper()
	took := q.acquiredAt(next).Sub(window.Start())
	late, stalled := window.Late(took, bound)
	if late {
		q.t.Errorf("%s took the lease %s after %s, want within %s (+%s the test and the wrappers waited for a core)",
			next.Holder, took, what, bound, stalled)
	}
	q.t.Logf("%s took the lease %s after %s (%s stalled)", next.Holder, took.Round(time.Millisecond), what, stalled.Round(time.Millisecond))
	return took
}

// stop thaws every wrapper, interrupts the standbys first (a release
// would hand the lease to one as it stops), then the holder, and waits
// until every child is gone.
func (q *queueJob) stop() {
	q.t.Helper()
	holding := map[string]bool{}
	for _, r := range q.runs() {
		if q.end(r) == 0 {
			holding[r.Holder] = true
		}
	}
	for _, m := range q.members {
		_ = m.proc.Cmd.Process.Signal(syscall.SIGCONT)
		if !holding[m.id] {
			_ = m.proc.Cmd.Process.Signal(os.Interrupt)
		}
	}
	for _, m := range q.members {
		if !holding[m.id] {
			m.proc.Wait(q.t, 15*time.Second)
		}
	}
	q.cluster.stop()
}

// recordedRun is a row of the job's history table.
type recordedRun struct {
	holder  string
	token   int64
	attempt int
	outcome string
}

func (r recordedRun) String() string {
	return fmt.Sprintf("%s token %d attempt %d %s", r.holder, r.token, r.attempt, r.outcome)
}

// recorded reads the job's history, in token order.
func (q *queueJob) recorded() []recordedRun {
	q.t.Helper()
	var rows []recordedRun
	pgtest.Eventually(q.t, 15*time.Second, "read the history", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rs, err := q.pool.Query(ctx, `SELECT holder, fencing_token, attempt, outcome FROM `+q.quoted("_history")+`
WHERE job_name = 'work' ORDER BY fencing_token, attempt`)
		if err == nil {
			rows, err = pgx.CollectRows(rs, func(row pgx.CollectableRow) (recordedRun, error) {
				var r recordedRun
				return r, row.Scan(&r.holder, &r.token, &r.attempt, &r.outcome)
			})
		}
		if err != nil {
			q.t.Logf("read the history: %v", err)
		}
		return err == nil
	})
	return rows
}

// checkRecorded verifies, once every wrapper is gone, that every run is
// recorded once: no (job, token, attempt) twice; every child's run in one
// row of its holder's, not could_not_start; no other row but a handoff
// never adopted (could_not_start), on whose token no child ran. It
// returns the history.
func (q *queueJob) checkRecorded() []recordedRun {
	q.t.Helper()
	rows := q.recorded()
	ran := map[int64]lwtest.Interval{}
	for _, r := range q.runs() {
		if other, dup := ran[r.Token]; dup {
			q.t.Errorf("children of %s and %s both ran on token %d", other.Holder, r.Holder, r.Token)
		}
		ran[r.Token] = r
	}
	type key struct {
		token   int64
		attempt int
	}
	seen := map[key]bool{}
	recordedRuns := map[int64]int{}
	for _, row := range rows {
		if k := (key{row.token, row.attempt}); seen[k] {
			q.t.Errorf("run (work, %d, %d) recorded twice", row.token, row.attempt)
		} else {
			seen[k] = true
		}
		r, ok := ran[row.token]
		switch {
		case row.outcome == lease.OutcomeCouldNotStart && ok:
			q.t.Errorf("history row %s, but %s's child ran on that token", row, r.Holder)
		case row.outcome == lease.OutcomeCouldNotStart:
		case !ok:
			q.t.Errorf("history row %s, but no child ran on that token", row)
		case row.holder != r.Holder:
			q.t.Errorf("history row %s, but the child that ran on that token is %s's", row, r.Holder)
		default:
			recordedRuns[row.token]++
		}
	}
	for token, r := range ran {
		if n := recordedRuns[token]; n != 1 {
			q.t.Errorf("child of %s (token %d) is recorded %d times in the history, want once", r.Holder, token, n)
		}
	}
	q.t.Logf("history: %v", rows)
	return rows
}

// holdersOf is the holders of rows, in their order.
func holdersOf(rows []recordedRun) []string {
	var holders []string
	for _, r := range rows {
		holders = append(holders, r.holder)
	}
	return holders
}

// A standby at the head of the queue is SIGKILLed before a handoff: its
// backend goes with it, so the release passes its entry over (never hands
// it the lease: no could_not_start row), drops it from the queue, and
// hands the lease to the next standby, which runs next.
func TestQueueDeadHeadPassedOver(t *testing.T) {
	t.Parallel()
	const tries = 3
	for try := 1; !deadHeadPassedOver(t); try++ {
		if try == tries {
			t.Fatalf("in %d tries the leader never kept its lease until its standbys were queued", tries)
		}
	}
}

// deadHeadPassedOver is one try of TestQueueDeadHeadPassedOver. It
// reports false when the leader lost its lease before the scenario began
// (a machine so busy that its renewals starved), which leaves the first
// standby holding the lease instead of heading the queue: nothing to judge.
func deadHeadPassedOver(t *testing.T) (judged bool) {
	q := newSharedQueueJob(t)
	a, _ := q.lead()
	b := q.enqueue()
	c := q.enqueue()
	if holder := q.holderNow(); holder != a.id {
		t.Logf("%s lost its lease to %s before the scenario began; trying again", a.id, holder)
		for _, m := range q.members {
			_ = m.proc.Cmd.Process.Kill()
		}
		return false
	}
	backend := q.backendOf(b)
	q.kill(b)
	pgtest.Eventually(t, 10*time.Second, "the killed standby's backend gone", func() bool { return !q.backendAlive(backend) })
	window := q.window()
	q.finish(a)
	next := q.waitRun(1, retry+slack+20*time.Second)
	if next.Holder != c.id {
		t.Fatalf("after %s's release %s ran, want %s (%s, ahead of it, was dead)", a.id, next.Holder, c.id, b.id)
	}
	took := q.tookSince(window, next, retry+slack, a.id+"'s child was told to end")
	if slices.Contains(q.entries(), b.id) {
		t.Errorf("the dead standby %s is still in the queue column after the handoff: %v", b.id, q.entries())
	}
	q.stop()
	q.check("queue-dead-head", &report{trials: 1, failovers: []time.Duration{took}}, false)
	for _, row := range q.checkRecorded() {
		if row.holder == b.id || row.outcome == lease.OutcomeCouldNotStart {
			t.Errorf("history row %s: the dead standby was handed the lease", row)
		}
	}
	return true
}

// The head of the queue is SIGKILLed during a handoff, and the next head
// just after one:
//
//  1. killed while the lease is handed to it (frozen at the release, so
//     that it cannot adopt first, then killed): the next standby runs
//     within the first expiry and a retry interval of the release, and
//     the handoff is recorded could_not_start;
//  2. killed the moment its command started on the lease it adopted: its
//     command dies with it, the next standby runs within the TTL and a
//     retry interval, and the run is recorded lost.
func TestQueueHeadKilledDuringAndAfterAHandoff(t *testing.T) {
	t.Parallel()
	q := newSharedQueueJob(t)
	rep := &report{}
	a, _ := q.lead()
	b := q.enqueue()
	c := q.enqueue()
	d := q.enqueue()

	q.freeze(b)
	window := q.window()
	q.finish(a)
	pgtest.Eventually(t, 15*time.Second, "the lease handed to "+b.id, func() bool { return q.holderNow() == b.id })
	q.kill(b)
	rc := q.waitRun(1, firstExpiry+retry+slack+20*time.Second)
	if rc.Holder != c.id {
		t.Fatalf("after %s was killed with the lease handed to it, %s ran, want %s", b.id, rc.Holder, c.id)
	}
	rep.failovers = append(rep.failovers, q.tookSince(window, rc, firstExpiry+retry+slack, a.id+"'s release, "+b.id+" killed as the lease was handed to it"))
	rep.trials++

	q.finish(c)
	rd := q.waitRun(2, retry+slack+20*time.Second)
	if rd.Holder != d.id {
		t.Fatalf("after %s's release %s ran, want %s", c.id, rd.Holder, d.id)
	}
	e := q.enqueue()
	window = q.window()
	q.kill(d)
	lwtest.WaitGone(t, rd.Pid, 10*time.Second)
	re := q.waitRun(3, ttl+retry+slack+20*time.Second)
	if re.Holder != e.id {
		t.Fatalf("after %s was killed holding the lease, %s ran, want %s", d.id, re.Holder, e.id)
	}
	rep.failovers = append(rep.failovers, q.tookSince(window, re, ttl+retry+slack, d.id+" was killed just after adopting"))
	rep.trials++

	q.stop()
	q.check("queue-head-killed", rep, false)
	outcomes := map[string]string{}
	for _, row := range q.checkRecorded() {
		outcomes[row.holder] = row.outcome
	}
	if outcomes[b.id] != lease.OutcomeCouldNotStart || outcomes[d.id] != lease.OutcomeLost {
		t.Errorf("history: %s %q, %s %q; want could_not_start for the head killed while handed, lost for the one killed holding", b.id, outcomes[b.id], d.id, outcomes[d.id])
	}
}

// A polling standby (priority 1, so ahead in the queue) is SIGKILLed,
// then the holder: the dead standby's entry still counts (it said it
// looks within its entry's life), but a lease that expired unreleased
// gives the head of the queue one retry interval of turn, and the
// standby behind it, listening or polling, looks again when that turn
// ends: it runs within the TTL and a retry interval of the crash, a
// retry interval after the lease's expiry (not the first expiry and a
// polling interval, nor its own polling interval behind the head).
func TestQueueDeadPollerAheadOfACrashedHolder(t *testing.T) {
	t.Parallel()
	for _, listen := range []bool{true, false} {
		t.Run("listen="+strconv.FormatBool(listen), func(t *testing.T) {
			t.Parallel()
			deadPollerAheadOfACrashedHolder(t, "--listen="+strconv.FormatBool(listen))
		})
	}
}

// deadPollerAheadOfACrashedHolder is TestQueueDeadPollerAheadOfACrashedHolder
// with the standby behind the dead one started with flag.
func deadPollerAheadOfACrashedHolder(t *testing.T, flag string) {
	q := newSharedQueueJob(t)
	h, rh := q.lead()
	p := q.enqueue("--listen=false", "--priority", "1")
	a := q.enqueue(flag)
	q.kill(p)
	// The dead poller's entry stays in the column until it lapses (a
	// polling entry lives four TTLs, refreshed at half its life), which
	// a loaded machine can reach before this test looks; whether it
	// still counted when the lease expired is what a's take shows below.
	if got := q.entries(); !slices.Contains(got, p.id) {
		t.Fatalf("queue column %v after %s was killed, want its entry still there", got, p.id)
	}
	window := q.window()
	q.kill(h)
	lwtest.WaitGone(t, rh.Pid, 10*time.Second)
	var expires time.Time
	q.read("the expiry", `SELECT expires_at FROM `+q.quoted("")+` WHERE job_name = 'work'`, nil, &expires)
	ra := q.waitRun(1, ttl+retry+slack+20*time.Second)
	if ra.Holder != a.id {
		t.Fatalf("after %s was killed %s ran, want %s", h.id, ra.Holder, a.id)
	}
	took := q.tookSince(window, ra, ttl+retry+slack, h.id+" was killed")
	var acquired time.Time
	q.read("the take", `SELECT acquired_at FROM `+q.quoted("")+` WHERE job_name = 'work'`, nil, &acquired)
	// a looks just after the expiry, and again when the dead head's turn
	// is over: 300ms covers the round trips.
	after := acquired.Sub(expires)
	if late, stalled := window.Late(after, retry+300*time.Millisecond); late || after < retry {
		t.Errorf("%s took the lease %s after it expired, want after the dead head's turn (%s) and within %s (+%s stalled)",
			a.id, after, retry, retry+300*time.Millisecond, stalled)
	}
	q.stop()
	q.check("queue-dead-poller", &report{trials: 1, failovers: []time.Duration{took}}, false)
	q.checkRecorded()
}

// The head of the queue is SIGSTOPped before a handoff: its backend
// lives, so it is handed the lease, and never adopts it. The next
// standby runs within the first expiry and a retry interval of the
// release; the handoff is recorded could_not_start with a token of its
// own, between the two runs'. Thawed, the frozen standby does not run on
// that token: it queues again, and is handed the lease with a new token
// when its turn comes.
func TestQueueFrozenHeadCouldNotStart(t *testing.T) {
	t.Parallel()
	q := newSharedQueueJob(t)
	a, ra := q.lead()
	b := q.enqueue()
	c := q.enqueue()
	q.freeze(b)
	window := q.window()
	q.finish(a)
	next := q.waitRun(1, firstExpiry+retry+slack+20*time.Second)
	if next.Holder != c.id {
		t.Fatalf("after %s's release %s ran, want %s (%s, ahead of it, was frozen)", a.id, next.Holder, c.id, b.id)
	}
	took := q.tookSince(window, next, firstExpiry+retry+slack, a.id+"'s child was told to end")
	var handed []recordedRun
	for _, row := range q.recorded() {
		if row.holder == b.id {
			handed = append(handed, row)
		}
	}
	switch {
	case len(handed) != 1 || handed[0].outcome != lease.OutcomeCouldNotStart:
		t.Errorf("the frozen standby's history rows: %v, want one, could_not_start", handed)
	case !(ra.Token < handed[0].token && handed[0].token < next.Token):
		t.Errorf("tokens: %s ran on %d, the frozen %s was handed %d, %s ran on %d; want rising", a.id, ra.Token, b.id, handed[0].token, c.id, next.Token)
	}

	_ = b.proc.Cmd.Process.Signal(syscall.SIGCONT)
	q.waitQueued(b)
	for _, r := range q.runs() {
		if r.Holder == b.id {
			t.Errorf("thawed, %s ran its command on token %d while %s held the lease", b.id, r.Token, c.id)
		}
	}
	if holder := q.holderNow(); holder != c.id {
		t.Errorf("the lease is %s's after the thaw, want %s's", holder, c.id)
	}
	q.finish(c)
	again := q.waitRun(2, retry+slack+20*time.Second)
	if again.Holder != b.id || again.Token <= next.Token {
		t.Errorf("after %s's release %s ran on token %d, want %s on a token above %d", c.id, again.Holder, again.Token, b.id, next.Token)
	}
	q.stop()
	q.check("queue-frozen-head", &report{trials: 1, failovers: []time.Duration{took}}, false)
	q.checkRecorded()
}

// The holder's wrapper is SIGKILLed as its command ends, before its
// release hands the lease on: the lease expires, the head of the queue
// alone takes it, within the TTL and a retry interval, and the run is
// recorded lost. Two trials: the wrapper frozen before the command ends
// and killed after (the release is never sent), and killed the moment the
// command is seen gone (the release may or may not have gone out: either
// way the head runs next).
func TestQueueHolderKilledMidHandoff(t *testing.T) {
	t.Parallel()
	q := newSharedQueueJob(t)
	a, ra := q.lead()
	b := q.enqueue()
	c := q.enqueue()
	rep := &report{}

	q.freeze(a)
	q.finish(a)
	lwtest.WaitGone(t, ra.Pid, 10*time.Second)
	window := q.window()
	q.kill(a)
	next := q.waitRun(1, ttl+retry+slack+20*time.Second)
	if next.Holder != b.id {
		t.Fatalf("after %s died unreleased %s ran, want the head of the queue, %s", a.id, next.Holder, b.id)
	}
	rep.failovers = append(rep.failovers, q.tookSince(window, next, ttl+retry+slack, a.id+" was killed"))
	rep.trials++

	d := q.enqueue()
	window = q.window()
	q.finish(b)
	for !lwtest.ProcessGone(next.Pid) {
		if !window.Within(10 * time.Second) {
			t.Fatalf("%s's child still runs %s after it was told to end", b.id, 10*time.Second)
		}
		time.Sleep(time.Millisecond)
	}
	// Its release takes a few milliseconds: it may have released and
	// exited before the signal lands.
	_ = b.proc.Cmd.Process.Kill()
	if code := b.proc.Wait(t, 10*time.Second); code != 128+int(syscall.SIGKILL) && code != 0 {
		t.Errorf("%s, SIGKILLed as its command ended, exited %d; want %d, or 0 had it released first", b.id, code, 128+int(syscall.SIGKILL))
	}
	last := q.waitRun(2, ttl+retry+slack+20*time.Second)
	if last.Holder != c.id {
		t.Fatalf("after %s was killed as its command ended %s ran, want the head of the queue, %s (then %s)", b.id, last.Holder, c.id, d.id)
	}
	rep.failovers = append(rep.failovers, q.tookSince(window, last, ttl+retry+slack, b.id+"'s child was told to end"))
	rep.trials++

	q.stop()
	q.check("queue-mid-handoff", rep, false)
	for _, row := range q.checkRecorded() {
		switch {
		case row.token == ra.Token && row.outcome != lease.OutcomeLost:
			t.Errorf("history row %s: %s died without releasing, want its run recorded %s", row, a.id, lease.OutcomeLost)
		case row.token == next.Token:
			t.Logf("%s, killed as its command ended, is recorded %s", b.id, row.outcome)
		}
	}
}

// release --to races a SIGKILL of the holder: whichever wins, no two
// children overlap, tokens rise, and once release --to has pinned the
// standby and exited 0, that standby runs next, ahead of the head of the
// queue, by the holder's handoff or at the lease's expiry. Three trials:
// the holder killed before release --to runs, as soon as the pin is in
// the queue (while release --to asks the holder to stop), and the moment
// its command stopped in answer (as it hands the lease on).
//
// A holder whose renewal times out (a loaded machine) gives its lease up
// and hands it to the head of the queue by itself, before release --to
// could: that trial races something else, and the scenario is played
// again on a job of its own, at most three times.
func TestQueueReleaseToRacesKill(t *testing.T) {
	t.Parallel()
	for attempt := 1; !releaseToRacesKill(t); attempt++ {
		if attempt == 3 {
			t.Fatal("in each of 3 attempts a holder lost its lease by itself during a trial")
		}
	}
}

// releaseToRacesKill is one play of TestQueueReleaseToRacesKill. It
// reports false, having checked only that no two runs overlapped, when a
// holder lost its lease by itself during a trial.
func releaseToRacesKill(t *testing.T) bool {
	q := newSharedQueueJob(t)
	holder, held := q.lead()
	head := q.enqueue() // first in line throughout, never chosen
	rep := &report{}
	for trial, when := range []string{"before release --to", "once pinned", "as it hands on"} {
		to := q.enqueue()
		n := len(q.runs())
		window := q.window()
		var op *lwtest.Proc
		switch trial {
		case 0:
			q.kill(holder)
			op = q.releaseTo(to)
		case 1:
			op = q.releaseTo(to)
			pgtest.Eventually(t, 15*time.Second, to.id+" pinned", func() bool { return q.pinned(to) })
			q.killRacing(holder)
		case 2:
			op = q.releaseTo(to)
			if code := op.Wait(t, 20*time.Second); code == 0 {
				lwtest.WaitGone(t, held.Pid, ttl+slack)
			}
			q.killRacing(holder)
		}
		code := op.Wait(t, 20*time.Second)
		next := q.waitRun(n, ttl+retry+slack+20*time.Second)
		t.Logf("trial %d (killed %s): release --to %s exited %d, then %s ran", trial+1, when, to.id, code, next.Holder)
		if lostByItself(t, holder) {
			t.Logf("%s lost its lease by itself during trial %d: playing the scenario again", holder.id, trial+1)
			q.stop()
			q.check("queue-release-to", rep, false)
			return false
		}
		switch {
		case code == 0 && next.Holder != to.id:
			t.Errorf("release --to %s exited 0, but %s ran next", to.id, next.Holder)
		case code != 0:
			t.Logf("release --to %s exited %d: %s", to.id, code, op.Logs)
		}
		rep.failovers = append(rep.failovers, q.tookSince(window, next, ttl+retry+slack, "the fault"))
		rep.trials++
		holder, held = q.holderOf(next), next
	}
	for _, r := range q.runs() {
		if r.Holder == head.id {
			t.Errorf("%s, never chosen, ran on token %d", head.id, r.Token)
		}
	}
	q.stop()
	q.check("queue-release-to", rep, false)
	q.checkRecorded()
	return true
}

// lostByItself reports whether m's wrapper logged a lease lost for a
// cause of its own (its renewals failed), not an operator's release.
func lostByItself(t *testing.T, m *member) bool {
	return slices.ContainsFunc(m.proc.LogEntries(t), func(e map[string]any) bool {
		cause, _ := e["error"].(string)
		return e["message"] == "lease lost" && !strings.Contains(cause, "an operator released the lease")
	})
}

// Standbys queued one after another with priorities 0, 0, 1 run, once
// the holder releases, the one of priority 1 first, then those of
// priority 0 in the order they came: each release hands the lease to the
// next. With listening standbys and with polling ones.
func TestQueueOrder(t *testing.T) {
	t.Parallel()
	for _, listen := range []bool{true, false} {
		t.Run("listen="+strconv.FormatBool(listen), func(t *testing.T) {
			t.Parallel()
			q := newSharedQueueJob(t)
			flag := "--listen=" + strconv.FormatBool(listen)
			a, _ := q.lead(flag)
			b := q.enqueue(flag, "--priority", "0")
			c := q.enqueue(flag, "--priority", "0")
			d := q.enqueue(flag, "--priority", "1")
			if got, want := q.queued(), []string{d.id, b.id, c.id}; !slices.Equal(got, want) {
				t.Errorf("queue %v, want %v", got, want)
			}
			q.finish(a)
			want := []*member{a, d, b, c}
			for i, m := range want[1:] {
				r := q.waitRun(i+1, firstExpiry+retry+slack+20*time.Second)
				if r.Holder != m.id {
					t.Errorf("run %d is %s's, want %s's", i+2, r.Holder, m.id)
				}
				q.finish(q.member(r.Holder))
			}
			q.stop()
			q.check("queue-order", &report{trials: 1}, false)
			var ids []string
			for _, m := range want {
				ids = append(ids, m.id)
			}
			var ran []string
			for _, r := range q.runs() {
				ran = append(ran, r.Holder)
			}
			if !slices.Equal(ran, ids) {
				t.Errorf("children ran in the order %v, want %v", ran, ids)
			}
			if got := holdersOf(q.checkRecorded()); !slices.Equal(got, ids) {
				t.Errorf("history in token order %v, want %v", got, ids)
			}
		})
	}
}

// A handoff during a restart of PostgreSQL (a throwaway server, never the
// shared one): in the first trial the holder's command ends as the server
// restarts, so that its release, the handoff and the adoption race the
// shutdown; in the second the server restarts between the handoff (to a
// frozen head of the queue) and its adoption, and the head is thawed once
// it is back. Either way a standby runs within the TTL and a retry
// interval of the server's return, no two children overlap, tokens rise
// and every run is recorded once.
func TestQueueHandoffDuringRestart(t *testing.T) {
	t.Parallel()
	pg := pgtest.StartCluster(t)
	pool, err := pgxpool.New(context.Background(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q := newQueueJob(t, pg.Addr(), "postgres", "postgres", "lease_queue_restart", pool)
	rep := &report{}
	a, _ := q.lead()
	q.enqueue()
	q.enqueue()

	q.finish(a)
	pg.Restart(t)
	window := q.window()
	next := q.waitRun(1, ttl+retry+slack+20*time.Second)
	if next.Holder == a.id {
		t.Fatalf("%s ran again", a.id)
	}
	rep.failovers = append(rep.failovers, q.tookSince(window, next, ttl+retry+slack, "the server was back"))
	rep.trials++

	// The run may have begun before the restart and lost its lease to
	// it (its wrapper exits 75 and is not started again), leaving the
	// queue one standby short: enqueue until two wait behind the holder.
	holder := q.member(q.holderNow())
	for len(q.queued()) < 2 {
		q.enqueue()
	}
	queued := q.queued()
	head := q.member(queued[0])
	q.freeze(head)
	q.finish(holder)
	pgtest.Eventually(t, 15*time.Second, "the lease handed to "+head.id, func() bool { return q.holderNow() == head.id })
	pg.Restart(t)
	window = q.window()
	_ = head.proc.Cmd.Process.Signal(syscall.SIGCONT)
	last := q.waitRun(2, ttl+retry+slack+20*time.Second)
	t.Logf("handed to %s (frozen) before the restart; %s ran", head.id, last.Holder)
	rep.failovers = append(rep.failovers, q.tookSince(window, last, ttl+retry+slack, "the server was back"))
	rep.trials++

	q.stop()
	q.check("queue-pg-restart", rep, false)
	q.checkRecorded()
}

// A polling standby refreshes its entry (enters the queue again when half
// its life is gone) after a look that read the lease held. A release that
// commits between that look and the refresh hands it the lease and takes
// its entry out of the queue; the refresh must not leave the standby
// unable to adopt the lease handed to it: it adopts it within a retry
// interval, and no could_not_start row is written for a standby that was
// live all along. The test stages that interleaving with a lock of its
// own on the lease row: the release waits on it first, the refresh
// behind the release. On a loaded machine the refresh may come first: the
// interleaving was not staged, and it is staged again on a job of its
// own, at most three times.
func TestQueuePollingRefreshRacesHandoff(t *testing.T) {
	t.Parallel()
	for attempt := 1; !pollingRefreshRacesHandoff(t); attempt++ {
		if attempt == 3 {
			t.Fatal("in each of 3 attempts the refresh came before the release: the interleaving was not staged")
		}
	}
}

// pollingRefreshRacesHandoff is one play of
// TestQueuePollingRefreshRacesHandoff. It reports false when the
// interleaving could not be staged.
func pollingRefreshRacesHandoff(t *testing.T) bool {
	q := newSharedQueueJob(t)
	a, _ := q.lead("--listen=false")
	b := q.enqueue("--listen=false")
	// Lock the row only once b's refresh is near (it refreshes at its
	// first look past half its entry's life), a quarter TTL before, so
	// that the release still comes well before b's refresh.
	life := lease.PollingEntryLife(ttl)
	pgtest.Eventually(t, life/2+10*time.Second, b.id+"'s refresh near", func() bool { return q.entryLeft(b) < life/2+ttl/4 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := q.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT FROM `+q.quoted("")+` WHERE job_name = 'work' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	q.finish(a)
	q.waitBlocked(a.id+"'s release", `WITH was AS%`)
	if q.blocked(`UPDATE % SET queue = %`) || q.blockedIn("_enter") {
		t.Logf("%s refreshed its entry before %s's release came: staging it again", b.id, a.id)
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		q.stop()
		return false
	}
	pgtest.Eventually(t, 10*time.Second, b.id+"'s refresh of its entry waiting for the row lock", func() bool {
		return q.blockedIn("_enter")
	})
	window := q.window()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	next := q.waitRun(1, firstExpiry+retry+slack+20*time.Second)
	q.tookSince(window, next, retry+slack, "the release and the refresh went through")
	for _, e := range b.proc.LogEntries(t) {
		if e["message"] == "standing by: lease held by another instance" && e["current_holder"] == b.id {
			t.Errorf("%s saw the lease handed to it (%v left) and stood by instead of adopting it", b.id, e["expires_in"])
		}
	}
	q.stop()
	q.check("queue-refresh", &report{trials: 1}, false)
	for _, row := range q.checkRecorded() {
		if row.outcome == lease.OutcomeCouldNotStart {
			t.Errorf("history row %s: %s, live and polling, did not adopt the lease handed to it", row, row.holder)
		}
	}
	return true
}

// entryLeft is how long m's entry (a polling standby's) still counts.
func (q *queueJob) entryLeft(m *member) time.Duration {
	q.t.Helper()
	var left *int64
	q.read(m.id+"'s entry", `SELECT (e->>'until')::bigint - (extract(epoch FROM now()) * 1000000)::bigint FROM `+q.quoted("")+` AS l,
  jsonb_array_elements(l.queue) AS e WHERE job_name = 'work' AND e->>'holder' = $1`, []any{m.id}, &left)
	if left == nil {
		q.t.Fatalf("%s's entry has no until: it listens", m.id)
	}
	return time.Duration(*left) * time.Microsecond
}

// blocked reports whether a statement on the job's table that starts as
// prefix (a LIKE pattern) waits for a lock.
func (q *queueJob) blocked(prefix string) bool {
	q.t.Helper()
	var waiting bool
	q.read("pg_stat_activity", `SELECT EXISTS (SELECT FROM pg_catalog.pg_stat_activity
  WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1 AND strpos(query, $2) > 0)`,
		[]any{prefix, q.quoted("")}, &waiting)
	return waiting
}

// blockedIn reports whether a call of a lease table's function whose
// name ends in suffix and the hash of its definition waits for a lock.
func (q *queueJob) blockedIn(suffix string) bool {
	q.t.Helper()
	var waiting bool
	q.read("pg_stat_activity", `SELECT EXISTS (SELECT FROM pg_catalog.pg_stat_activity
  WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ~ ('^SELECT \* FROM .*' || $1 || '_[0-9a-f]{8}"\('))`,
		[]any{suffix}, &waiting)
	return waiting
}

// waitBlocked waits until a statement that starts as prefix waits for a
// lock (see blocked).
func (q *queueJob) waitBlocked(what, prefix string) {
	q.t.Helper()
	pgtest.Eventually(q.t, 10*time.Second, what+" waiting for the row lock", func() bool { return q.blocked(prefix) })
}

// The head of the queue loses its connection to the database (its own
// proxy) before, during and after a handoff, four trials in a row:
//
//  1. cut before the release: its backend ends with the connection, so
//     the release passes it over and the next standby runs within a
//     retry interval;
//  2. blackholed before the release: its backend lives on, so it is
//     handed the lease it cannot adopt, and the next standby runs within
//     the first expiry and a retry interval (recorded could_not_start);
//  3. cut while the lease is handed to it (frozen at the release, cut,
//     then thawed): as 2;
//  4. cut after it adopted the lease: it stops its command before the
//     lease could expire and exits 75, and the next standby runs within
//     the TTL and a retry interval.
//
// Restored, it queues again; it runs nothing while cut off.
func TestQueueHeadCutOff(t *testing.T) {
	t.Parallel()
	q := newSharedQueueJob(t)
	rep := &report{}
	holder, _ := q.lead()
	head := q.enqueueProxied()
	// handOn releases holder's lease with head first in the queue and
	// next behind it, the fault injected by fault, and waits for next's
	// run within bound.
	handOn := func(what string, bound time.Duration, fault func()) lwtest.Interval {
		t.Helper()
		next := q.enqueue()
		n := len(q.runs())
		fault()
		window := q.window()
		q.finish(holder)
		if what == "cut as the lease was handed to it" {
			pgtest.Eventually(t, 15*time.Second, "the lease handed to "+head.id, func() bool { return q.holderNow() == head.id })
			head.proxy.Cut()
			_ = head.proc.Cmd.Process.Signal(syscall.SIGCONT)
		}
		r := q.waitRun(n, bound+20*time.Second)
		if r.Holder != next.id {
			t.Fatalf("%s: %s ran after %s's release, want %s", what, r.Holder, holder.id, next.id)
		}
		rep.failovers = append(rep.failovers, q.tookSince(window, r, bound, holder.id+"'s release, "+head.id+" "+what))
		rep.trials++
		head.proxy.Restore()
		q.waitQueued(head)
		holder = next
		return r
	}

	backend := q.backendOf(head)
	handOn("cut before the release", retry+slack, func() {
		head.proxy.Cut()
		pgtest.Eventually(t, 10*time.Second, "the cut standby's backend gone", func() bool { return !q.backendAlive(backend) })
	})
	handOn("blackholed before the release", firstExpiry+retry+slack, head.proxy.Blackhole)
	handOn("cut as the lease was handed to it", firstExpiry+retry+slack, func() { q.freeze(head) })

	next := q.enqueue()
	q.finish(holder)
	adopted := q.waitRun(len(q.runs()), retry+slack+20*time.Second)
	if adopted.Holder != head.id {
		t.Fatalf("%s ran after %s's release, want the head of the queue, %s", adopted.Holder, holder.id, head.id)
	}
	window := q.window()
	head.proxy.Cut()
	last := q.waitRun(len(q.runs()), ttl+retry+slack+20*time.Second)
	if last.Holder != next.id {
		t.Fatalf("%s ran after %s was cut off holding the lease, want %s", last.Holder, head.id, next.id)
	}
	rep.failovers = append(rep.failovers, q.tookSince(window, last, ttl+retry+slack, head.id+" was cut off holding the lease"))
	rep.trials++
	if code := head.proc.Wait(t, 15*time.Second); code != 75 {
		t.Errorf("%s, cut off holding the lease, exited %d, want 75", head.id, code)
	}

	q.stop()
	q.check("queue-head-cut", rep, false)
	var handed []recordedRun
	for _, row := range q.checkRecorded() {
		if row.outcome == lease.OutcomeCouldNotStart {
			handed = append(handed, row)
		}
	}
	if len(handed) != 2 || handed[0].holder != head.id || handed[1].holder != head.id {
		t.Errorf("could_not_start rows %v, want two of %s's (blackholed, and cut as the lease was handed to it)", handed, head.id)
	}
}

// Priorities change while standbys wait: an operator restarts one queued
// standby with a higher --priority and another with a lower one. Each
// leaves the queue and enters it again at its new place, ahead of every
// standby of a lower priority and behind those of its own that came
// before it, and the lease goes in that order, one handoff per release.
func TestQueuePriorityChanged(t *testing.T) {
	t.Parallel()
	q := newSharedQueueJob(t)
	a, _ := q.lead()
	b := q.enqueue()
	c := q.enqueue()
	d := q.enqueue()
	restart := func(m *member, priority string) *member {
		t.Helper()
		_ = m.proc.Cmd.Process.Signal(os.Interrupt)
		m.proc.Wait(t, 15*time.Second)
		return q.enqueue("--priority", priority)
	}
	up := restart(c, "1")
	down := restart(b, "-1")
	e := q.enqueue()
	want := []string{up.id, d.id, e.id, down.id}
	if got := q.queued(); !slices.Equal(got, want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
	q.finish(a)
	for i, id := range want {
		r := q.waitRun(i+1, retry+slack+20*time.Second)
		if r.Holder != id {
			t.Fatalf("run %d is %s's, want %s's (queue order %v)", i+2, r.Holder, id, want)
		}
		q.finish(q.member(r.Holder))
	}
	q.stop()
	q.check("queue-priority-changed", &report{trials: 1}, false)
	if got, want := holdersOf(q.checkRecorded()), append([]string{a.id}, want...); !slices.Equal(got, want) {
		t.Errorf("history in token order %v, want %v", got, want)
	}
}
