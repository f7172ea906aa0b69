package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/internal/session"
)

// How the queue works (queue_sql.go has its statements):
//
//   - A standby enters its job's queue when it starts waiting, and
//     leaves it when it gives up or exits. A job of several slots has
//     one queue, on its first row, for all of them.
//   - A release that frees the lease (or a slot) hands it, in the same statement, to
//     the first live entry (pinned first, then by priority, then first
//     come), with a new token and a short first expiry (FirstExpiry), and
//     announces it on the job's channel (handoffNotice), where the head
//     of the queue listens; a standby that did not listen yet finds the
//     lease handed to it at its next look.
//   - That standby renews the lease and starts its run in one statement
//     (adoptSQL) before its command starts; one that never does loses
//     the lease at the first expiry, and the next take records the run
//     could_not_start.
//   - A lease (or slot) that expires unreleased (its holder died) is
//     taken by the head of the queue: the others look and see someone
//     ahead of them.

// handoffTag starts a handoff's notification (handoffPayload).
const handoffTag = "handoff"

// handoffNotice is a handoff's notification, parsed.
type handoffNotice struct {
	// holder is who the lease was handed to; next the id of the queue
	// entry after it ("": none).
	holder, next string
	// first is how long the holder has to adopt the lease.
	first time.Duration
	job   string
}

// parseHandoff reads payload as a handoff's notification; ok is false for
// any other payload.
func parseHandoff(payload string) (n handoffNotice, ok bool) {
	parts := strings.SplitN(payload, "\n", 5)
	if len(parts) != 5 || parts[0] != handoffTag {
		return n, false
	}
	us, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil {
		return n, false
	}
	return handoffNotice{holder: parts[1], next: parts[2], first: time.Duration(us) * time.Microsecond, job: parts[4]}, true
}

// FirstExpiry is how long a standby a lease was handed to has to adopt it
// (hear the handoff, and renew): one retry interval, which a listening
// standby, told at once, needs only for its statement; at least a second,
// for a loaded machine. A polling standby gets its own polling interval
// more (handoffSet), the time it takes to look. A standby that froze
// costs the job this long, a retry interval beyond a handoff at the
// default timings (one that died is passed over at no cost).
func FirstExpiry(t Timings) time.Duration { return max(t.RetryInterval, time.Second) }

// pollBehind is how many retry intervals a standby behind the head of
// the queue waits between looks (a polling head looks every one, since a
// handoff may come to it, and so does the next in line of a queue whose
// head listens: see standbyWait): it only has to notice that it moved up
// or that the lease expired unreleased, and a release gives a polling
// standby its own looks' interval more to adopt the lease (its entry's
// every).
const pollBehind = 4

// queueEntry is a standby's entry in its job's queue.
type queueEntry struct {
	sb *standby
	// id is the entry's own: two instances may share a holder id.
	id string
	// in is set once it entered, until it adopted the lease; on is the
	// subscription it entered listening under (nil: it entered polling):
	// the backend that listens keeps the entry alive, and a new
	// subscription may listen on another.
	in bool
	on *session.Subscription
	// turnLeft is, after a look that found the lease free with live
	// entries ahead, when the first of their turns ends; else 0.
	turnLeft time.Duration
}

func newEntryID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// PollingEntryLife is how long a polling standby's entry counts after it
// said it looks: four TTLs, refreshed when half of it is gone. A refresh
// is a write, and a fleet behind PgBouncer has thousands of polling
// standbys; one that died meanwhile costs at most its turn, once, when it
// comes to the head of the queue: a handoff's (FirstExpiry and its
// polling interval), or after a crash a retry interval (queueLookSQL).
func PollingEntryLife(ttl time.Duration) time.Duration { return 4 * ttl }

func (s *Store) entryLife() time.Duration { return PollingEntryLife(s.cfg.TTL) }

// enter puts the standby in the queue, or refreshes its entry, on the
// standby's own connection (a listening one's backend is what keeps its
// entry alive). A failure is logged and left: the standby still takes the
// lease when it is free, as before queues.
func (q *queueEntry) enter(ctx context.Context) { q.enterAs(ctx, q.sb.listening()) }

