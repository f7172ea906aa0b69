package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/tcpproxy"
)

// scheduler is one instance of a scheduled job, with its own proxy to the
// database.
type scheduler struct {
	index int
	id    string
	proxy *tcpproxy.Proxy
	proc  *lwtest.Proc
	// child is the command's script.
	child string
	// flags are this instance's own, after the fleet's.
	flags []string
}

// fleet is N schedulers of one job on one table.
type fleet struct {
	t       *testing.T
	pool    *pgxpool.Pool
	dbAddr  string
	dbUser  string
	dbName  string
	table   string
	spec    string
	extra   []string
	records string
	members []*scheduler
	starts  int
}

func newFleet(t *testing.T, n int, spec string, extra ...string) *fleet {
	addr, user, db, table := sharedDB(t)
	f := &fleet{t: t, pool: pgtest.Pool(t), dbAddr: addr, dbUser: user, dbName: db, table: table, spec: spec, extra: extra,
		records: filepath.Join(t.TempDir(), "records")}
	for i := range n {
		f.members = append(f.members, &scheduler{index: i, proxy: tcpproxy.Start(t, addr),
			child: "trap record:" + f.records + " sleep:200ms"})
	}
	return f
}

// start (re)starts m under a new holder id, and returns its process.
func (f *fleet) start(m *scheduler) *lwtest.Proc {
	f.starts++
	m.id = fmt.Sprintf("s%d-%d", m.index, f.starts)
	args := append([]string{"--database-url", dbURL(f.dbUser, m.proxy.Addr(), f.dbName), "--table", f.table, "--job", "work", "--id", m.id, "--log-format", "json",
		"--ttl", ttl.String(), "--renew-interval", renew.String(), "--grace", grace.String(), "--retry-interval", retry.String(),
		"--schedule", f.spec}, f.extra...)
	args = append(args, m.flags...)
	m.proc = lwtest.Start(f.t, binary, []string{lwtest.Child(m.child)}, append(args, "--", lwtest.Self())...)
	return m.proc
}

// exited reports whether m's wrapper has exited.
func (m *scheduler) exited() bool {
	select {
	case <-m.proc.Exited:
		return true
	default:
		return false
	}
}

// stop ends every scheduler (SIGINT) and waits for them and their children.
func (f *fleet) stop() {
	f.t.Helper()
	for _, m := range f.members {
		m.proxy.Restore()
		_ = m.proc.Cmd.Process.Signal(syscall.SIGCONT)
		_ = m.proc.Cmd.Process.Signal(os.Interrupt)
	}
	for _, m := range f.members {
		m.proc.Wait(f.t, 20*time.Second)
	}
	for _, r := range lwtest.ReadHistory(f.t, f.records) {
		lwtest.WaitGone(f.t, r.Pid, 10*time.Second)
	}
}

// account is how the database accounts for one scheduled time.
type account struct {
	claim   string   // the claim's outcome ("" when none)
	history []string // the history rows' outcomes
}

// accounts reads the claims and history rows of the times in [from, to].
func (f *fleet) accounts(from, to time.Time) map[time.Time]*account {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := map[time.Time]*account{}
	get := func(at time.Time) *account {
		at = at.UTC()
		if out[at] == nil {
			out[at] = &account{}
		}
		return out[at]
	}
	// each calls fn with the scheduled time and outcome of every row of
	// table in the window.
	each := func(table string, fn func(a *account, outcome string)) {
		rows, err := f.pool.Query(ctx, "SELECT scheduled_at, outcome FROM "+pgx.Identifier{table}.Sanitize()+
			" WHERE job_name = 'work' AND scheduled_at BETWEEN $1 AND $2", from, to)
		if err != nil {
			f.t.Fatal(err)
		}
		var (
			at      time.Time
			outcome string
		)
		_, err = pgx.ForEachRow(rows, []any{&at, &outcome}, func() error {
			fn(get(at), outcome)
			return nil
		})
		if err != nil {
			f.t.Fatal(err)
		}
	}
	each(f.table+"_schedule", func(a *account, outcome string) { a.claim = outcome })
	each(f.table+"_history", func(a *account, outcome string) { a.history = append(a.history, outcome) })
	return out
}

