package lease

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redbite/leasewrap/internal/session"
)

// stopTag starts an operator's request that a holder stop (stopPayload).
const stopTag = "stop"

// stopPayload is the notification of an operator's release on the job's
// channel (releaseAnySQL): lines "stop", the token released and the lease
// row's name. A job's own name cannot start so: a new job's name has no
// control characters. Standbys and schedulers ignore it.
const stopPayload = `'` + stopTag + `' || E'\n' || fencing_token || E'\n' || job_name`

// parseStop reads payload as a request to stop: the row and token
// released; ok is false for any other payload.
func parseStop(payload string) (row string, token int64, ok bool) {
	parts := strings.SplitN(payload, "\n", 3)
	if len(parts) != 3 || parts[0] != stopTag {
		return "", 0, false
	}
	token, err := strconv.ParseInt(parts[1], 10, 64)
	return parts[2], token, err == nil
}

// quietStart is how long a holder holds the lease before it listens for
// requests to stop (see watchStopRequests).
const quietStart = time.Second

// watchStopRequests listens, while the lease is held after its first
// second (quietStart), on its job's channel for an operator's release of
// it (stopPayload), and has the keeper renew at once when one comes, and
// once after each LISTEN for a request that came before it: the renewal
// finds the lease released and ends it, so that the work stops within a
// round trip of the request rather than at the next renewal. It listens
// only on a session, whose one connection the renewals use too (no
// connection more), and not where listening is off or a pooler shares
// the server process (session.ErrShared): there the next renewal finds
// the release, as it always does. After a lost connection it listens
// again. It returns when ctx ends (the keeper did).
func (l *Lease) watchStopRequests(ctx context.Context) {
	s := l.store
	conn, ok := s.db.(*session.Conn)
	if !ok || !s.cfg.listen {
		return
	}
	// A cron run of a command that ends within a second should not pay
	// a LISTEN and an UNLISTEN (two round trips, more through a pooler):
	// the holder listens from its first second on, and a request that
	// came before is found by the renewal that follows the LISTEN.
	if (bootClock{}).Wait(ctx, quietStart) != nil {
		return
	}
	channel := jobChannel(s.channel, l.job)
	for ctx.Err() == nil {
		// The LISTEN waits for its turn behind the holder's own
		// statements, and is not cut short when the lease ends: a
		// statement cancelled in flight costs the one connection (and a
		// cancel request a pooler may mishandle).
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RenewInterval)
		sub, err := conn.Listen(lctx, channel)
		cancel()
		switch {
		case errors.Is(err, session.ErrShared), errors.Is(err, session.ErrClosed):
			return
		case err != nil:
			// Tried again after a renew interval; the renewals go on.
			if (bootClock{}).Wait(ctx, s.cfg.RenewInterval) != nil {
				return
			}
			continue
		}
		// A request before the LISTEN (in the first second, or while the
		// connection was lost) is found by a renewal after it.
		l.renewNow()
		l.watchOn(ctx, sub)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		sub.Close(cctx)
		cancel()
	}
}

// watchOn asks the keeper to renew for each request to stop this lease
// that sub hears, until ctx ends or the connection is lost.
func (l *Lease) watchOn(ctx context.Context, sub *session.Subscription) {
	for {
		payload, err := sub.Wait(ctx)
		if err != nil {
			return
		}
		if row, token, ok := parseStop(payload); ok && row == l.row && token == l.token {
			l.renewNow()
		}
	}
}

// renewNow has the keeper renew at once.
func (l *Lease) renewNow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewAsked = true
	if l.wakeKeeper != nil {
		l.wakeKeeper()
	}
}

// renewing reports whether a renewal was asked for (renewNow), and takes
// the request.
func (l *Lease) renewing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	asked := l.renewAsked
	l.renewAsked = false
	return asked
}

// sleep waits d on the lease's clock, or until a renewal is asked for
// (renewNow), or until ctx ends (its error).
func (l *Lease) sleep(ctx context.Context, d time.Duration) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.mu.Lock()
	if l.renewAsked {
		l.mu.Unlock()
		return nil
	}
	l.wakeKeeper = cancel
	l.mu.Unlock()
	_ = l.store.cfg.clock.Wait(wctx, d)
	l.mu.Lock()
	l.wakeKeeper = nil
	l.mu.Unlock()
	return ctx.Err()
}
