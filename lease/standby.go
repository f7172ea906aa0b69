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
	// heard is set once the standby's probe (payload nonce) arrives
	// while it waits: proof that its session outlives a statement, which
	// a pooler in transaction mode (PgBouncer's usual setting for fleets)
	// does not give. Until then, probeBy is when the probe counts as
	// lost, and deaf is set when it was: the standby then polls, as with
	// --listen=false.
	nonce   string
	heard   bool
	probeBy time.Time
	deaf    bool
}

func (s *Store) newStandby(ctx context.Context, job string) *standby {
	sb := &standby{store: s, job: job, nonce: fmt.Sprintf("probe %016x", rand.Uint64())}
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

// probeWindow is how long a probe may take to be heard: the retry
// interval, at least a second for a busy machine.
func (sb *standby) probeWindow() time.Duration {
	return max(sb.store.cfg.RetryInterval, time.Second)
}

// probe announces the standby's nonce on the job's channel through
// another connection, once, as the standby starts a wait of a probe
// window or longer: a listening session hears it then, one behind a
// pooler in transaction mode never does, as it never hears a release.
// The listening connection sends nothing meanwhile, so no statement of
// its own can catch the notification for it from a pooled server that
// happens to listen (another standby's, or its own LISTEN's). Other
// standbys of the job ignore a payload that is not the job's name.
func (sb *standby) probe(ctx context.Context) {
	s := sb.store
	if _, err := s.db.Exec(ctx, "SELECT pg_notify($1, $2)", jobChannel(s.channel, sb.job), sb.nonce); err != nil {
		// The database cannot be used just now; the standby's looks say so.
		s.log.Debug().Err(err).Str("job", sb.job).Msg("cannot probe for notifications; trying on the next listen")
		return
	}
	sb.probeBy = time.Now().Add(sb.probeWindow())
}

// unheard reports whether the probe went unheard past its deadline.
func (sb *standby) unheard() bool {
	return !sb.heard && !sb.probeBy.IsZero() && !time.Now().Before(sb.probeBy)
}

// goDeaf gives up listening for good, saying so once.
func (sb *standby) goDeaf(ctx context.Context) {
	s := sb.store
	s.log.Warn().Str("job", sb.job).Stringer("retry_interval", s.cfg.RetryInterval).
		Msg("standing by without notifications: the database connection does not keep a session (a pooler in transaction mode?); looking every retry interval")
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
	if !sb.heard && sb.probeBy.IsZero() && d >= sb.probeWindow() {
		sb.probe(ctx)
	}
	until := time.Now().Add(d)
	for {
		next := min(time.Until(until), jitter(sb.store.cfg.RenewInterval))
		if !sb.heard && !sb.probeBy.IsZero() {
			next = min(next, time.Until(sb.probeBy))
		}
		notified, alive, err := sb.notification(ctx, max(next, 0))
		switch {
		case err != nil || notified || !alive:
			return notified, err
		case sb.unheard():
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
		switch n.Payload {
		case sb.nonce:
			sb.heard = true
		case sb.job:
			return true, true, nil
		}
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