// ranBy groups the children's own records by scheduled time.
func (f *fleet) ranBy() map[time.Time][]lwtest.Interval {
	out := map[time.Time][]lwtest.Interval{}
	for _, r := range lwtest.ReadHistory(f.t, f.records) {
		if r.ScheduledAt.IsZero() {
			f.t.Errorf("child of %s (pid %d) was not told its scheduled time", r.Holder, r.Pid)
			continue
		}
		out[r.ScheduledAt.UTC()] = append(out[r.ScheduledAt.UTC()], r)
	}
	return out
}

// runOutcome reports whether a history outcome is that of a run (the
// lease was taken for the time), not of a missed or skipped time.
func runOutcome(outcome string) bool {
	return outcome != "missed" && outcome != "skipped" && outcome != "paused"
}

// checkExactlyOnce checks every time of the schedule in [from, to] (period
// apart, from included): one claim, one history row that agrees with it,
// and a child only for a run, never two; and that the children's tokens
// rise in the order they started. It returns the count of each outcome.
func (f *fleet) checkExactlyOnce(from, to time.Time, period time.Duration) map[string]int {
	f.t.Helper()
	accounts := f.accounts(from, to)
	ran := f.ranBy()
	counts := map[string]int{}
	for at := from.UTC(); !at.After(to); at = at.Add(period) {
		a := accounts[at]
		children := ran[at]
		switch {
		case a == nil || a.claim == "":
			f.t.Errorf("%s: no claim, the time is not accounted for", at.Format(time.TimeOnly))
			continue
		case len(a.history) != 1:
			f.t.Errorf("%s: claim %s, history %q: want exactly one history row", at.Format(time.TimeOnly), a.claim, a.history)
		case (a.claim == "run") != runOutcome(a.history[0]) || !runOutcome(a.history[0]) && a.claim != a.history[0]:
			f.t.Errorf("%s: claim %s disagrees with history %s", at.Format(time.TimeOnly), a.claim, a.history[0])
		}
		if len(children) > 1 {
			f.t.Errorf("%s: run %d times, by %v", at.Format(time.TimeOnly), len(children), children)
		}
		if len(children) > 0 && a.claim != "run" {
			f.t.Errorf("%s: a child ran a time claimed %s", at.Format(time.TimeOnly), a.claim)
		}
		if len(a.history) == 1 && a.history[0] == "exited" && len(children) == 0 {
			f.t.Errorf("%s: history says exited, but no child ran", at.Format(time.TimeOnly))
		}
		if len(a.history) > 0 {
			counts[a.history[0]]++
		}
	}
	f.checkTokensRise()
	return counts
}

// checkTokensRise checks that the children's fencing tokens rise in the
// order they started.
func (f *fleet) checkTokensRise() {
	f.t.Helper()
	runs := lwtest.ReadHistory(f.t, f.records)
	sort.Slice(runs, func(i, j int) bool { return runs[i].Start < runs[j].Start })
	for i := 1; i < len(runs); i++ {
		if runs[i].Token <= runs[i-1].Token {
			f.t.Errorf("fencing token went from %d (%s) to %d (%s)", runs[i-1].Token, runs[i-1].Holder, runs[i].Token, runs[i].Holder)
		}
	}
}

// dbNow reads the database's clock.
func (f *fleet) dbNow() time.Time {
	f.t.Helper()
	var now time.Time
	if err := f.pool.QueryRow(context.Background(), "SELECT now()").Scan(&now); err != nil {
		f.t.Fatal(err)
	}
	return now
}

// sleepUntil sleeps until the database's clock reads at (it runs on this
// machine's clock, give or take the round trip).
func (f *fleet) sleepUntil(at time.Time) {
	if d := at.Sub(f.dbNow()); d > 0 {
		time.Sleep(d)
	}
}

