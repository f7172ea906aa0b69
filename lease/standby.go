package lease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

// channelFor names the NOTIFY channel of a lease table: "leasewrap:" and
// the table's name, or a hash of it where that would pass PostgreSQL's
// 63-byte limit for identifiers.
func channelFor(table pgx.Identifier) string {
	name := "leasewrap:" + table.Sanitize()
	if len(name) <= 63 {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(table.Sanitize()))
	return fmt.Sprintf("leasewrap:%016x", h.Sum64())
}

// jobChannel names the NOTIFY channel of job's releases in the lease table
// whose channel is tableChannel: "leasewrap:" and the first 32 hex digits
// of the SHA-256 of the two, a newline between them, which fits
// PostgreSQL's 63-byte limit for any job name. It is computed here only:
// the statements that notify a job's channel take it as a parameter.
// PostgreSQL delivers a notification only to the connections
// that listen on its channel, though it signals every listening backend
// of the database for it: hence only the head of a job's queue listens
// (see listenAtHead).
func jobChannel(tableChannel, job string) string {
	sum := sha256.Sum256([]byte(tableChannel + "\n" + job))
	return "leasewrap:" + hex.EncodeToString(sum[:])[:32]
}

// jitter shortens d by up to a tenth, at random, so that a fleet of
// wrappers started together does not poll or renew in step. It only ever
// shortens: a later renewal would eat into the safety margin.
func jitter(d time.Duration) time.Duration {
	return d - rand.N(d/10+1)
}

// standby is how a waiting instance talks to the database: a listener
// that both hears releases and makes the attempts on the connection it
// listens on, so that a standby costs the server a single connection. It
// listens only at the head of its job's queue (listenAtHead). Behind the
// head, or where it cannot listen (a DB that is neither a session nor a
// pool, or listening turned off), it polls through the Store's DB.
type standby struct {
	*listener
	// deaf is set when the probe went unheard: the standby then polls,
	// as with --listen=false.
	deaf bool
	// entry is its queue entry's id ("": not queued), for the handoffs
	// that concern it.
	entry string
}

// newStandby returns a standby of job, listening if it can: so it finds
// out at its start whether its connection can listen at all (a pooler's
// cannot, which it says once, and then it polls as one that may not
// listen). Its first look says whether it keeps listening (see
// listenAtHead).
func (s *Store) newStandby(ctx context.Context, job string) *standby {
	sb := &standby{listener: s.newListener(job)}
	sb.listen(ctx)
	return sb
}

// mayListen reports whether the standby listens when it is at the head of
// its queue: listening is on, and its connection did not turn out deaf.
func (sb *standby) mayListen() bool { return sb.store.canListen() && !sb.deaf }

// listenAtHead makes the standby listen while it is at the head of its
// job's queue (ahead 0 at its last look; -1: not looked yet) and only
// then: PostgreSQL signals every listening backend of the database at
// each NOTIFY, so a release wakes one backend per job that has a queue,
// not one per standby. It reports whether the standby started listening
// just now: it then looks at once, since a release that came before the
// LISTEN was not announced to it. A standby that a higher priority or
// release --to put behind another enters the queue again as a polling
// standby, then stops listening: its entry named the backend it stops
// using, and would not count a moment without it. Where that entry
// fails, it listens on, under the entry it has, and tries again after
// its next look.
func (sb *standby) listenAtHead(ctx context.Context, q *queueEntry, ahead int) bool {
	switch {
	case ahead == 0:
		return sb.listen(ctx)
	case ahead > 0 && sb.listening():
		if !q.enterAs(ctx, false) {
			return false
		}
		sb.close(ctx)
		// A probe sent and not heard yet would count as lost on the next
		// connection: it starts anew.
		if !sb.probe.heard {
			sb.probe = newProbe()
		}
	}
	return false
}

// listen starts listening unless the standby listens already or went
// deaf. It reports whether it started listening just now; a standby that
// is not listening polls, and tries again on its next wait, unless its
// connection turned out to be a pooler's: then it goes deaf.
func (sb *standby) listen(ctx context.Context) bool {
	if sb.listening() || sb.deaf {
		return false
	}
	if sb.open(ctx) {
		return true
	}
	if sb.pooled {
		sb.goDeaf(ctx)
	}
	return false
}

// goDeaf gives up listening for good, saying so once.
func (sb *standby) goDeaf(ctx context.Context) {
	sb.store.sayDeaf(sb.job, "standing by")
	sb.deaf = true
	sb.close(ctx)
}

// db is where the standby's attempts run: the connection it listens on,
// while it listens.
func (sb *standby) db() DB {
	if sb.listening() {
		return sb.conn
	}
	return sb.store.db
}

// wait returns after d, or earlier with the announcement's payload when
// the job's lease is released, or handed on to this standby or to the one
// before it in the queue (see wants); when the listening connection breaks
// (the caller looks at once, on a new connection, and listens again); or when
// ctx ends. While it listens it pings the connection every renew
// interval, so that a connection that died without a word (a cut cable, a
// crashed host) is noticed then rather than at the expiry the caller
// waits for.
func (sb *standby) wait(ctx context.Context, d time.Duration) (payload string, err error) {
	if !sb.listening() {
		return "", bootClock{}.Wait(ctx, d)
	}
	if d >= sb.store.probeWindow() {
		// A wait this long sends nothing on the connection: see probe.
		sb.sendProbe(ctx)
	}
	until := time.Now().Add(d)
	for {
		payload, err := sb.await(ctx, min(time.Until(until), jitter(sb.store.cfg.RenewInterval)))
		switch {
		case ctx.Err() != nil:
			return "", ctx.Err()
		case err != nil:
			sb.lost(ctx, err)
			return "", nil
		case sb.wants(payload):
			return payload, nil
		case sb.probe.lost():
			// The caller looks now, and every retry interval from here.
			sb.goDeaf(ctx)
			return "", nil
		case time.Until(until) <= 0:
			return "", nil
		case payload != "":
			// Not for this standby (a request to run, another's handoff):
			// wait on.
			continue
		}
		if err := sb.ping(ctx); err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			sb.lost(ctx, err)
			return "", nil
		}
	}
}

// wants reports whether an announcement concerns this standby: a release
// of its job, or a handoff to its holder id, or to the entry before its
// own in the queue (it is next if that one never adopts the lease).
func (sb *standby) wants(payload string) bool {
	if payload == sb.job {
		return true
	}
	n, ok := parseHandoff(payload)
	return ok && n.job == sb.job && (n.holder == sb.store.cfg.holder || sb.entry != "" && n.next == sb.entry)
}

// lost gives up the listening connection after err: a release may have
// gone unannounced while it was down, so the caller looks now, and listens
// again on its next wait.
func (sb *standby) lost(ctx context.Context, err error) {
	sb.store.log.Debug().Err(err).Str("job", sb.job).Msg("listening connection lost; polling for now")
	sb.close(ctx)
}