// enterAs is enter as a listening standby's entry, alive while the
// standby's connection is, or (listening false) as a polling one's, which
// a standby that is about to stop listening enters before it does: its
// entry must not lapse with the connection meanwhile. It reports whether
// the statement ran.
func (q *queueEntry) enterAs(ctx context.Context, listening bool) bool {
	s := q.sb.store
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TTL-s.cfg.StopBefore())
	defer cancel()
	args := pgx.StrictNamedArgs{"job": q.sb.job, "holder": s.cfg.holder, "id": q.id,
		"priority": s.cfg.priority, "listening": listening, "live": s.entryLife().Microseconds(),
		"every": (pollBehind * s.cfg.RetryInterval).Microseconds()}
	var tag pgconn.CommandTag
	err := s.hot(s.sql.enterCall, s.sql.enterQueue, func(query string) (err error) {
		tag, err = q.sb.db().Exec(ctx, query, args)
		return err
	})
	if err != nil {
		s.log.Debug().Err(pgerr.Classify(err)).Str("job", q.sb.job).Msg("cannot enter the queue; standing by without it")
		return false
	}
	// An entry refused (the lease was just handed to this holder id) is
	// still left at the end: leaving frees a lease handed and not adopted.
	q.in, q.on = q.in || tag.RowsAffected() > 0, nil
	if listening {
		q.on = q.sb.sub
	}
	return true
}

// leave takes the standby's entry out of the queue, if it entered, and
// frees a lease handed to it meanwhile (see leaveQueueSQL).
func (q *queueEntry) leave(ctx context.Context) {
	if q == nil || !q.in {
		return
	}
	s := q.sb.store
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	if _, err := s.db.Exec(ctx, s.sql.leaveQueue, pgx.StrictNamedArgs{"job": q.sb.job, "slots": s.cfg.slots, "id": q.id,
		"holder": s.cfg.holder, "job_channel": jobChannel(s.channel, q.sb.job)}); err != nil {
		s.log.Debug().Err(pgerr.Classify(err)).Str("job", q.sb.job).Msg("cannot leave the queue; the entry lapses by itself")
	}
	q.in = false
}

// place is a queued standby's look (see queueLookSQL).
type place struct {
	holderRow
	Ahead                int64
	TurnLeftMicros       *int64
	UntilMicros          *int64
	Queued, Handed, Full bool
	Slot                 *int
	SlotHolder           *string
	SlotToken            *int64
	SlotExpiresAt        *time.Time
}

// look reads the lease and the standby's place in the queue, and enters
// it again when the entry is gone (an operator emptied the queue, or the
// row was made anew), is a listening one's and the standby polls now (or
// the other way round), or is a polling one's that would soon stop
// counting. It returns a *HeldError, as Store.look does, while the lease
// is live (for a job of several slots, every slot: naming the one that
// expires first); ahead, how many live entries come before this
// standby's while it is free; handed, that the lease or a slot was handed
// to this standby and is waiting to be adopted. A standby that listens again on a new
// connection enters again too: its entry named the old backend.
func (q *queueEntry) look(ctx context.Context) (handed bool, ahead int, err error) {
	s := q.sb.store
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TTL-s.cfg.StopBefore())
	defer cancel()
	q.turnLeft = 0
	call, query, args := s.sql.lookCall, s.sql.queueLook, pgx.StrictNamedArgs{"job": q.sb.job, "holder": s.cfg.holder, "id": q.id,
		"first": FirstExpiry(s.cfg.Timings).Microseconds(), "retry": s.cfg.RetryInterval.Microseconds()}
	if s.cfg.slots > 1 {
		call, query, args["slots"] = "", s.sql.queueLookSlots, s.cfg.slots
	}
	var p place
	err = s.hot(call, query, func(query string) (err error) {
		p, err = queryOne[place](ctx, q.sb.db(), query, args)
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		s.cfg.observer.Contacted()
		return false, 0, nil
	case err != nil:
		err = fmt.Errorf("cannot read holder of lease %q: %w", q.sb.job, pgerr.Classify(err))
		s.cfg.observer.Failed(err)
		return false, 0, err
	}
	s.cfg.observer.Contacted()
	if p.Handed && !p.Queued {
		return true, 0, nil
	}
	lapsing := p.UntilMicros != nil && time.Duration(*p.UntilMicros)*time.Microsecond < s.entryLife()/2
	if !p.Queued || q.on != q.sb.sub || lapsing {
		q.enter(ctx)
	}
	h := p.held(q.sb.job)
	switch {
	case h.Paused != nil || p.Full && s.cfg.slots == 1:
		return false, int(p.Ahead), h
	case p.Full:
		return false, int(p.Ahead), &HeldError{Job: q.sb.job, Holder: deref(p.SlotHolder), Token: *p.SlotToken, State: StateHeld,
			Slot: *p.Slot, Slots: s.cfg.slots, ExpiresIn: p.SlotExpiresAt.Sub(p.Now)}
	case p.TurnLeftMicros != nil:
		q.turnLeft = max(time.Duration(*p.TurnLeftMicros)*time.Microsecond, 0)
	}
	return false, int(p.Ahead), nil
}

