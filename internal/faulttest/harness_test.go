package faulttest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/stall"
	"github.com/redbite/leasewrap/internal/tcpproxy"
	"github.com/redbite/leasewrap/internal/testchild"
)

var binary string

func TestMain(m *testing.M) { lwtest.Main(m, &binary) }

// The timings every scenario runs with: short, so that a trial takes seconds.
const (
	ttl   = 3 * time.Second
	renew = 500 * time.Millisecond
	grace = time.Second
	retry = 200 * time.Millisecond
	// slack is the failover bounds' allowance for round trips through the
	// proxies and the database, whose processes' waits for a core are not
	// measured; the test's and the wrappers' are (stall.Window) and are
	// added on top. It never enters an overlap check.
	slack = 1500 * time.Millisecond
)

// trials is how many faults each scenario injects.
func trials(t *testing.T) int {
	if s := os.Getenv("LEASEWRAP_FAULT_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LEASEWRAP_FAULT_TRIALS=%q: want a positive number", s)
		}
		return n
	}
	return 3
}

// member is one of the wrappers, with its own proxy to the database.
type member struct {
	index int
	id    string
	proxy *tcpproxy.Proxy
	proc  *lwtest.Proc
}

// cluster is N wrappers standing by for one job, and the history their
// children write.
type cluster struct {
	t       *testing.T
	dbAddr  string // host:port the proxies forward to
	dbUser  string
	dbName  string
	table   string
	history string
	members []*member
	starts  int
	// slots is the job's --slots: at most that many children at once.
	slots int

	mu   sync.Mutex
	dead map[int]int64 // child pid -> CLOCK_MONOTONIC ns when first seen gone

	// procs is every wrapper started, by holder id, for their logs.
	procs map[string]*lwtest.Proc
	// restart, when set, starts again a wrapper that lost its lease while
	// the test waits for a child (see replaceLost); faulted is the member
	// a trial's fault is meant for, whose exit the trial checks itself.
	restart func(*member)
	faulted *member
}

// newCluster starts n wrappers with --wait on a fresh table of the database
// at addr (user, database name), each through its own proxy.
func newCluster(t *testing.T, addr, user, dbName, table string, n int) *cluster {
	return newSlotsCluster(t, addr, user, dbName, table, n, 1)
}

// newSlotsCluster is newCluster for a job with --slots slots.
func newSlotsCluster(t *testing.T, addr, user, dbName, table string, n, slots int) *cluster {
	c := &cluster{t: t, dbAddr: addr, dbUser: user, dbName: dbName, table: table,
		history: filepath.Join(t.TempDir(), "history"), dead: map[int]int64{}, slots: slots}
	c.restart = c.start
	for i := range n {
		m := &member{index: i, proxy: tcpproxy.Start(t, addr)}
		c.members = append(c.members, m)
		c.start(m)
	}
	for _, m := range c.members {
		c.waitReady(m, c.start)
	}
	return c
}

// start (re)starts m's wrapper under a new holder id.
func (c *cluster) start(m *member) {
	c.starts++
	m.id = fmt.Sprintf("m%d-%d", m.index, c.starts)
	args := []string{"--database-url", dbURL(c.dbUser, m.proxy.Addr(), c.dbName), "--table", c.table, "--job", "work", "--id", m.id, "--wait", "--log-format", "json",
		"--ttl", ttl.String(), "--renew-interval", renew.String(), "--grace", grace.String(), "--retry-interval", retry.String()}
	if c.slots > 1 {
		args = append(args, "--slots", strconv.Itoa(c.slots))
	}
	m.proc = lwtest.Start(c.t, binary, []string{lwtest.Child("trap record:" + c.history + " block")},
		append(args, "--", lwtest.Self())...)
	c.register(m)
}

// dbURL is a wrapper's connection string to database dbName as user
// through addr (a proxy's, or the server's own): a connect that takes
// over a second fails, as one to a busy server would.
func dbURL(user, addr, dbName string) string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&connect_timeout=1", user, addr, dbName)
}