// Five schedulers on "@every 2s" for at least 100 scheduled times while
// they are SIGKILLed, SIGSTOPped, SIGTERMed and restarted at random and
// their database connections are cut: every time in the window is
// accounted for exactly once (run, missed or skipped; the claim, the
// history row and the children's own records agree), no time runs twice,
// and fencing tokens rise. Two of the five run a command longer than the
// period, so that times come due while a run holds the lease (skipped).
func TestScheduleExactlyOnceUnderFaults(t *testing.T) {
	t.Parallel()
	const (
		period = 2 * time.Second
		times  = 100
	)
	f := newFleet(t, 5, "@every 2s")
	f.members[0].child = "trap record:" + f.records + " sleep:2500ms"
	f.members[1].child = "trap record:" + f.records + " sleep:2500ms"
	for _, m := range f.members {
		f.start(m)
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	// The window starts once the job is known and all are up, and ends
	// before the faults stop; a quiet end lets the lease of a crashed run
	// expire and the next take close it.
	f.registered()
	from := f.dbNow().Truncate(period).Add(3 * period)
	to := from.Add((times - 1) * period)
	c := newChaos(f, rng, period)
	nextFault := time.Now()
	for f.dbNow().Before(to.Add(period)) {
		now := c.tick()
		if now.After(nextFault) {
			nextFault = now.Add(time.Duration(800+rng.IntN(1700)) * time.Millisecond)
			c.strikeAtRandom(time.Duration(300+rng.IntN(4000))*time.Millisecond,
				odds{faultKill, 30}, odds{faultStop, 20}, odds{faultTerm, 15}, odds{faultCut, 35})
		}
		time.Sleep(20 * time.Millisecond)
	}
	counts := c.end("schedule", times, to, func() map[string]int { return f.checkExactlyOnce(from, to, period) })
	if counts["exited"] == 0 {
		t.Errorf("no time ran to completion: %v", counts)
	}
}

// registered waits until the first scheduler to start has recorded the
// job's schedule, which a loaded machine may make take a while: a new job
// owes no time before that, so a window of times starts after it.
func (f *fleet) registered() {
	f.t.Helper()
	pgtest.Eventually(f.t, 60*time.Second, "the job's schedule recorded", func() bool {
		var n int
		err := f.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{f.table}.Sanitize()+
			" WHERE job_name = 'work' AND schedule IS NOT NULL").Scan(&n)
		return err == nil && n == 1
	})
}

// latestClaim reads the job's latest claimed time and its outcome.
func (f *fleet) latestClaim() (time.Time, string) {
	f.t.Helper()
	var (
		at      time.Time
		outcome string
	)
	err := f.pool.QueryRow(context.Background(), "SELECT scheduled_at, outcome FROM "+pgx.Identifier{f.table + "_schedule"}.Sanitize()+
		" WHERE job_name = 'work' ORDER BY scheduled_at DESC LIMIT 1").Scan(&at, &outcome)
	var pgErr *pgconn.PgError
	if err != nil && !errors.Is(err, pgx.ErrNoRows) && !(errors.As(err, &pgErr) && pgErr.Code == "42P01") {
		f.t.Fatal(err) // 42P01: no claims table yet
	}
	return at.UTC(), outcome
}

// waitRecorded waits until the history has a row for the time at: its
// run ended, or it was recorded missed or skipped.
func (f *fleet) waitRecorded(at time.Time, within time.Duration) {
	f.t.Helper()
	pgtest.Eventually(f.t, within, at.Format(time.TimeOnly)+" in the history", func() bool {
		var n int
		if err := f.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{f.table + "_history"}.Sanitize()+
			" WHERE job_name = 'work' AND scheduled_at = $1", at).Scan(&n); err != nil {
			f.t.Fatal(err)
		}
		return n > 0
	})
}

