package lease

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// listener is a connection of its own that LISTENs on a job's channel
// (jobChannel): a standby's, which also makes its attempts on it, and a
// scheduler's RequestWatch. The connection is taken from the pool and
// never given back: a connection that listened must not serve another
// caller. Its probe finds out whether the connection hears at all.
type listener struct {
	store   *Store
	job     string
	channel string
	conn    *pgx.Conn // nil while not listening
	probe   probe
	// pooled is set when the connection turned out to reach a server
	// process other than its own (see listenAlone): a pooler's, which
	// it shares with other clients. Listening is not tried again.
	pooled bool
}

func (s *Store) newListener(job string) *listener {
	return &listener{store: s, job: job, channel: jobChannel(s.channel, job), probe: newProbe()}
}

// canListen reports whether the Store may listen: listening is on, and it
// has a pool to take connections of their own from.
func (s *Store) canListen() bool {
	_, ok := s.db.(*pgxpool.Pool)
	return ok && s.cfg.listen
}

// listening reports whether the connection is open and listening.
func (l *listener) listening() bool { return l.conn != nil }

// open takes a connection of the listener's own and LISTENs on it, within
// the retry interval. It reports whether it listens; when it does not, the
// caller polls meanwhile and tries again later, unless the connection
// turned out to be a pooler's (pooled).
func (l *listener) open(ctx context.Context) bool {
	s := l.store
	if !s.canListen() || l.pooled {
		return false
	}
	l.close(ctx)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RetryInterval)
	defer cancel()
	c, err := s.db.(*pgxpool.Pool).Acquire(ctx)
	if err != nil {
		return false
	}
	l.conn = c.Hijack()
	alone, err := l.listenAlone(ctx)
	switch {
	case err != nil:
		s.log.Debug().Err(err).Str("job", l.job).Msg("cannot listen for announcements; polling for now")
	case !alone:
		s.log.Debug().Str("job", l.job).Msg("the connection reaches a pooler's server process, not one of its own: not listening")
		l.pooled = true
	default:
		return true
	}
	l.close(ctx)
	return false
}

// listenAlone LISTENs on the connection only when the server process that
// runs the LISTEN is the connection's own, the one whose key the server
// gave at connect: a pooler answers with a key of its own, and in
// transaction mode it lends that process to other clients once the
// transaction ends, where a LISTEN would stay behind, keep sending them
// notifications, and confuse the pooler (PgBouncer logs "got packet 'A'
// from server when not linked"). The check and the LISTEN are one
// transaction, on one server process, and the LISTEN is rolled back when
// the check fails: nothing is left behind on a process the pooler shares.
// A TCP proxy keeps the key, and the session.
func (l *listener) listenAlone(ctx context.Context) (alone bool, err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("LISTEN " + pgx.Identifier{l.channel}.Sanitize())
	b.Queue("SELECT pg_backend_pid()").QueryRow(func(r pgx.Row) error {
		var pid int64
		err := r.Scan(&pid)
		alone = pid == int64(l.conn.PgConn().PID())
		return err
	})
	if err := l.conn.SendBatch(ctx, b).Close(); err != nil {
		return false, err
	}
	end := "ROLLBACK"
	if alone {
		end = "COMMIT"
	}
	_, err = l.conn.Exec(ctx, end)
	return alone && err == nil, err
}

// sendProbe announces the probe's nonce, once: from here the connection
// only waits (see probe).
func (l *listener) sendProbe(ctx context.Context) { l.probe.send(ctx, l.store, l.channel, l.job) }

// await waits up to d (shortened to the probe's deadline while the probe
// is unheard) for an announcement other than the probe's, and returns its
// payload; "" when the wait ended quiet. When the connection broke it
// closes it and returns the error; when ctx ended, ctx's error.
func (l *listener) await(ctx context.Context, d time.Duration) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, l.probe.bound(d))
	defer cancel()
	for {
		n, err := l.conn.WaitForNotification(wctx)
		switch {
		case ctx.Err() != nil:
			return "", ctx.Err()
		case err != nil && wctx.Err() != nil:
			return "", nil
		case err != nil:
			l.close(ctx)
			return "", err
		}
		if !l.probe.hear(n.Payload) {
			return n.Payload, nil
		}
	}
}

// ping proves the listening connection alive with a bare Sync message,
// within a look's budget: a server slowed down by load is not a dead
// connection, and giving up on it early would add a new connection to the
// load. PostgreSQL answers it with ReadyForQuery and starts no
// transaction, where any statement (an empty one, pgx's Ping, included) is
// a transaction that xact_commit counts: a listener's keepalive costs the
// database a wakeup, not a commit. A notification that arrives meanwhile
// is kept by pgx for the next WaitForNotification.
func (l *listener) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.store.cfg.TTL-l.store.cfg.StopBefore())
	defer cancel()
	p := l.conn.PgConn().StartPipeline(ctx)
	err := p.Sync()
	if err == nil {
		_, err = p.GetResults()
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return err
}

// close closes the listener's connection, if open.
func (l *listener) close(ctx context.Context) {
	if l.conn == nil {
		return
	}
	defer func() { l.conn = nil }()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = l.conn.Close(ctx)
}