// register keeps m's wrapper under its holder id, for checkDeadlines.
func (c *cluster) register(m *member) {
	if c.procs == nil {
		c.procs = map[string]*lwtest.Proc{}
	}
	c.procs[m.id] = m.proc
}

// runs reads the history, watching each new child so that a killed one's
// death time is known.
func (c *cluster) runs() []lwtest.Interval {
	runs := lwtest.ReadHistory(c.t, c.history)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range runs {
		if _, watched := c.dead[r.Pid]; !watched {
			c.dead[r.Pid] = 0
			go c.watch(r.Pid)
		}
	}
	return runs
}

// watch records when pid is first seen gone, polling every few ms: an upper
// bound of its death time for a child killed before it could write "end".
func (c *cluster) watch(pid int) {
	for !lwtest.ProcessGone(pid) {
		time.Sleep(2 * time.Millisecond)
	}
	c.mu.Lock()
	c.dead[pid] = testchild.Monotonic()
	c.mu.Unlock()
}

// window opens a stall window over this process, every wrapper and the
// processes pids: a bound on a takeover stretches by what the slowest of
// them waited for a core, since any wrapper may be the one to take.
func (c *cluster) window(pids ...int) *stall.Window {
	for _, m := range c.members {
		pids = append(pids, m.proc.Cmd.Process.Pid)
	}
	return stall.Open(pids...)
}

