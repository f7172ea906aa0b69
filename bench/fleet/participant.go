package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/redbite/leasewrap/internal/session"
	"github.com/redbite/leasewrap/lease"
)

// eventKind is what the schedule does to a leader.
type eventKind int

const (
	eventKill eventKind = iota
	eventRelease
)

// event is sent to the leader that held a job under token; a participant
// that no longer holds that lease ignores it.
type event struct {
	kind  eventKind
	token int64
}

// participant is one wrapper: it stands by for its job, leads when it gets
// the lease, and after a crash or a release comes back as a new process
// would, with a new connection and holder id.
type participant struct {
	f      *fleet
	job    *jobState
	slot   int
	id     int
	events chan event
}

// restartDelay is how long a crashed or released wrapper takes to come
// back, as a service manager's restart delay would: 1-5 s.
func restartDelay() time.Duration { return time.Second + rand.N(4*time.Second) }

// run lives one incarnation after the other until ctx ends.
func (p *participant) run(ctx context.Context) {
	for inc := 0; ; inc++ {
		if !sleep(ctx, p.incarnation(ctx, inc)) {
			return
		}
	}
}

// incarnation is one wrapper process's life: connect, stand by, lead until
// killed, released, lost or stopped. It returns how long until the next.
// Its statements are counted in the fleet's counts (see tracer).
func (p *participant) incarnation(ctx context.Context, inc int) time.Duration {
	f := p.f
	t := &tracer{counts: &f.counts}
	t.standing.Store(true)
	conn, err := connect(f.cfg.url, t)
	if err != nil {
		f.acquireFailed(err)
		return f.timings.RetryInterval
	}
	f.conns.Store(conn, struct{}{})
	defer f.conns.Delete(conn)
	obs := &observer{f: f}
	holder := fmt.Sprintf("fleet-%d-%d", p.id, inc)
	store, err := lease.New(conn, lease.WithTable(f.cfg.table), lease.WithHolder(holder),
		lease.WithTimings(f.timings), lease.WithListen(f.cfg.listen), lease.WithObserver(obs))
	if err != nil {
		panic(err) // the options are fixed: a programming error
	}
	l, err := store.Acquire(ctx, p.job.name)
	if err != nil {
		conn.Close()
		if ctx.Err() == nil {
			f.acquireFailed(err)
		}
		return f.timings.RetryInterval
	}
	t.standing.Store(false)
	f.acquired(p.job, p, holder, l.Token())
	return p.lead(ctx, conn, l, obs)
}

// lead holds l until the schedule kills or releases this leader, the lease
// is lost, or the fleet stops.
func (p *participant) lead(ctx context.Context, conn *session.Conn, l *lease.Lease, obs *observer) time.Duration {
	f := p.f
	for {
		select {
		case <-l.Done():
			f.lost.Add(1)
			f.left(p.job, p, nil)
			_ = l.Release(context.WithoutCancel(ctx), nil)
			conn.Close()
			return restartDelay()
		case <-ctx.Done():
			f.left(p.job, p, nil)
			code := 0
			_ = l.Release(context.WithoutCancel(ctx), &code)
			conn.Close()
			return 0
		case ev := <-p.events:
			if ev.token != l.Token() {
				continue
			}
			if ev.kind == eventKill {
				p.crash(conn, l, obs)
			} else {
				p.release(ctx, conn, l)
			}
			return restartDelay()
		}
	}
}

// crash is a leader's process dying: its work stops, its connection closes
// without a release, and the lease is left to expire. Its keeper goes on
// failing against the closed connection until it gives up, without
// touching the database, as the dead process would not.
func (p *participant) crash(conn *session.Conn, l *lease.Lease, obs *observer) {
	h := &handoff{crash: true, at: time.Now()}
	p.f.left(p.job, p, h)
	obs.dead.Store(true)
	conn.Close()
	p.f.expiryOf(p.job, l.Token(), h)
}

// release is a leader handing its lease back at the end of its work.
func (p *participant) release(ctx context.Context, conn *session.Conn, l *lease.Lease) {
	p.f.left(p.job, p, &handoff{at: time.Now()})
	code := 0
	if err := l.Release(ctx, &code); err != nil {
		p.f.statementFailed(fmt.Errorf("release: %w", err))
	}
	conn.Close()
}

// expiryOf reads the expiry a crashed leader left in its row.
func (f *fleet) expiryOf(j *jobState, token int64, h *handoff) {
	var expiry, rowToken int64
	err := f.admin.QueryRow(context.Background(),
		`SELECT (extract(epoch FROM expires_at) * 1e6)::bigint, fencing_token FROM `+f.tableSQL()+` WHERE job_name = $1`,
		j.name).Scan(&expiry, &rowToken)
	j.mu.Lock()
	defer j.mu.Unlock()
	if err == nil && rowToken == token {
		h.expiry = expiry
	}
}

// observer counts a live participant's statement failures and renewals;
// a crashed one's keeper is not heard.
type observer struct {
	f    *fleet
	dead atomic.Bool
}

func (o *observer) Contacted() {}
func (o *observer) Reached()   {}

func (o *observer) Failed(err error) {
	if !o.dead.Load() && o.f.measuring.Load() {
		o.f.statementFailed(err)
	}
}

func (o *observer) Renewed(took time.Duration, err error) {
	if !o.dead.Load() {
		o.f.renewed(took, err)
	}
}

func (o *observer) Lost(error) {}