// waitClaim waits until a time at or after at is claimed.
func (f *fleet) waitClaim(at time.Time, within time.Duration) {
	f.t.Helper()
	pgtest.Eventually(f.t, within, at.Format(time.TimeOnly)+" accounted for", func() bool {
		latest, _ := f.latestClaim()
		return !latest.Before(at)
	})
}

// All three schedulers down for five scheduled times, then back: each
// catch-up policy runs exactly what it promises of the five, and records
// the others as missed. The restart lands between the grace that would
// make the fifth time on time (half the period, 4 s) and the sixth time:
// the period is 8 s so that a loaded machine, slow to start the three, has
// more than 3 s to do it in. A machine slower than that makes the sixth
// time due as well, which changes what "latest" runs: such a try proves
// nothing of the policy (every time still counted exactly once), and the
// scenario runs again on a fresh table.
func TestScheduleCatchUpAfterOutage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy       string
		runs, missed int
	}{{"none", 0, 5}, {"latest", 1, 4}, {"all", 5, 0}} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			const tries = 3
			for try := 1; !catchUpAfterOutage(t, tc.policy, tc.runs, tc.missed); try++ {
				if try == tries {
					t.Fatalf("in %d tries the fleet never came back before the time after the outage", tries)
				}
			}
		})
	}
}

// catchUpAfterOutage is one try of TestScheduleCatchUpAfterOutage; it
// reports false when the fleet came back too late for the try to judge
// the policy.
func catchUpAfterOutage(t *testing.T, policy string, wantRuns, wantMissed int) (judged bool) {
	const period = 8 * time.Second
	f := newFleet(t, 3, "@every 8s", "--catch-up", policy)
	for _, m := range f.members {
		f.start(m)
	}
	// Let a time run, then take them all down just after it.
	f.registered()
	last := f.dbNow().Truncate(period).Add(2 * period)
	f.waitClaim(last, 2*period+20*time.Second)
	if at, outcome := f.latestClaim(); !at.Equal(last) || outcome != "run" {
		t.Fatalf("latest claim %s %s, want %s run", at.Format(time.TimeOnly), outcome, last.Format(time.TimeOnly))
	}
	f.sleepUntil(last.Add(600 * time.Millisecond))
	for _, m := range f.members {
		_ = m.proc.Cmd.Process.Kill()
		m.proc.Wait(t, 10*time.Second)
	}
	if at, _ := f.latestClaim(); !at.Equal(last) {
		t.Fatalf("%s was accounted for before the outage", at.Format(time.TimeOnly))
	}
	outage := last.Add(5 * period)
	f.sleepUntil(outage.Add(period/2 + 600*time.Millisecond))
	for _, m := range f.members {
		f.start(m)
	}
	f.waitClaim(outage.Add(2*period), 2*period+30*time.Second)
	// A later time may be claimed (skipped) while a catch-up run
	// still goes: stop only once the outage's last time is in the
	// history, which is written when its run ends.
	f.waitRecorded(outage, 60*time.Second)
	f.stop()
	counts := f.checkExactlyOnce(last.Add(period), outage, period)
	if back := f.firstClaimedAfter(last); !back.Before(outage.Add(period)) {
		t.Logf("the fleet's first claim after the outage was at %s, not before the next time %s: trying again",
			back.Format(time.TimeOnly+".000"), outage.Add(period).Format(time.TimeOnly))
		return false
	}
	runs := 0
	for outcome, n := range counts {
		if runOutcome(outcome) {
			runs += n
		}
	}
	if runs != wantRuns || counts["missed"] != wantMissed || counts["exited"] != wantRuns {
		t.Errorf("catch-up %s: outcomes %v over the five times of the outage, want %d runs (exited) and %d missed",
			policy, counts, wantRuns, wantMissed)
	}
	ran := f.ranBy()
	if wantRuns == 1 && len(ran[outage.UTC()]) != 1 {
		t.Errorf("catch-up latest: the latest time of the outage ran %d times, want once", len(ran[outage.UTC()]))
	}
	return true
}