// adopt takes a lease (or slot) handed to this standby: it renews it and
// starts the run in one statement. It returns nil, nil when nothing was
// handed to it.
func (q *queueEntry) adopt(ctx context.Context) (*Lease, error) {
	s := q.sb.store
	budget := s.cfg.TTL - s.cfg.StopBefore()
	t0 := s.cfg.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	db, done, err := s.replicated(ctx, q.sb.db(), q.sb.job)
	defer done()
	if err != nil {
		return nil, err
	}
	a, err := queryOne[struct {
		Token int64
		Slot  int
	}](ctx, db, s.sql.adopt, pgx.StrictNamedArgs{"job": q.sb.job, "slots": s.cfg.slots, "holder": s.cfg.holder,
		"id": q.id, "ttl": s.cfg.TTL.Microseconds()})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		err = fmt.Errorf("cannot take the lease %q handed to this instance: %w", q.sb.job, pgerr.Classify(err))
		s.cfg.observer.Failed(err)
		return nil, err
	}
	s.cfg.observer.Contacted()
	// The handoff took the entry out, or left it marked (a slot's) for
	// the next rewrite of the queue to drop.
	q.in = false
	if err := s.tooLate(ctx, q.sb.job, a.Slot, a.Token, time.Time{}, End{}, t0, budget); err != nil {
		return nil, err
	}
	return s.confirmed(ctx, db, newSlotLease(s, q.sb.job, a.Slot, a.Token, t0+s.cfg.TTL))
}

// Standby is a live entry of a job's queue, as the views show it.
type Standby struct {
	Holder   string
	Priority int
	// Pinned: release --to chose it as the next holder.
	Pinned bool
	// Listening: it hears releases at once; otherwise it polls.
	Listening bool
	// Since is when it entered the queue, on the database clock.
	Since time.Time
}

// ParseQueue reads what QueueSQL answers: the queue, in order.
func ParseQueue(data []byte) ([]Standby, error) {
	var entries []struct {
		Holder            string
		Priority          int
		Pinned, Listening bool
		Since             int64
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("cannot read the queue: %w", err)
	}
	out := make([]Standby, len(entries))
	for i, e := range entries {
		out[i] = Standby{Holder: e.Holder, Priority: e.Priority, Pinned: e.Pinned, Listening: e.Listening, Since: time.UnixMicro(e.Since)}
	}
	return out, nil
}

// Pin makes holder the next to be handed job's lease (release --to): its
// entry goes ahead of every other in the queue. It returns the queue's
// live holders, in order; pinned is false (and nothing changed) when
// holder is not among them.
func (s *Store) Pin(ctx context.Context, job, holder string) (holders []string, pinned bool, err error) {
	if err := s.ensureSchema(ctx); err != nil {
		return nil, false, err
	}
	var r struct {
		Holders []string
		Pinned  bool
	}
	err = queryRow(ctx, s.db, s.sql.pin, pgx.StrictNamedArgs{"row": job, "to": holder}, into(&r))
	if err != nil {
		return nil, false, fmt.Errorf("cannot read the queue of %q: %w", job, pgerr.Classify(err))
	}
	return r.Holders, r.Pinned, nil
}