// end is when run ended: its own record, else when it was seen gone, else 0.
func (c *cluster) end(r lwtest.Interval) int64 {
	if r.End != 0 {
		return r.End
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead[r.Pid]
}

// waitRun waits until the history has more than n runs and returns run n.
func (c *cluster) waitRun(n int, within time.Duration) lwtest.Interval {
	c.t.Helper()
	window := c.window()
	for {
		if runs := c.runs(); len(runs) > n {
			return runs[n]
		}
		c.replaceLost()
		if !window.Within(within) {
			c.t.Fatalf("no child started within %s (+%s stalled; run %d)", within, window.Stalled(), n+1)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// replaceLost starts again every wrapper but the faulted one that exited
// 75: on a starved machine a leader may miss its renewals and lose its
// lease with no fault injected, legitimately (check judges how), and a
// cluster left without wrappers would run no child at all.
func (c *cluster) replaceLost() {
	c.t.Helper()
	if c.restart == nil {
		return
	}
	for _, m := range c.members {
		select {
		case <-m.proc.Exited:
		default:
			continue
		}
		if m == c.faulted {
			continue
		}
		if m.proc.Code() != 75 {
			c.t.Fatalf("wrapper %s exited %d with no fault injected", m.id, m.proc.Code())
		}
		c.t.Logf("wrapper %s lost its lease with no fault injected (exit 75); starting it again", m.id)
		c.restart(m)
	}
}

// waitEnd waits until run has ended and returns when.
func (c *cluster) waitEnd(r lwtest.Interval, within time.Duration) int64 {
	c.t.Helper()
	window := c.window(r.Pid)
	for {
		if end := c.end(c.find(r.Pid)); end != 0 {
			return end
		}
		if !window.Within(within) {
			c.t.Fatalf("child of %s (pid %d) still runs after %s (+%s stalled)", r.Holder, r.Pid, within, window.Stalled())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// find returns the latest record of the child with pid.
func (c *cluster) find(pid int) lwtest.Interval {
	c.t.Helper()
	for _, r := range c.runs() {
		if r.Pid == pid {
			return r
		}
	}
	c.t.Fatalf("no child with pid %d in the history", pid)
	return lwtest.Interval{}
}

// holderOf returns the member whose wrapper runs r.
func (c *cluster) holderOf(r lwtest.Interval) *member {
	c.t.Helper()
	for _, m := range c.members {
		if m.id == r.Holder {
			return m
		}
	}
	c.t.Fatalf("no member holds %q", r.Holder)
	return nil
}

// acquiredAt is when the wrapper whose child r is logged that it took the
// lease (the machine's wall clock, as time.Now reads it).
func (c *cluster) acquiredAt(r lwtest.Interval) time.Time {
	c.t.Helper()
	s, _ := c.holderOf(r).proc.WaitLog(c.t, "acquired")["time"].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		c.t.Fatalf("%s's acquired log line has no time: %v", r.Holder, err)
	}
	return at
}

// expectExit waits for m's wrapper to exit with want, then starts it again.
func (c *cluster) expectExit(m *member, want int) {
	c.t.Helper()
	if got := m.proc.Wait(c.t, 15*time.Second); got != want {
		c.t.Errorf("wrapper %s exited %d, want %d", m.id, got, want)
	}
	c.start(m)
	c.waitReady(m, c.start)
}

// waitReady waits until m's wrapper has been in touch with the database.
// A --wait whose very first attempt cannot reach the database (on a busy
// machine it can time out, connect_timeout=1) stands by for it and is
// ready once it got through; one whose first attempt fails otherwise
// exits 69, and faults are meant for wrappers that are up: such a wrapper
// is started again with start (each kind of cluster starts its wrappers
// its own way).
func (c *cluster) waitReady(m *member, start func(*member)) {
	c.t.Helper()
	window := c.window()
	for !c.ready(m) {
		select {
		case <-m.proc.Exited:
			if c.ready(m) {
				return
			}
			if m.proc.Code() != 69 {
				c.t.Fatalf("wrapper %s exited %d before it stood by or acquired", m.id, m.proc.Code())
			}
			c.t.Logf("wrapper %s could not reach the database at its start (exit 69); starting it again", m.id)
			start(m)
		default:
		}
		if !window.Within(15 * time.Second) {
			c.t.Fatalf("wrapper %s neither stood by nor acquired within 15s (+%s stalled)", m.id, window.Stalled())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ready reports whether m's wrapper logged that it stood by or acquired.
func (c *cluster) ready(m *member) bool {
	for _, e := range m.proc.LogEntries(c.t) {
		if e["message"] == "standing by: lease held by another instance" || e["message"] == "acquired" {
			return true
		}
	}
	return false
}

// stop ends every wrapper and waits until every child is gone.
func (c *cluster) stop() {
	c.t.Helper()
	for _, m := range c.members {
		_ = m.proc.Cmd.Process.Signal(os.Interrupt)
	}
	for _, m := range c.members {
		m.proc.Wait(c.t, 15*time.Second)
	}
	for _, r := range c.runs() {
		c.waitEnd(r, 5*time.Second)
	}
}

// report is what a scenario measured.
type report struct {
	trials    int
	failovers []time.Duration
	overlaps  []time.Duration
}

// check verifies the whole history: fencing tokens rise strictly in start
// order, every child ended, and no two children overlap unless allowOverlap
// (the frozen-wrapper scenario, where overlaps are measured instead). It
// prints the scenario's summary line.
func (c *cluster) check(name string, rep *report, allowOverlap bool) {
	c.t.Helper()
	runs := c.runs()
	sort.Slice(runs, func(i, j int) bool { return runs[i].Start < runs[j].Start })
	ordered := runs // one slot: each run must end before the next starts
	if c.slots > 1 {
		c.checkSlots(runs, rep)
		ordered = nil
	}
	for i := 1; i < len(ordered); i++ {
		prev, cur := ordered[i-1], ordered[i]
		if cur.Token <= prev.Token {
			c.t.Errorf("fencing token went from %d (%s) to %d (%s)", prev.Token, prev.Holder, cur.Token, cur.Holder)
		}
		end := c.end(prev)
		if end == 0 {
			c.t.Errorf("child of %s (pid %d) never ended", prev.Holder, prev.Pid)
			continue
		}
		if end > cur.Start {
			overlap := time.Duration(end - cur.Start)
			rep.overlaps = append(rep.overlaps, overlap)
			if !allowOverlap {
				c.t.Errorf("children of %s and %s overlapped by %s", prev.Holder, cur.Holder, overlap)
			}
		}
	}
	if !allowOverlap {
		c.checkDeadlines(runs)
	}
	var total time.Duration
	for _, o := range rep.overlaps {
		total += o
	}
	worst, median := spread(rep.failovers)
	line := fmt.Sprintf("scenario %-14s trials=%d runs=%d overlaps=%d (%s total) failover worst=%s median=%s",
		name, rep.trials, len(runs), len(rep.overlaps), total.Round(time.Millisecond), worst, median)
	c.t.Log(line)
	fmt.Println(line)
	if os.Getenv("LEASEWRAP_FAULT_TIMELINE") != "" {
		c.printTimeline()
	}
}

// printTimeline prints leasewrap history --timeline of the scenario's job.
func (c *cluster) printTimeline() {
	url := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", c.dbUser, c.dbAddr, c.dbName)
	p := lwtest.Start(c.t, binary, nil, "history", "--database-url", url, "--table", c.table, "--timeline", "--width", "60")
	for line := range p.Lines {
		fmt.Println(line)
	}
	p.Wait(c.t, 10*time.Second)
}

// checkDeadlines verifies that every child whose wrapper lost its lease
// ended before the lease's deadline by that wrapper's own clock: the
// "lease lost" line's time plus the "remaining" it logged. Children killed
// before they could record their end are not judged: only when the test
// saw them gone is known, and that is late by as much as the test was. The
// children's CLOCK_MONOTONIC is put on the wall clock the log lines use by
// reading both now; the two do not drift apart within a scenario.
func (c *cluster) checkDeadlines(runs []lwtest.Interval) {
	c.t.Helper()
	wallOfMonotonic := time.Now().Add(-time.Duration(testchild.Monotonic()))
	for _, r := range runs {
		p := c.procs[r.Holder]
		if p == nil || r.End == 0 {
			continue
		}
		for _, e := range p.LogEntries(c.t) {
			if e["message"] != "lease lost" {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["time"]))
			remaining, err2 := time.ParseDuration(fmt.Sprint(e["remaining"]))
			if err != nil || err2 != nil {
				c.t.Errorf("%s's \"lease lost\" line has no time or remaining: %v", r.Holder, e)
				continue
			}
			deadline := at.Add(remaining)
			if ended := wallOfMonotonic.Add(time.Duration(r.End)); !ended.Before(deadline) {
				c.t.Errorf("child of %s ended %s after its wrapper's lease deadline", r.Holder, ended.Sub(deadline))
			}
		}
	}
}

// checkSlots verifies a history of a job with several slots: fencing
// tokens never repeat, every child ended, and at no instant more than
// c.slots children ran. Each start beyond the limit counts as an overlap.
func (c *cluster) checkSlots(runs []lwtest.Interval, rep *report) {
	c.t.Helper()
	tokens := map[int64]string{}
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, r := range runs {
		if other, dup := tokens[r.Token]; dup {
			c.t.Errorf("fencing token %d was handed to %s and %s", r.Token, other, r.Holder)
		}
		tokens[r.Token] = r.Holder
		end := c.end(r)
		if end == 0 {
			c.t.Errorf("child of %s (pid %d) never ended", r.Holder, r.Pid)
			continue
		}
		edges = append(edges, edge{r.Start, 1}, edge{end, -1})
	}
	// Ends before starts at the same instant: a handoff is not an overlap.
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].at < edges[j].at || edges[i].at == edges[j].at && edges[i].delta < edges[j].delta
	})
	running, most := 0, 0
	for i, e := range edges {
		running += e.delta
		most = max(most, running)
		if running > c.slots && e.delta > 0 {
			over := time.Duration(edges[min(i+1, len(edges)-1)].at - e.at)
			rep.overlaps = append(rep.overlaps, over)
			c.t.Errorf("%d children ran at once, more than %d slots, for %s", running, c.slots, over)
		}
	}
	c.t.Logf("at most %d of %d slots ran at once", most, c.slots)
}

// spread returns the worst and the median of ds.
func spread(ds []time.Duration) (worst, median time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)-1].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond)
}

// sharedDB returns the shared test database's address, user and name, and
// a fresh table on it.
func sharedDB(t *testing.T) (addr, user, name, table string) {
	pool := pgtest.Pool(t)
	cfg := pool.Config().ConnConfig
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port), cfg.User, cfg.Database, pgtest.Table(t, pool)
}

func since(ns int64) time.Duration { return time.Duration(testchild.Monotonic() - ns) }