// firstClaimedAfter is when (by the database's clock) the first claim of a
// time after at was written.
func (f *fleet) firstClaimedAfter(at time.Time) time.Time {
	f.t.Helper()
	var first time.Time
	if err := f.pool.QueryRow(context.Background(), "SELECT min(claimed_at) FROM "+pgx.Identifier{f.table + "_schedule"}.Sanitize()+
		" WHERE job_name = 'work' AND scheduled_at > $1", at).Scan(&first); err != nil {
		f.t.Fatal(err)
	}
	return first
}

// --once from three simulated crontabs, each firing up to a third of the
// period late (20 s of a crontab's minute, scaled to "@every 3s"): every
// time is accounted for exactly once; each that a line fired for in time
// runs exactly once, by the first host to fire, and the others exit with
// the skip status. A machine too busy to fire any line in time makes the
// time missed, which is right: the test then says how late they were.
func TestScheduleOnceFromCrontabs(t *testing.T) {
	t.Parallel()
	const (
		period = 3 * time.Second
		times  = 10
	)
	f := newFleet(t, 3, "@every 3s", "--once")
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	t.Logf("seed %d", seed)
	type firing struct {
		at time.Time
		m  *scheduler
	}
	// A line before the window makes the job known: from then on, a time
	// no line ran is owed, and recorded missed.
	if code := f.start(f.members[0]).Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the first crontab line exited %d", code)
	}
	first := f.dbNow().Truncate(period).Add(2 * period)
	var firings []firing
	for k := range times {
		for _, m := range f.members {
			late := time.Duration(rng.Int64N(int64(period / 3)))
			firings = append(firings, firing{first.Add(time.Duration(k)*period + late), m})
		}
	}
	sort.Slice(firings, func(i, j int) bool { return firings[i].at.Before(firings[j].at) })
	var procs []*lwtest.Proc
	for _, fi := range firings {
		f.sleepUntil(fi.at)
		procs = append(procs, f.start(fi.m))
	}
	// The times a line found just due when it started: those must run.
	// A line that could not reach the database within its connect_timeout
	// (a busy machine) exits 69 before it saw any time, as under cron:
	// the time is then another line's, or missed.
	inTime := map[time.Time]bool{}
	unreachable := 0
	for _, p := range procs {
		code := p.Wait(t, 30*time.Second)
		started := false
		for _, e := range p.LogEntries(t) {
			if due, ok := e["due"].(string); ok && e["message"] == "scheduler started" {
				started = true
				if at, err := time.Parse(time.RFC3339Nano, due); err == nil {
					inTime[at.UTC()] = true
				}
			}
		}
		switch {
		case code == 69 && !started:
			unreachable++
		case code != 0:
			t.Errorf("a crontab's leasewrap exited %d, want 0 (ran, or skipped with --skip-exit-code 0), or 69 before it started", code)
		}
	}
	if unreachable > 0 {
		t.Logf("%d of %d lines could not reach the database in time (exit 69)", unreachable, len(procs))
	}
	last := first.Add((times - 1) * period)
	counts := f.checkExactlyOnce(first, last, period)
	accounts := f.accounts(first, last)
	for at := first.UTC(); !at.After(last); at = at.Add(period) {
		if a := accounts[at]; inTime[at] && (a == nil || a.claim != "run") {
			t.Errorf("%s: a line fired in time for it, but it was not run (%+v)", at.Format(time.TimeOnly), a)
		}
	}
	if len(inTime) < times/2 {
		t.Errorf("only %d of %d times had a line fire in time: the machine kept the simulated crontab from firing (outcomes %v)",
			len(inTime), times, counts)
	}
	t.Logf("%d of %d times had a line in time; outcomes %v", len(inTime), times, counts)
}

