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
// caller polls meanwhile and tries again later.
func (l *listener) open(ctx context.Context) bool {
	s := l.store
	if !s.canListen() {
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
	if _, err := l.conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		s.log.Debug().Err(err).Str("job", l.job).Msg("cannot listen for announcements; polling for now")
		l.close(ctx)
		return false
	}
	return true
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
