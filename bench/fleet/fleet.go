package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/session"
	"github.com/redbite/leasewrap/lease"
)

// fleet is the simulated fleet: its participants, who holds each job, and
// what was measured.
type fleet struct {
	cfg     config
	timings lease.Timings
	admin   *pgxpool.Pool
	// stats reads the statistics from another database than the fleet's.
	stats  *pgxpool.Pool
	dbname string
	jobs   []*jobState

	// conns are the participants' live connections, for counting them.
	conns sync.Map // *session.Conn -> struct{}
	// counts are the statements the participants sent.
	counts counts

	measuring atomic.Bool
	mu        sync.Mutex
	handoffs  []*handoff
	renewals  []time.Duration

	violations, tokenRegressions, lost     atomic.Int64
	acquireErrors, failures, renewFailures atomic.Int64
	skipped                                atomic.Int64
}

// jobState is what the fleet knows of one job: the participant whose work
// runs now (nil between a holder stopping and the next acquiring), the last
// token handed out, and the handoff under way.
type jobState struct {
	name string

	mu       sync.Mutex
	holder   *participant
	holderID string
	token    int64
	pending  *handoff
}

// handoff is one change of hands: a graceful release or a crash, and the
// acquisition that followed it.
type handoff struct {
	crash bool
	at    time.Time // release called, or leader killed
	// expiry is, for a crash, the expiry the dead leader left in the row,
	// in microseconds of the database clock.
	expiry   int64
	taken    time.Time // zero until another participant acquired
	newToken int64
}

func newFleet(cfg config, admin, stats *pgxpool.Pool) *fleet {
	f := &fleet{cfg: cfg, timings: lease.DeriveTimings(lease.DefaultTTL), admin: admin, stats: stats,
		dbname: admin.Config().ConnConfig.Database}
	for i := range cfg.jobs {
		f.jobs = append(f.jobs, &jobState{name: fmt.Sprintf("fleet-%04d", i)})
	}
	return f
}

// acquired records that p holds job j under token, and checks that nobody
// else did and that the token rose.
func (f *fleet) acquired(j *jobState, p *participant, holderID string, token int64) {
	now := time.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.holder != nil {
		f.violations.Add(1)
		logf("VIOLATION: %s acquired by %s (token %d) while %s held it", j.name, holderID, token, j.holderID)
	}
	if token <= j.token {
		f.tokenRegressions.Add(1)
	}
	j.holder, j.holderID, j.token = p, holderID, token
	if h := j.pending; h != nil {
		h.taken, h.newToken = now, token
		j.pending = nil
	}
}

// left records that p's work on job j stopped, and starts a handoff when
// the leader was killed or released during the measurement.
func (f *fleet) left(j *jobState, p *participant, h *handoff) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.holder == p {
		j.holder = nil
	}
	if h != nil && f.measuring.Load() {
		j.pending = h
		f.mu.Lock()
		f.handoffs = append(f.handoffs, h)
		f.mu.Unlock()
	}
}

// holderOf returns who holds job j now.
func (j *jobState) holderOf() *participant {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.holder
}

// acquireFailed counts a failed connect or acquire: a fleet that cannot
// get its leaders should say why.
func (f *fleet) acquireFailed(err error) {
	countFailure(&f.acquireErrors, "failed connect or acquire", err)
}

// statementFailed counts a live participant's failed statement.
func (f *fleet) statementFailed(err error) { countFailure(&f.failures, "failed statement", err) }

// countFailure counts err in n and logs the first few as what: a count
// alone does not say what failed.
func countFailure(n *atomic.Int64, what string, err error) {
	if k := n.Add(1); k <= 3 {
		logf("%s %d: %v", what, k, err)
	}
}

// allHeld reports whether every job has a holder.
func (f *fleet) allHeld() bool { return f.leaderless() == 0 }

// leaderless counts the jobs that have no holder.
func (f *fleet) leaderless() int {
	n := 0
	for _, j := range f.jobs {
		if j.holderOf() == nil {
			n++
		}
	}
	return n
}

// start launches the participants at the start rate, the first of every
// job first, and waits until every job has a leader.
func (f *fleet) start(ctx context.Context, wg *sync.WaitGroup) error {
	tick := time.NewTicker(time.Second / time.Duration(f.cfg.startRate))
	defer tick.Stop()
	for slot := range f.cfg.perJob {
		for i, j := range f.jobs {
			p := &participant{f: f, job: j, slot: slot, id: slot*f.cfg.jobs + i, events: make(chan event, 1)}
			wg.Add(1)
			go func() { defer wg.Done(); p.run(ctx) }()
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	deadline := time.Now().Add(time.Minute)
	for !f.allHeld() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of %d jobs had no leader a minute after the last participant started (%d failed connects or acquires)",
				f.leaderless(), len(f.jobs), f.acquireErrors.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// releaseLead is how long before the end of the measurement the last
// release may come, for its handoff to be measured.
const releaseLead = 5 * time.Second

// schedule kills the leaders of a -kill fraction of the jobs and releases
// those of a -release fraction, at random times of the measurement (the
// kills early enough for the takeover to come inside it), each job at most
// once.
func (f *fleet) schedule(ctx context.Context, began time.Time) {
	type timed struct {
		at   time.Duration
		job  *jobState
		kind eventKind
	}
	perm := rand.Perm(len(f.jobs))
	kills := int(float64(len(f.jobs))*f.cfg.kill + 0.5)
	// Each fraction rounds on its own: together they may not exceed the jobs.
	releases := min(int(float64(len(f.jobs))*f.cfg.release+0.5), len(f.jobs)-kills)
	killBy := max(f.cfg.duration-f.timings.TTL-10*time.Second, f.cfg.duration/6)
	var plan []timed
	for n, i := range perm[:kills+releases] {
		if n < kills {
			plan = append(plan, timed{rand.N(killBy), f.jobs[i], eventKill})
		} else {
			plan = append(plan, timed{rand.N(f.cfg.duration - releaseLead), f.jobs[i], eventRelease})
		}
	}
	sort.Slice(plan, func(a, b int) bool { return plan[a].at < plan[b].at })
	for _, t := range plan {
		if !sleep(ctx, time.Until(began.Add(t.at))) {
			return
		}
		f.fire(t.job, t.kind)
	}
}

// fire tells the current leader of j to crash or to release.
func (f *fleet) fire(j *jobState, kind eventKind) {
	j.mu.Lock()
	p, token := j.holder, j.token
	j.mu.Unlock()
	if p == nil {
		f.skipped.Add(1)
		return
	}
	select {
	case p.events <- event{kind, token}:
	default:
		f.skipped.Add(1)
	}
}

// renewed records one renewal's duration during the measurement.
func (f *fleet) renewed(took time.Duration, err error) {
	if !f.measuring.Load() {
		return
	}
	if err != nil {
		f.renewFailures.Add(1)
	}
	f.mu.Lock()
	f.renewals = append(f.renewals, took)
	f.mu.Unlock()
}

// poolConns counts the connections the participants hold.
func (f *fleet) poolConns() int {
	n := 0
	f.conns.Range(func(k, _ any) bool {
		if k.(*session.Conn).Connected() {
			n++
		}
		return true
	})
	return n
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