// Faults a chaos strikes a member with.
const (
	faultKill = "sigkill" // SIGKILL, started again later
	faultStop = "sigstop" // SIGSTOP, SIGCONT later
	faultTerm = "sigterm" // SIGTERM, started again once it exited
	faultCut  = "cut"     // its database connections cut, restored later
)

// chaos strikes a fleet's members with faults and heals them later: the
// actions due later, and which members are down meanwhile.
type chaos struct {
	f      *fleet
	rng    *rand.Rand
	period time.Duration
	queue  []pending
	down   map[int]bool
	// faults counts the faults struck, by kind (the scenario's line).
	faults map[string]int
}

// pending is an action a chaos runs once its time has come.
type pending struct {
	at     time.Time
	action func()
}

func newChaos(f *fleet, rng *rand.Rand, period time.Duration) *chaos {
	return &chaos{f: f, rng: rng, period: period, down: map[int]bool{}, faults: map[string]int{}}
}

// later runs action after d, at a tick.
func (c *chaos) later(d time.Duration, action func()) {
	c.queue = append(c.queue, pending{time.Now().Add(d), action})
}

// tick runs the actions whose time has come, starts again a member that
// exited by itself (a start while its database was cut), and returns now.
func (c *chaos) tick() time.Time {
	now := time.Now()
	kept := c.queue[:0]
	for _, p := range c.queue {
		if now.After(p.at) {
			p.action()
		} else {
			kept = append(kept, p)
		}
	}
	c.queue = kept
	for _, m := range c.f.members {
		if !c.down[m.index] && m.exited() {
			c.down[m.index] = true
			c.later(c.period/2, func() { c.f.start(m); c.down[m.index] = false })
		}
	}
	return now
}

// strike hits a member picked at random, unless it is down already, with
// the fault kind, and heals it after back.
func (c *chaos) strike(kind string, back time.Duration) {
	m := c.f.members[c.rng.IntN(len(c.f.members))]
	if c.down[m.index] {
		return
	}
	c.down[m.index] = true
	c.faults[kind]++
	up := func() { c.down[m.index] = false }
	switch kind {
	case faultKill:
		_ = m.proc.Cmd.Process.Kill()
		c.later(back, func() { c.f.start(m); up() })
	case faultStop:
		_ = m.proc.Cmd.Process.Signal(syscall.SIGSTOP)
		c.later(back, func() { _ = m.proc.Cmd.Process.Signal(syscall.SIGCONT); up() })
	case faultTerm:
		_ = m.proc.Cmd.Process.Signal(syscall.SIGTERM)
		c.later(back, func() {
			m.proc.Wait(c.f.t, 20*time.Second)
			c.f.start(m)
			up()
		})
	case faultCut:
		m.proxy.Cut()
		c.later(back, func() { m.proxy.Restore(); up() })
	}
}

// odds is a fault kind and its chance in percent.
type odds struct {
	kind    string
	percent int
}

// strikeAtRandom strikes a fault drawn by the odds (their percents add up
// to 100), healed after back.
func (c *chaos) strikeAtRandom(back time.Duration, kinds ...odds) {
	k := c.rng.IntN(100)
	for _, o := range kinds {
		if k < o.percent {
			c.strike(o.kind, back)
			return
		}
		k -= o.percent
	}
}

// end heals everything, lets a few clean times pass after to, stops the
// fleet, checks it with check and prints the scenario's line.
func (c *chaos) end(name string, times int, to time.Time, check func() map[string]int) map[string]int {
	c.heal()
	c.f.sleepUntil(to.Add(5 * ttl))
	c.f.stop()
	counts := check()
	line := fmt.Sprintf("scenario %-14s times=%d outcomes=%v faults=%v", name, times, counts, c.faults)
	c.f.t.Log(line)
	fmt.Println(line)
	return counts
}

// heal runs every pending action and starts again the members that
// exited.
func (c *chaos) heal() {
	for _, p := range c.queue {
		p.action()
	}
	c.queue = nil
	for _, m := range c.f.members {
		if m.exited() {
			c.f.start(m)
		}
	}
}
