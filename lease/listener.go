package lease

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/session"
)

// listener LISTENs on a job's channel (jobChannel): a standby's, which
// also makes its attempts on the connection it listens on, and a
// scheduler's RequestWatch. It listens on the Store's own connection when
// the Store's DB is a *session.Conn (ConnectSession: a wrapper's one
// connection, shared with its statements), and otherwise on a connection
// of its own, made as the pool's are, which it closes with it. Its probe
// finds out whether the connection hears at all.
type listener struct {
	store   *Store
	job     string
	channel string
	// conn is where it listens (nil until it first tries); own says
	// whether it made it, and closes it.
	conn  *session.Conn
	own   bool
	sub   *session.Subscription // nil while not listening
	probe probe
	// pooled is set when the connection turned out to reach a server
	// process other than its own (see session.Conn.Listen): a pooler's,
	// which it shares with other clients. Listening is not tried again.
	pooled bool
}

func (s *Store) newListener(job string) *listener {
	return &listener{store: s, job: job, channel: jobChannel(s.channel, job), probe: newProbe()}
}

// canListen reports whether the Store may listen: listening is on, and
// its DB is a session or a pool (whose configuration a listener's own
// connection copies).
func (s *Store) canListen() bool {
	switch s.db.(type) {
	case *session.Conn, *pgxpool.Pool:
		return s.cfg.listen
	}
	return false
}

// listenConn is the connection a listener listens on, and whether it is
// the listener's own: one taken from the pool and never given back (a
// connection that listened must not serve another caller), replaced as
// the pool's are once it breaks.
func (s *Store) listenConn(ctx context.Context) (_ *session.Conn, own bool, _ error) {
	if c, ok := s.db.(*session.Conn); ok {
		return c, false, nil
	}
	pool := s.db.(*pgxpool.Pool)
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	cfg := pool.Config()
	return session.Adopt(c.Hijack(), session.Config{ConnConfig: cfg.ConnConfig, AfterConnect: cfg.AfterConnect}), true, nil
}

// listening reports whether it listens.
func (l *listener) listening() bool { return l.sub != nil }

// open LISTENs, within the retry interval. It reports whether it
// listens; when it does not, the caller polls meanwhile and tries again
// later, unless the connection turned out to be a pooler's (pooled).
func (l *listener) open(ctx context.Context) bool {
	s := l.store
	if !s.canListen() || l.pooled {
		return false
	}
	l.unlisten(ctx)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RetryInterval)
	defer cancel()
	var err error
	if l.conn == nil {
		l.conn, l.own, err = s.listenConn(ctx)
	}
	var sub *session.Subscription
	if err == nil {
		sub, err = l.conn.Listen(ctx, l.channel)
	}
	switch {
	case errors.Is(err, session.ErrShared):
		s.log.Debug().Str("job", l.job).Msg("the connection reaches a pooler's server process, not one of its own: not listening")
		l.pooled = true
	case err != nil:
		s.log.Debug().Err(err).Str("job", l.job).Msg("cannot listen for announcements; polling for now")
	default:
		l.sub = sub
		return true
	}
	l.close(ctx)
	return false
}

// sendProbe announces the probe's nonce, once: from here the connection
// only waits (see probe).
func (l *listener) sendProbe(ctx context.Context) {
	l.probe.send(ctx, l.store, l.conn, l.channel, l.job)
}

// await waits up to d (shortened to the probe's deadline while the probe
// is unheard) for an announcement other than the probe's, and returns its
// payload; "" when the wait ended quiet. When the connection was lost it
// stops listening and returns the error; when ctx ended, ctx's error.
func (l *listener) await(ctx context.Context, d time.Duration) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, l.probe.bound(d))
	defer cancel()
	for {
		payload, err := l.sub.Wait(wctx)
		switch {
		case ctx.Err() != nil:
			return "", ctx.Err()
		case err != nil && wctx.Err() != nil:
			return "", nil
		case err != nil:
			l.close(ctx)
			return "", err
		}
		if !l.probe.hear(payload) {
			return payload, nil
		}
	}
}

// ping proves the listening connection alive (session.Conn.Sync: no
// transaction), within a look's budget: a server slowed down by load is
// not a dead connection, and giving up on it early would add a new
// connection to the load.
func (l *listener) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.store.cfg.TTL-l.store.cfg.StopBefore())
	defer cancel()
	return l.conn.Sync(ctx)
}

// unlisten stops listening, if it listens.
func (l *listener) unlisten(ctx context.Context) {
	if l.sub == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	l.sub.Close(ctx)
	l.sub = nil
}

// close stops listening, and closes the listener's own connection.
func (l *listener) close(ctx context.Context) {
	l.unlisten(ctx)
	if l.own && l.conn != nil {
		l.conn.Close()
		l.conn, l.own = nil, false
	}
}
