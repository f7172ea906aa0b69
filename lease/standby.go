package lease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
// that listen on its channel: a release wakes the job's standbys, not
// every standby of the table.
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

// standby is how a waiting instance talks to the database: one connection
// of its own that both LISTENs for releases and polls, so that a standby
// costs the server a single connection. Without a pool to take it from
// (or with listening turned off) it polls through the Store's DB.
type standby struct {
	store     *Store
	job       string
	conn      *pgx.Conn // nil: poll through store.db, no notifications
	listening bool
	// probe finds out whether the listening connection hears at all;
	// deaf is set when it did not, and the standby then polls, as with
	// --listen=false.
	probe probe
	deaf  bool
}

func (s *Store) newStandby(ctx context.Context, job string) *standby {
	sb := &standby{store: s, job: job, probe: newProbe()}
	sb.listen(ctx)
	return sb
}

// listen takes a connection of the standby's own and LISTENs on it, within
// the retry interval. It reports whether it started listening just now; a
// standby that is not listening polls, and tries again on its next wait.
func (sb *standby) listen(ctx context.Context) bool {
	s := sb.store
	pool, ok := s.db.(*pgxpool.Pool)
	if !ok || !s.cfg.listen || sb.listening || sb.deaf {
		return false
	}
	sb.close(ctx)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RetryInterval)
	defer cancel()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false
	}
	// A connection that listens must not go back to the pool.
	sb.conn = conn.Hijack()
	if _, err := sb.conn.Exec(ctx, "LISTEN "+pgx.Identifier{jobChannel(s.channel, sb.job)}.Sanitize()); err != nil {
		s.log.Debug().Err(err).Str("job", sb.job).Msg("cannot listen for releases; polling for now")
		sb.close(ctx)
		return false
	}
	sb.listening = true
	return true
}

// goDeaf gives up listening for good, saying so once.
func (sb *standby) goDeaf(ctx context.Context) {
	sb.store.sayDeaf(sb.job, "standing by")
	sb.deaf, sb.listening = true, false
	sb.close(ctx)
}

// db is where the standby's attempts run.
func (sb *standby) db() DB {
	if sb.listening && !sb.conn.IsClosed() {
		return sb.conn
	}
	return sb.store.db
}

// wait returns after d, or earlier when the job's lease is released
// (notified is then true), when the listening connection breaks (the caller
// looks at once, through the pool, and listens again), or when ctx ends.
// While it listens it pings the connection every renew interval, so that a
// connection that died without a word (a cut cable, a crashed host) is
// noticed then rather than at the expiry the caller waits for.
func (sb *standby) wait(ctx context.Context, d time.Duration) (notified bool, err error) {
	if !sb.listening {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
			return false, nil
		}
	}
	if d >= sb.store.probeWindow() {
		// A wait this long sends nothing on the connection: see probe.
		sb.probe.send(ctx, sb.store, jobChannel(sb.store.channel, sb.job), sb.job)
	}
	until := time.Now().Add(d)
	for {
		next := sb.probe.bound(min(time.Until(until), jitter(sb.store.cfg.RenewInterval)))
		notified, alive, err := sb.notification(ctx, next)
		switch {
		case err != nil || notified || !alive:
			return notified, err
		case sb.probe.lost():
			// The caller looks now, and every retry interval from here.
			sb.goDeaf(ctx)
			return false, nil
		case time.Until(until) <= 0:
			return false, nil
		}
		if err := sb.ping(ctx); err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			sb.lost(ctx, err)
			return false, nil
		}
	}
}

// notification waits up to d for the job's release to be announced. alive
// is false when the connection broke meanwhile (and was closed).
func (sb *standby) notification(ctx context.Context, d time.Duration) (notified, alive bool, err error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		n, err := sb.conn.WaitForNotification(wctx)
		switch {
		case ctx.Err() != nil:
			return false, true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) || wctx.Err() != nil:
			return false, true, nil
		case err != nil:
			sb.lost(ctx, err)
			return false, false, nil
		}
		if n.Payload == sb.job {
			return true, true, nil
		}
		sb.probe.hear(n.Payload)
	}
}

// lost gives up the listening connection after err: a release may have
// gone unannounced while it was down, so the caller looks now, and listens
// again on its next wait.
func (sb *standby) lost(ctx context.Context, err error) {
	sb.store.log.Debug().Err(err).Str("job", sb.job).Msg("listening connection lost; polling for now")
	sb.listening = false
	sb.close(ctx)
}

// ping proves the listening connection alive (see pingListener).
func (sb *standby) ping(ctx context.Context) error {
	return sb.store.pingListener(ctx, sb.conn)
}

// pingListener proves a listening connection alive with a bare Sync
// message, within a look's budget: a server slowed down by load is not a
// dead connection, and giving up on it early would add a new connection
// to the load. PostgreSQL answers it with ReadyForQuery and starts no
// transaction, where any statement (an empty one, pgx's Ping, included) is
// a transaction that xact_commit counts: a listener's keepalive costs the
// database a wakeup, not a commit. A notification that arrives meanwhile
// is kept by pgx for the next WaitForNotification.
func (s *Store) pingListener(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TTL-s.cfg.StopBefore())
	defer cancel()
	p := conn.PgConn().StartPipeline(ctx)
	err := p.Sync()
	if err == nil {
		_, err = p.GetResults()
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return err
}

// close closes the standby's own connection (a connection that listened
// cannot go back to the pool).
func (sb *standby) close(ctx context.Context) {
	if sb.conn == nil {
		return
	}
	defer func() { sb.conn = nil }()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = sb.conn.Close(ctx)
}
